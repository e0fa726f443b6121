"""The local cache: epoch tags, LRU bound, counters."""

from __future__ import annotations

from spate.statestore import StateCache


def test_hit_only_at_the_cached_epoch() -> None:
    cache = StateCache(max_bytes=10_000)
    cache.put(("s", "op", 1), 4, {("k",): b"v"})
    assert cache.get(("s", "op", 1), 4) == {("k",): b"v"}
    assert cache.get(("s", "op", 1), 5) is None
    assert cache.get(("s", "op", 2), 4) is None
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.entries) == (1, 2, 1)


def test_least_recently_used_group_is_evicted_at_the_bound() -> None:
    cache = StateCache(max_bytes=1_000)
    for group in range(3):
        cache.put(("s", "op", group), 0, {("k",): b"x" * 200})
    cache.get(("s", "op", 0), 0)  # group 0 is now the most recent
    cache.put(("s", "op", 3), 0, {("k",): b"x" * 200})
    assert cache.stats().bytes <= 1_000
    assert cache.get(("s", "op", 0), 0) is not None
    assert cache.get(("s", "op", 1), 0) is None
    assert cache.stats().evictions >= 1


def test_a_group_larger_than_the_cache_is_served_not_kept() -> None:
    cache = StateCache(max_bytes=100)
    view = cache.put(("s", "op", 0), 0, {("k",): b"x" * 500})
    assert view[("k",)] == b"x" * 500
    assert cache.stats().entries == 0


def test_advance_applies_changes_and_drops_stale_groups() -> None:
    cache = StateCache(max_bytes=10_000)
    cache.put(("s", "op", 0), 1, {("a",): b"1", ("b",): b"2"})
    cache.put(("s", "op", 1), 0, {("a",): b"1"})
    cache.advance(("s", "op", 0), 1, 2, {("a",): None, ("c",): b"3"})
    cache.advance(("s", "op", 1), 1, 2, {})
    assert cache.get(("s", "op", 0), 2) == {("b",): b"2", ("c",): b"3"}
    assert cache.get(("s", "op", 1), 2) is None  # it was at epoch 0, not 1
    assert cache.get(("s", "op", 1), 0) is None


