"""The contract every state-store backend keeps, run against each backend present."""

from __future__ import annotations

import random
import signal

import pytest

from spate import statestore
from spate.statestore import (
    DEFAULT_KEY_GROUPS,
    EpochNotBegunError,
    EpochUnavailableError,
    IncompleteEpochError,
    KeyGroupOutOfRangeError,
    OutOfOrderEpochError,
    StateCache,
    split_key_groups,
)
from tests.statestore.conftest import TENANT, OpenPipeline, finish, worker
from tests.statestore.workers import OPERATOR, run_epochs, value_for

ALL = range(DEFAULT_KEY_GROUPS)


def commit(state, epoch, changes, ranges=(ALL,), metadata=None):  # type: ignore[no-untyped-def]
    """Begin, stage ``changes`` ({(group, key): value or None}) and publish one epoch."""
    state.begin_epoch(epoch, list(ranges))
    writers = [state.writer(epoch, r) for r in ranges]
    for (group, key), value in changes.items():
        writer = next(w for w in writers if group in w.key_groups)
        if value is None:
            writer.delete(OPERATOR, group, key)
        else:
            writer.put(OPERATOR, group, key, value)
    for writer in writers:
        writer.commit()
    state.commit_epoch(epoch, metadata or {"epoch": epoch})


def contents(state, epoch=None):  # type: ignore[no-untyped-def]
    return {(g, k): v for g, k, v in state.scan(OPERATOR, ALL, epoch=epoch)}


def test_reads_see_only_committed_epochs(open_pipeline: OpenPipeline) -> None:
    state = open_pipeline()
    assert state.last_committed_epoch() is None
    assert state.get(OPERATOR, 1, ("a",)) is None
    commit(state, 0, {(1, ("a",)): b"one", (5, ("b", 2)): b"two"})
    state.begin_epoch(1, [ALL])
    writer = state.writer(1, ALL)
    writer.put(OPERATOR, 1, ("a",), b"staged")
    writer.commit()
    assert state.get(OPERATOR, 1, ("a",)) == b"one", "a staged write became visible"
    state.commit_epoch(1, {"note": "x"})
    assert state.get(OPERATOR, 1, ("a",)) == b"staged"
    assert state.get(OPERATOR, 1, ("a",), epoch=0) == b"one"
    assert state.get_many(OPERATOR, 5, [("b", 2), ("zz",)]) == [b"two", None]
    assert state.epoch_metadata() == {"note": "x"}
    assert state.epoch_metadata(0) == {"epoch": 0}


def test_deletes_and_prefix_scans(open_pipeline: OpenPipeline) -> None:
    state = open_pipeline()
    commit(state, 0, {(3, ("u", 1, "x")): b"1", (3, ("u", 1, "y")): b"2", (3, ("u", 2)): b"3",
                      (3, ("u",)): b"4", (4, ("u", 1)): b"5"})
    commit(state, 1, {(3, ("u", 1, "y")): None})
    found = list(state.scan(OPERATOR, range(3, 4), ("u", 1)))
    assert found == [(3, ("u", 1, "x"), b"1")]
    assert [k for _, k, _ in state.scan(OPERATOR, range(3, 5), ("u",))] == [
        ("u",), ("u", 1, "x"), ("u", 2), ("u", 1)]
    assert state.read_group(OPERATOR, 3, epoch=0)[("u", 1, "y")] == b"2"


def test_killed_committer_leaves_previous_epoch_intact(open_pipeline: OpenPipeline,
                                                       store_url: str) -> None:
    state = open_pipeline()
    commit(state, 0, {(g, ("key", g)): value_for(g, 0) for g in ALL})
    process = worker(store_url, state.pipeline, "stage-then-wait", 1)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "staged", process.stderr.read()  # type: ignore[union-attr]
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert state.last_committed_epoch() == 0
    assert contents(state) == {(g, ("key", g)): value_for(g, 0) for g in ALL}
    # The next attempt at epoch 1 starts from epoch 0: nothing of the crashed one survives.
    commit(state, 1, {(7, ("other",)): b"new"})
    after = contents(state)
    assert after[(7, ("other",))] == b"new"
    assert after[(9, ("key", 9))] == value_for(9, 0)


