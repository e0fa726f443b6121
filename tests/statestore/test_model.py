"""Property test: random writes, commits, replays, crashes and GCs against each
backend give the same state as a plain dict."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spate.statestore import DEFAULT_KEY_GROUPS, StateCache
from tests.statestore.conftest import OpenPipeline
from tests.statestore.workers import OPERATOR

ALL = range(DEFAULT_KEY_GROUPS)
HALVES = [range(0, 64), range(64, DEFAULT_KEY_GROUPS)]

keys = st.tuples(st.sampled_from([0, 1, 64, 127]),
                 st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-2, 2)))
operations = st.lists(st.one_of(
    st.tuples(st.just("put"), keys, st.binary(max_size=6)),
    st.tuples(st.just("delete"), keys),
    st.tuples(st.just("commit")),
    st.tuples(st.just("replay")),
    st.tuples(st.just("crash")),
    st.tuples(st.just("gc")),
), max_size=40)


def _stage(state: Any, epoch: int, pending: dict[Any, bytes | None]) -> None:
    state.begin_epoch(epoch, HALVES)
    writers = [state.writer(epoch, r) for r in HALVES]
    for (group, key), value in pending.items():
        writer = writers[0] if group < 64 else writers[1]
        if value is None:
            writer.delete(OPERATOR, group, key)
        else:
            writer.put(OPERATOR, group, key, value)
    for writer in writers:
        writer.commit()


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=operations)
def test_store_behaves_like_a_dict(open_pipeline: OpenPipeline, steps: list[Any]) -> None:
    state = open_pipeline(cache=StateCache())
    reader = open_pipeline(state.pipeline, cache=StateCache())  # another connection
    model: dict[Any, bytes] = {}
    pending: dict[Any, bytes | None] = {}
    epoch = 0
    for step in steps:
        if step[0] == "put":
            pending[step[1]] = step[2]
        elif step[0] == "delete":
            pending[step[1]] = None
        elif step[0] == "commit":
            _stage(state, epoch, pending)
            state.commit_epoch(epoch, {"epoch": epoch})
            for key, value in pending.items():
                if value is None:
                    model.pop(key, None)
                else:
                    model[key] = value
            pending, epoch = {}, epoch + 1
        elif step[0] == "replay" and epoch > 0:
            _stage(state, epoch - 1, {(0, ("replayed", 0)): b"x"})
            state.commit_epoch(epoch - 1, {"epoch": "replayed"})
        elif step[0] == "crash":  # staged, never published; the next attempt discards it
            _stage(state, epoch, pending)
            pending = {}
        elif step[0] == "gc":
            state.gc()
        for view in (state, reader):
            assert {(g, k): v for g, k, v in view.scan(OPERATOR, ALL)} == model
            for (group, key), value in model.items():
                assert view.read_group(OPERATOR, group)[key] == value