def test_cache_size_comes_from_the_environment(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("SPATE_STATE_CACHE_BYTES", "12345")
    assert StateCache().max_bytes == 12345


def test_advance_keeps_the_byte_count_exact() -> None:
    cache = StateCache(max_bytes=100_000)
    cache.put(("s", "op", 0), 1, {("a", 1): b"x" * 10, ("b",): b"y" * 20})
    cache.advance(("s", "op", 0), 1, 2, {("a", 1): None, ("b",): b"z" * 5, ("c",): b"w"})
    advanced = cache.stats().bytes
    fresh = StateCache(max_bytes=100_000)
    fresh.put(("s", "op", 0), 2, {("b",): b"z" * 5, ("c",): b"w"})
    assert advanced == fresh.stats().bytes


def test_an_expected_publish_advances_the_group_on_the_first_read_of_that_epoch() -> None:
    cache = StateCache(max_bytes=10_000)
    slot = ("scope", "op", 3)
    cache.put(slot, 4, {("a",): b"1", ("b",): b"2"})
    # two writers of the range in epoch 5 (two stateful steps): their changes merge
    cache.expect(slot, 4, 5, {("a",): b"9"})
    cache.expect(slot, 4, 5, {("b",): None})
    assert cache.get(slot, 5) == {("a",): b"9"}
    assert cache.stats().hits == 1


def test_an_expectation_of_another_epoch_is_not_applied() -> None:
    cache = StateCache(max_bytes=10_000)
    slot = ("scope", "op", 3)
    cache.put(slot, 4, {("a",): b"1"})
    cache.expect(slot, 4, 5, {("a",): b"9"})
    # epoch 5 was published by another process's attempt and 6 already followed
    assert cache.get(slot, 6) is None
    assert cache.get(slot, 5) is None  # the expectation went with the first read
    assert cache.get(slot, 4) == {("a",): b"1"}


def test_a_task_reads_through_its_process_store_and_learns_of_the_publish(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from spate.statestore import open_store, ship, task_pipeline

    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    driver = store.pipeline("t", "p")
    shipped = ship(driver)
    task = task_pipeline(shipped, "t", "p", "run-1")
    assert task_pipeline(shipped, "t", "p", "run-1") is task  # opened once per process
    for epoch, value in enumerate((b"x", b"y")):
        driver.begin_epoch(epoch, [range(0, 4)])
        assert task.read_group("op", 2, epoch=epoch - 1 if epoch else None).get(("k",)) \
            == (None if epoch == 0 else b"x")
        writer = task.task_writer(epoch, range(0, 4), epoch - 1 if epoch else None, "op")
        writer.put("op", 2, ("k",), value)
        writer.commit()
        driver.commit_epoch(epoch, {})
    misses = task.cache.stats().misses
    assert task.read_group("op", 2, epoch=1) == {("k",): b"y"}
    assert task.cache.stats().misses == misses, "the task's own write was served locally"
    store.close()


def test_a_task_writer_brings_forward_only_the_operator_it_owns(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Another step's task, maybe in another process, may write the other operators."""
    from spate.statestore import open_store, ship, task_pipeline

    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    driver = store.pipeline("t", "p")
    task = task_pipeline(ship(driver), "t", "p", "run-2")
    driver.begin_epoch(0, [range(0, 4)])
    for operator in ("op", "op/timers", "other"):
        task.read_group(operator, 1, epoch=None)
    writer = task.task_writer(0, range(0, 4), None, "op")
    writer.put("op", 1, ("k",), b"v")
    writer.commit()
    driver.commit_epoch(0, {})
    misses = task.cache.stats().misses
    assert task.read_group("op", 1, epoch=0) == {("k",): b"v"}
    assert task.read_group("op/timers", 1, epoch=0) == {}
    assert task.cache.stats().misses == misses
    task.read_group("other", 1, epoch=0)
    assert task.cache.stats().misses == misses + 1, "a group it does not own is read again"
    store.close()


def test_point_reads_cache_the_keys_read_and_a_group_read_makes_the_group_whole() -> None:
    cache = StateCache(max_bytes=10_000)
    slot = ("s", "op", 0)
    assert cache.get_keys(slot, 3, [("a",)]) == ({}, [("a",)])
    cache.put_keys(slot, 3, {("a",): b"1", ("b",): None})
    known, unknown = cache.get_keys(slot, 3, [("a",), ("b",), ("c",)])
    assert (known, unknown) == ({("a",): b"1", ("b",): None}, [("c",)])
    assert cache.get(slot, 3) is None, "a group known in part is no whole-group hit"
    cache.put(slot, 3, {("a",): b"1", ("c",): b"3"})
    assert cache.get_keys(slot, 3, [("b",), ("c",)]) == ({("b",): None, ("c",): b"3"}, [])


def test_a_partly_known_group_advances_and_remembers_deletions() -> None:
    cache = StateCache(max_bytes=10_000)
    slot = ("s", "op", 0)
    cache.put_keys(slot, 1, {("a",): b"1", ("b",): b"2"})
    cache.advance(slot, 1, 2, {("a",): None, ("c",): b"3"})
    assert cache.get_keys(slot, 2, [("a",), ("b",), ("c",), ("d",)]) == (
        {("a",): None, ("b",): b"2", ("c",): b"3"}, [("d",)])
    fresh = StateCache(max_bytes=10_000)
    fresh.put_keys(slot, 2, {("a",): None, ("b",): b"2", ("c",): b"3"})
    assert cache.stats().bytes == fresh.stats().bytes


def test_point_reads_go_to_the_store_only_for_keys_not_known(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from spate.statestore import open_store

    store = open_store(f"sqlite:///{tmp_path / 'state.db'}", cache=StateCache(10**7))
    state = store.pipeline("t", "p")
    state.begin_epoch(0, [range(0, 4)])
    writer = state.writer(0, range(0, 4))
    for i in range(100):
        writer.put("op", 1, (f"k{i}",), b"v" * 100)
    writer.commit()
    state.commit_epoch(0, {})
    reader = open_store(f"sqlite:///{tmp_path / 'state.db'}", cache=StateCache(10**7))
    cold = reader.pipeline("t", "p")
    assert cold.get_many("op", 1, [("k1",), ("k2",), ("nope",)], epoch=0) == [
        b"v" * 100, b"v" * 100, None]
    assert cold.cache.stats().remote_bytes == 200, "two values read, not the group's hundred"
    assert cold.get_many("op", 1, [("k2",), ("nope",)], epoch=0) == [b"v" * 100, None]
    assert cold.cache.stats().remote_bytes == 200
    assert len(cold.read_group("op", 1, epoch=0)) == 100
    store.close()
    reader.close()