def test_replayed_epoch_changes_nothing(open_pipeline: OpenPipeline) -> None:
    state = open_pipeline()
    commit(state, 0, {(1, ("a",)): b"first"})
    commit(state, 1, {(1, ("a",)): b"second"})
    commit(state, 1, {(1, ("a",)): b"replayed", (2, ("b",)): b"replayed"},
           metadata={"replay": True})
    assert state.last_committed_epoch() == 1
    assert contents(state) == {(1, ("a",)): b"second"}
    assert state.epoch_metadata() == {"epoch": 1}
    commit(state, 2, {(2, ("b",)): b"third"})
    assert contents(state) == {(1, ("a",)): b"second", (2, ("b",)): b"third"}


def test_out_of_order_and_incomplete_epochs_are_rejected(open_pipeline: OpenPipeline) -> None:
    state = open_pipeline()
    commit(state, 4, {(1, ("a",)): b"x"})  # the first epoch may be any number
    with pytest.raises(OutOfOrderEpochError, match="next must be 5"):
        state.begin_epoch(6, [ALL])
    with pytest.raises(OutOfOrderEpochError):
        state.commit_epoch(6, {})
    with pytest.raises(EpochNotBegunError):
        state.commit_epoch(5, {})
    halves = split_key_groups(DEFAULT_KEY_GROUPS, 2)
    state.begin_epoch(5, halves)
    state.writer(5, halves[0]).commit()
    with pytest.raises(IncompleteEpochError, match="64..127"):
        state.commit_epoch(5, {})
    with pytest.raises(KeyGroupOutOfRangeError):
        state.writer(5, halves[0]).put(OPERATOR, 100, ("k",), b"v")
    with pytest.raises(KeyGroupOutOfRangeError):
        state.writer(5, range(0, 10)).commit()
    state.writer(5, halves[1]).commit()
    state.commit_epoch(5, {})
    assert state.last_committed_epoch() == 5


def test_discard_uncommitted_removes_staged_writes(open_pipeline: OpenPipeline) -> None:
    state = open_pipeline()
    commit(state, 0, {(1, ("a",)): b"kept"})
    state.begin_epoch(1, [ALL])
    writer = state.writer(1, ALL)
    writer.put(OPERATOR, 1, ("a",), b"dropped")
    writer.commit()
    state.discard_uncommitted()
    with pytest.raises(EpochNotBegunError):
        state.commit_epoch(1, {})
    commit(state, 1, {(2, ("b",)): b"b"})
    assert contents(state) == {(1, ("a",)): b"kept", (2, ("b",)): b"b"}


def test_large_values_read_back_whole(open_pipeline: OpenPipeline) -> None:
    state = open_pipeline()
    chooser = random.Random(7)
    big = {(g, ("big", g)): chooser.randbytes(size)
           for g, size in [(0, 1_500_000), (1, 150_000), (2, 99_999), (3, 100_001), (4, 0)]}
    commit(state, 0, big)
    assert contents(state) == big
    assert state.get(OPERATOR, 0, ("big", 0)) == big[(0, ("big", 0))]
    assert dict(state.read_group(OPERATOR, 3)) == {("big", 3): big[(3, ("big", 3))]}


def test_many_keys_in_one_epoch(open_pipeline: OpenPipeline) -> None:
    state = open_pipeline()
    changes = {(i % DEFAULT_KEY_GROUPS, ("k", i)): i.to_bytes(4, "big") * 50
               for i in range(20_000)}
    commit(state, 0, changes, ranges=split_key_groups(DEFAULT_KEY_GROUPS, 3))
    assert contents(state) == changes


@pytest.mark.parametrize("parallelism", range(1, 8))
def test_key_group_split_covers_every_group_once(open_pipeline: OpenPipeline,
                                                 parallelism: int) -> None:
    state = open_pipeline()
    run_epochs(state, 0, 1, parallelism)
    written = contents(state)
    assert sorted(g for g, _ in written) == list(ALL)
    assert all(v == value_for(g, 0) for (g, _), v in written.items())


def test_gc_drops_superseded_versions(open_pipeline: OpenPipeline) -> None:
    state = open_pipeline()
    commit(state, 0, {(1, ("a",)): b"a0", (2, ("b",)): b"b0", (3, ("c",)): b"c0"})
    commit(state, 1, {(1, ("a",)): b"a1", (2, ("b",)): None})
    commit(state, 2, {(1, ("a",)): b"a2"})
    report = state.gc()
    # a0, a1 superseded; b0 and its deletion marker gone
    assert report.versions_removed == 4
    assert report.bytes_removed == 6
    assert contents(state) == {(1, ("a",)): b"a2", (3, ("c",)): b"c0"}
    with pytest.raises(EpochUnavailableError, match="garbage-collected"):
        state.get(OPERATOR, 1, ("a",), epoch=1)
    with pytest.raises(EpochUnavailableError, match="not committed"):
        state.get(OPERATOR, 1, ("a",), epoch=3)
    assert state.gc().versions_removed == 0
    info = state.describe()
    assert info.last_committed_epoch == 2
    assert [(o.operator, o.keys, o.value_bytes) for o in info.operators] == [
        (OPERATOR, 2, 4)]


