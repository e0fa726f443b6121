"""The window operator over a real (embedded) state store, without Spark:
pane partials as native pre-aggregation would produce them go in epoch by
epoch; what fires must equal a brute-force computation, and nothing may be
left in the store once the input ended."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spate.engine.planner.plan import AggregateCall, WindowAggregate, WindowSpec
from spate.engine.runtime.tasks import TaskEpoch, TaskStats
from spate.engine.runtime.watermarks import END_OF_TIME, NO_WATERMARK
from spate.engine.runtime.window import PANES_PER_CHUNK, WindowOperatorRunner
from spate.statestore import open_store, split_key_groups

GROUPS = 8


def _spec(slide: int, width: int) -> WindowAggregate:
    return WindowAggregate(
        operator_id="q0_window", input_sql="", key_columns=("k0",),
        window=WindowSpec("hop", width, slide),
        aggregates=(AggregateCall("count_star", None, "agg0"),
                    AggregateCall("max", "a0", "agg1")),
        output_view="v")


def _partials(rows: list[tuple[int, int, int]], slide: int) -> pa.Table:
    panes: dict[tuple[int, int], list[int]] = defaultdict(list)
    for key, ts, value in rows:
        panes[(key, ts - ts % slide)].append(value)
    items = sorted(panes.items())
    return pa.table({
        "k0": pa.array([k for (k, _), _ in items], pa.int64()),
        "__pane": pa.array([p for (_, p), _ in items], pa.int64()),
        "__kg": pa.array([k % GROUPS for (k, _), _ in items], pa.int32()),
        "__rows": pa.array([len(v) for _, v in items], pa.int64()),
        "p0_0": pa.array([len(v) for _, v in items], pa.int64()),
        "p1_0": pa.array([max(v) for _, v in items], pa.int64()),
    })


def _brute_force(rows: list[tuple[int, int, int]], slide: int,
                 width: int) -> set[tuple[int, int, int, int]]:
    windows: dict[tuple[int, int], list[int]] = defaultdict(list)
    for key, ts, value in rows:
        start = ts - ts % slide
        for begin in range(start - width + slide, start + 1, slide):
            windows[(key, begin)].append(value)
    return {(key, begin, len(v), max(v)) for (key, begin), v in windows.items()}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.integers(0, 3), st.integers(0, 900), st.integers(-9, 9)),
                     min_size=1, max_size=80),
       # a width longer than a chunk of panes makes windows span chunk boundaries
       slide=st.sampled_from([1, 3]), factor=st.sampled_from([1, 5, PANES_PER_CHUNK + 16]),
       epochs=st.integers(1, 6), parallelism=st.integers(1, 3))
def test_operator_over_the_store_equals_brute_force(rows, slide, factor, epochs, parallelism,
                                                    tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    width = slide * factor
    ordered = sorted(rows, key=lambda r: r[1])
    size = -(-len(ordered) // epochs)
    chunks = [ordered[i:i + size] for i in range(0, len(ordered), size)]
    path: Path = tmp_path_factory.mktemp("operator") / "state.db"
    with open_store(f"sqlite:///{path}") as store:
        state = store.pipeline("t", "p")
        ranges = split_key_groups(GROUPS, parallelism)
        runner = WindowOperatorRunner(_spec(slide, width), GROUPS)
        watermark, fired = NO_WATERMARK, []
        for epoch, chunk in enumerate(chunks):
            after = END_OF_TIME if epoch == len(chunks) - 1 else max(r[1] for r in chunk)
            state.begin_epoch(epoch, ranges)
            task_epoch = TaskEpoch(b"", "t", "p", "run", epoch, epoch - 1 if epoch else None,
                                   tuple((r.start, r.stop) for r in ranges), watermark, after)
            stats = TaskStats()
            for key_groups in ranges:  # each range as its own task would
                writer = state.writer(epoch, key_groups)
                results = runner.process(_partials(chunk, slide), state, writer, task_epoch,
                                         stats)
                writer.commit()
                fired.extend((key[0], f.start_us, *f.values) for key, f in results)
            state.commit_epoch(epoch, {})
            assert stats.rows_late == 0
            watermark = after
        got = set(fired)
        assert len(got) == len(fired), "a window fired twice"
        assert got == _brute_force(ordered, slide, width)
        for name in (runner.records_name, runner.panes_name, runner.timers_name):
            assert not list(state.scan(name, range(GROUPS))), f"{name} left state behind"



def test_a_cold_task_reads_only_the_keys_its_epoch_touches(tmp_path: Path) -> None:
    """After a move or rescale a task's cache is empty: an epoch touching 5 of 4,000
    keys (no window due) reads those keys' entries from the store, not the groups'."""
    from spate.statestore import StateCache

    url = f"sqlite:///{tmp_path / 'state.db'}"
    spec = _spec(1_000, 10**9)  # the watermark stays before every window end: none fires
    ranges = split_key_groups(GROUPS, 1)
    bounds = tuple((r.start, r.stop) for r in ranges)

    def run_epoch(epoch: int, rows: list[tuple[int, int, int]], cache: StateCache) -> int:
        with open_store(url, cache=cache) as store:
            state = store.pipeline("t", "p")
            state.begin_epoch(epoch, ranges)
            writer = state.writer(epoch, ranges[0])
            task_epoch = TaskEpoch(b"", "t", "p", "run", epoch, epoch - 1 if epoch else None,
                                   bounds, NO_WATERMARK, 100)
            fired = WindowOperatorRunner(spec, GROUPS).process(
                _partials(rows, 1_000), state, writer, task_epoch, TaskStats())
            writer.commit()
            state.commit_epoch(epoch, {})
            assert fired == []
            return cache.stats().remote_bytes

    run_epoch(0, [(key, 500, key) for key in range(4_000)], StateCache(10**8))
    with open_store(url) as store:
        state = store.pipeline("t", "p")
        stored = sum(len(v) for name in ("q0_window", "q0_window/panes")
                     for _, _, v in state.scan(name, range(GROUPS), epoch=0))
    read = run_epoch(1, [(key, 700, 1) for key in (3, 77, 1_001, 2_002, 3_999)],
                     StateCache(10**8))
    assert 0 < read < stored / 100, f"read {read} bytes of {stored} for 5 keys"


def test_a_python_error_in_an_epoch_is_reported_by_its_last_line() -> None:
    from spate.engine.runtime.failures import root_message as _root_message

    text = ("An exception was raised by the Python Proxy. Return Message: Traceback (most "
            "recent call last):\n  File \"x.py\", line 1, in f\n    g()\n"
            "ValueError: the actual problem\n")
    assert _root_message(Exception(text)) == "ValueError: the actual problem"


@pytest.mark.spark
def test_the_pre_aggregation_is_built_once_and_serves_every_epoch(spark) -> None:  # type: ignore[no-untyped-def]
    """Each epoch's rows are pre-aggregated with the expressions the first epoch built
    (parsing them again costs JVM calls per aggregate and epoch)."""
    runner = WindowOperatorRunner(_spec(10, 10), GROUPS)
    first = spark.createDataFrame([(1, 0, 5, 1), (1, 0, 7, 1)], "k0 BIGINT, __pane BIGINT, "
                                  "a0 BIGINT, __kg INT")
    second = spark.createDataFrame([(2, 10, 3, 2), (2, 10, 9, 2), (2, 10, 4, 2)],
                                   "k0 BIGINT, __pane BIGINT, a0 BIGINT, __kg INT")
    assert [tuple(r) for r in runner.partials(first).collect()] == [(1, 0, 1, 2, 2, 7)]
    built = runner._partial_columns  # noqa: SLF001 - what the next epoch must reuse
    assert [tuple(r) for r in runner.partials(second).collect()] == [(2, 10, 2, 3, 3, 9)]
    assert built is not None and runner._partial_columns is built  # noqa: SLF001