def test_concurrent_writers_in_several_processes(open_pipeline: OpenPipeline,
                                                 store_url: str) -> None:
    state = open_pipeline()
    ranges = split_key_groups(DEFAULT_KEY_GROUPS, 4)
    for epoch in range(3):
        state.begin_epoch(epoch, ranges)
        writers = [worker(store_url, state.pipeline, "write-range", epoch, r.start, r.stop)
                   for r in ranges]
        for process in writers:
            finish(process)
        state.commit_epoch(epoch, {"epoch": epoch})
    assert contents(state) == {(g, ("key", g)): value_for(g, 2) for g in ALL}


def test_concurrent_pipelines_in_several_processes(open_pipeline: OpenPipeline,
                                                   store_url: str) -> None:
    states = [open_pipeline() for _ in range(4)]
    processes = [worker(store_url, s.pipeline, "run-epochs", 0, 5, 1 + i)
                 for i, s in enumerate(states)]
    for process in processes:
        finish(process)
    for state in states:
        assert state.last_committed_epoch() == 4
        assert contents(state) == {(g, ("key", g)): value_for(g, 4) for g in ALL}


def test_cache_serves_warm_reads_and_sees_other_processes(open_pipeline: OpenPipeline,
                                                          store_url: str) -> None:
    cache = StateCache()
    state = open_pipeline(cache=cache)
    commit(state, 0, {(g, ("key", g)): value_for(g, 0) for g in ALL})
    assert state.read_group(OPERATOR, 5, epoch=0) == {("key", 5): value_for(5, 0)}
    misses = cache.stats().misses
    commit(state, 1, {(5, ("key", 5)): b"mine", (5, ("new",)): b"n"})
    # this process published epoch 1: its cached group moved along, no remote read
    assert dict(state.read_group(OPERATOR, 5, epoch=1)) == {("key", 5): b"mine",
                                                            ("new",): b"n"}
    assert cache.stats().misses == misses
    assert cache.stats().hits >= 1
    # another process commits epoch 2: the next read of the last epoch misses and refetches
    finish(worker(store_url, state.pipeline, "run-epochs", 2, 1, 3))
    assert state.read_group(OPERATOR, 5) == {("key", 5): value_for(5, 2), ("new",): b"n"}
    assert cache.stats().misses == misses + 1


def test_model_of_crashes_and_replays(open_pipeline: OpenPipeline) -> None:
    """A fixed random walk (the property test covers more): crashes lose only staged work."""
    state = open_pipeline()
    chooser = random.Random(11)
    model: dict[tuple[int, tuple[str, int]], bytes] = {}
    epoch = 0
    for _ in range(12):
        changes: dict[tuple[int, tuple[str, int]], bytes | None] = {}
        for _ in range(chooser.randint(1, 8)):
            key = (chooser.randrange(4), ("k", chooser.randrange(6)))
            changes[key] = None if chooser.random() < 0.3 else chooser.randbytes(3)
        if chooser.random() < 0.3:  # crash after staging: the model does not move
            state.begin_epoch(epoch, [ALL])
            writer = state.writer(epoch, ALL)
            for (group, key), value in changes.items():
                writer.put(OPERATOR, group, key, value or b"")
            writer.commit()
            state.discard_uncommitted()
            continue
        commit(state, epoch, changes)
        for key, value in changes.items():
            if value is None:
                model.pop(key, None)
            else:
                model[key] = value
        epoch += 1
        assert contents(state) == model



def test_reads_of_an_unknown_pipeline_create_nothing(open_pipeline: OpenPipeline,
                                                     store_url: str) -> None:
    state = open_pipeline()
    assert state.last_committed_epoch() is None
    assert list(state.scan(OPERATOR, ALL)) == [] and state.epoch_metadata() == {}
    assert state.describe().last_committed_epoch is None
    assert state.gc().versions_removed == 0
    with pytest.raises(EpochUnavailableError):
        state.get(OPERATOR, 0, ("k",), epoch=0)
    with statestore.open_store(store_url) as store:
        assert (TENANT, state.pipeline) not in store.pipelines()
