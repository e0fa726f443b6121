"""The columnar TUMBLE/HOP operator over a real (embedded) state store, without Spark:
pane partials as native pre-aggregation would produce them go in epoch by epoch
(several ranges, late rows, NULL values and keys); what fires must equal a
brute-force computation, in window order, and nothing may be left in the store
once the input ended."""

from __future__ import annotations

import math
import operator
import statistics
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from functools import reduce
from itertools import accumulate
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spate.engine.operators.window_columns import fired_windows, key_ids
from spate.engine.planner.plan import WINDOW_COLUMN, AggregateCall, WindowAggregate, WindowSpec
from spate.engine.runtime.output import output_schema
from spate.engine.runtime.tasks import TaskEpoch, TaskStats
from spate.engine.runtime.watermarks import END_OF_TIME, NO_WATERMARK
from spate.engine.runtime.window_columns import (
    ENTRIES_PER_CHUNK,
    PANES_PER_CHUNK,
    WindowColumnsRange,
    columnar,
)
from spate.statestore import StateCache, open_store, split_key_groups
from tests.engine.runtime.ranges import entries_left, through_ranges

GROUPS = 8
Row = tuple[Any, int, Any]  # key (None: NULL), event time, value (None: NULL)
AGGREGATES = (AggregateCall("count_star", None, "n"), AggregateCall("count", "a0", "c"),
              AggregateCall("sum", "a0", "s"), AggregateCall("avg", "a0", "mean"),
              AggregateCall("min", "a0", "lo"), AggregateCall("max", "a0", "hi"),
              AggregateCall("var_samp", "a0", "spread"), AggregateCall("corr", "a1", "r"))
#: The (y, x) pairs of :data:`AGGREGATES`' corr: the value against the time's remainder.
MODULUS = 7
#: TUMBLE and HOP windows also count distinct values and take first and last values in
#: columns (sessions do not).
WINDOW_AGGREGATES = AGGREGATES + (AggregateCall("count_distinct", "a0", "d"),
                                  AggregateCall("first_value", "a0", "fv"),
                                  AggregateCall("last_value", "a0", "lv"),
                                  AggregateCall("bit_and", "a0", "ba"),
                                  AggregateCall("bit_or", "a0", "bo"),
                                  AggregateCall("bit_xor", "a0", "bx"),
                                  AggregateCall("median", "a0", "med"),
                                  AggregateCall("percentile_cont", "a0", "pc", 0.3),
                                  AggregateCall("array_agg", "a0", "aa"),
                                  AggregateCall("percentile_cont_weighted", "a0", "pw", 0.6))
#: The bags of :data:`WINDOW_AGGREGATES` in order: (name, fraction; None: array_agg).
BAGS = (("med", 0.5), ("pc", 0.3), ("aa", None))
BAG = pa.list_(pa.struct([pa.field("v", pa.int64())]))
#: The weighted percentile's bags: ``[x, weight]`` as doubles, NULL for a NULL x.
WEIGHTED = pa.list_(pa.struct([pa.field("v", pa.list_(pa.float64()))]))


def _weight(value: int) -> int:
    """The weight of a value in the weighted percentile: 0 (ignored), 1 or 2."""
    return abs(value) % 3
#: The bitwise aggregates of :data:`WINDOW_AGGREGATES` in order: (name, operation).
BITWISE = (("ba", operator.and_), ("bo", operator.or_), ("bx", operator.xor))
PAIR = pa.struct([pa.field("t", pa.int64()), pa.field("v", pa.int64())])


def _by_time(row: tuple[int, Any]) -> tuple[Any, ...]:
    """How first_value and last_value order rows: by time, then value, NULL first."""
    ts, value = row
    return (ts, value is not None, value if value is not None else 0)


def _in_order(values: list[Any]) -> list[Any]:
    """``values`` sorted, NULLs first (array_agg's order is not defined: compared so)."""
    return sorted(values, key=lambda v: (v is not None, v if v is not None else 0))


def _percentile(values: list[int], fraction: float) -> float | None:
    """percentile_cont: linear between the ranks around ``fraction * (n - 1)``."""
    if not values:
        return None
    ordered = sorted(values)
    position = fraction * (len(ordered) - 1)
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def _moments(values: list[float]) -> list[Any]:
    """A pane's ``[count, mean, squared deviations]`` as Spark's partial SQL gives them."""
    if not values:
        return [0, None, None]
    mean = statistics.fmean(values)
    return [len(values), mean, sum((v - mean) ** 2 for v in values)]


def _comoments(pairs: list[tuple[float, float]]) -> list[Any]:
    if not pairs:
        return [0, None, None, None, None, None]
    ys, xs = [y for y, _ in pairs], [x for _, x in pairs]
    my, mx = statistics.fmean(ys), statistics.fmean(xs)
    return [len(pairs), my, mx, sum((y - my) ** 2 for y in ys), sum((x - mx) ** 2 for x in xs),
            sum((y - my) * (x - mx) for y, x in pairs)]


def _corr(pairs: list[tuple[float, float]]) -> float | None:
    if len(pairs) < 2 or len({y for y, _ in pairs}) < 2 or len({x for _, x in pairs}) < 2:
        return None
    return statistics.correlation([y for y, _ in pairs], [x for _, x in pairs])


def _spec(slide: int, width: int) -> WindowAggregate:
    return WindowAggregate(operator_id="q0_window", input_sql="", key_columns=("k0",),
                           window=WindowSpec("hop", width, slide), aggregates=WINDOW_AGGREGATES,
                           output_view="v")


def _partials(rows: list[Row], slide: int, key_name: str = "k0") -> pa.Table:
    """What native Spark's pre-aggregation gives for ``rows`` (:data:`WINDOW_AGGREGATES`
    per key and pane; a slide of 1 gives SESSION partials: per key and exact time)."""
    panes: dict[tuple[Any, int], list[Any]] = defaultdict(list)
    pairs: dict[tuple[Any, int], list[tuple[float, float]]] = defaultdict(list)
    timed: dict[tuple[Any, int], list[tuple[int, Any]]] = defaultdict(list)
    for key, ts, value in rows:
        panes[(key, ts - ts % slide)].append(value)
        timed[(key, ts - ts % slide)].append((ts, value))
        if value is not None:
            pairs[(key, ts - ts % slide)].append((value, ts % MODULUS))
    items = list(panes.items())
    present = [[v for v in values if v is not None] for _, values in items]
    moments = [_moments(v) for v in present]
    comoments = [_comoments(pairs[pane]) for pane, _ in items]
    firsts = [min(timed[pane], key=_by_time) for pane, _ in items]
    lasts = [max(timed[pane], key=_by_time) for pane, _ in items]
    sets = {"p8_0": pa.array([sorted(set(v)) for v in present], pa.list_(pa.int64())),
            "p9_0": pa.array([{"t": t, "v": v} for t, v in firsts], PAIR),
            "p10_0": pa.array([{"t": t, "v": v} for t, v in lasts], PAIR)}
    for i, (_, operation) in enumerate(BITWISE, start=11):  # Spark's own, and the count
        sets[f"p{i}_0"] = pa.array([reduce(operation, v) if v else None for v in present],
                                   pa.int64())
        sets[f"p{i}_1"] = pa.array([len(v) for v in present], pa.int64())
    for i in range(14, 17):  # every value, NULLs too, as array_sort(collect_list(…)) gives
        sets[f"p{i}_0"] = pa.array([[{"v": v} for v in _in_order(values)] for _, values in items],
                                   BAG)
    sets["p17_0"] = pa.array(
        [[{"v": None if v is None or not _weight(v) else [float(v), float(_weight(v))]}
          for v in _in_order(values)] for _, values in items], WEIGHTED)
    return pa.table({
        key_name: pa.array([k for (k, _), _ in items], pa.string()),
        "__pane": pa.array([p for (_, p), _ in items], pa.int64()),
        "__kg": pa.array([hash(k) % GROUPS for (k, _), _ in items], pa.int32()),
        "__rows": pa.array([len(v) for _, v in items], pa.int64()),
        "p0_0": pa.array([len(v) for _, v in items], pa.int64()),
        "p1_0": pa.array([len(v) for v in present], pa.int64()),
        "p2_0": pa.array([sum(v) if v else None for v in present], pa.int64()),
        "p2_1": pa.array([len(v) for v in present], pa.int64()),
        "p3_0": pa.array([sum(v) if v else None for v in present], pa.int64()),
        "p3_1": pa.array([len(v) for v in present], pa.int64()),
        "p4_0": pa.array([min(v) if v else None for v in present], pa.int64()),
        "p5_0": pa.array([max(v) if v else None for v in present], pa.int64()),
        **{f"p6_{j}": pa.array([m[j] for m in moments], pa.int64() if j == 0 else pa.float64())
           for j in range(3)},
        **{f"p7_{j}": pa.array([m[j] for m in comoments],
                               pa.int64() if j == 0 else pa.float64()) for j in range(6)},
        **sets,
    })


def _brute_force(rows: list[Row], slide: int, width: int) -> list[tuple[Any, ...]]:
    windows: dict[tuple[Any, int], list[Any]] = defaultdict(list)
    pairs: dict[tuple[Any, int], list[tuple[float, float]]] = defaultdict(list)
    timed: dict[tuple[Any, int], list[tuple[int, Any]]] = defaultdict(list)
    for key, ts, value in rows:
        start = ts - ts % slide
        for begin in range(start - width + slide, start + 1, slide):
            windows[(key, begin)].append(value)
            timed[(key, begin)].append((ts, value))
            if value is not None:
                pairs[(key, begin)].append((value, ts % MODULUS))
    result = []
    for (key, begin), values in windows.items():
        present = [v for v in values if v is not None]
        result.append((key, begin, begin + width, len(values), len(present),
                       sum(present) if present else None,
                       sum(present) / len(present) if present else None,
                       min(present) if present else None, max(present) if present else None,
                       len(set(present)), min(timed[(key, begin)], key=_by_time)[1],
                       max(timed[(key, begin)], key=_by_time)[1],
                       *(reduce(operation, present) if present else None
                         for _, operation in BITWISE),
                       *(_percentile(present, fraction) if fraction is not None
                         else _in_order(values) for _, fraction in BAGS),
                       _percentile([v for v in present for _ in range(_weight(v))], 0.6),
                       statistics.variance(present) if len(present) > 1 else None,
                       _corr(pairs[(key, begin)])))
    return result


def _same_windows(fired: list[tuple[Any, ...]], expected: list[tuple[Any, ...]],
                  exact: int = 19) -> None:
    """Equal windows: the first ``exact`` columns exactly, the variances and correlations
    after them (floating point) within a tolerance."""
    fired, expected = (sorted(rows, key=lambda row: repr(row[:exact]))
                       for rows in (fired, expected))
    assert [row[:exact] for row in fired] == [row[:exact] for row in expected]
    for got, want in zip(fired, expected, strict=True):
        for a, b in zip(got[exact:], want[exact:], strict=True):
            assert (a is None) == (b is None), (got, want)
            assert a is None or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), (got, want)


def _run(rows_by_epoch: list[list[Row]], watermarks: list[int], slide: int, width: int,
         parallelism: int, path: Path) -> tuple[list[tuple[Any, ...]], int, int]:
    """Each epoch's partials through the operator; returns what fired, the late rows,
    and the entries left in the store."""
    spec = _spec(slide, width)
    schema = output_schema(spec, _partials([], slide).schema)
    work = WindowColumnsRange(spec, schema)
    fired: list[tuple[Any, ...]] = []
    late = 0
    for table, stats in through_ranges(work, path, [_partials(r, slide) for r in rows_by_epoch],
                                       watermarks, GROUPS, parallelism):
        late += stats.rows_late
        ends = [w["end"] for w in table.column(WINDOW_COLUMN).to_pylist()]
        assert ends == sorted(ends), "windows out of time order"
        for row in table.to_pylist():
            window = row[WINDOW_COLUMN]
            fired.append((row["k0"], _micros(window["start"]), _micros(window["end"]),
                          row["n"], row["c"], row["s"], row["mean"], row["lo"],
                          row["hi"], row["d"], row["fv"], row["lv"],
                          *(row[name] for name, _ in BITWISE),
                          row["med"], row["pc"], _in_order(row["aa"]), row["pw"],
                          row["spread"], row["r"]))
    left = entries_left(path, [work.panes_name, work.timers_name], GROUPS)
    return fired, late, left


def _micros(value: datetime) -> int:
    return (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(0, 900),
                               st.one_of(st.none(), st.integers(-9, 9))),
                     min_size=1, max_size=80),
       # a width longer than a chunk of panes makes windows span chunk boundaries
       slide=st.sampled_from([1, 3]), factor=st.sampled_from([1, 5, PANES_PER_CHUNK + 16]),
       epochs=st.integers(1, 6), parallelism=st.integers(1, 3))
def test_windows_equal_brute_force(rows, slide, factor, epochs, parallelism,
                                   tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    width = slide * factor
    ordered = sorted(rows, key=lambda r: r[1])
    size = -(-len(ordered) // epochs)
    chunks = [ordered[i:i + size] for i in range(0, len(ordered), size)]
    watermarks = [max(r[1] for r in chunk) for chunk in chunks[:-1]] + [END_OF_TIME]
    path = tmp_path_factory.mktemp("operator") / "state.db"
    fired, late, left = _run(chunks, watermarks, slide, width, parallelism, path)
    assert late == 0
    assert len({row[:3] for row in fired}) == len(fired), "a window fired twice"
    _same_windows(fired, _brute_force(ordered, slide, width))
    assert left == 0, "state left behind after the input ended"


def test_rows_behind_the_watermark_count_as_late_only_when_every_window_fired(
        tmp_path: Path) -> None:
    # HOP(10, 30), watermark 100 after the first epoch, which fires [70, 100).  Then a
    # row at 75 (pane 70: windows ending 80, 90, 100) is late; one at 96 (pane 90) is
    # not: its windows [80, 110) and [90, 120) are still open.
    first = [("a", 95, 1)]
    second = [("a", 75, 5), ("a", 96, 2)]
    fired, late, _ = _run([first, second], [100, END_OF_TIME], 10, 30, 1, tmp_path / "s.db")
    assert late == 1
    by_start = {start: (n, s) for _, start, _, n, _, s, *_ in fired}
    assert by_start == {70: (1, 1), 80: (2, 3), 90: (2, 3)}


def test_a_pane_filled_over_several_epochs_combines_its_parts(tmp_path: Path) -> None:
    # HOP(3, 15): the pane at 0 gets rows in three epochs before any of its windows fire.
    epochs = [[("a", 0, 4), ("a", 1, -2)], [("a", 1, 9), ("b", 2, 1)], [("a", 2, 5), ("a", 2, 4)]]
    rows = [row for epoch in epochs for row in epoch]
    fired, _, left = _run(epochs, [0, 1, END_OF_TIME], 3, 15, 1, tmp_path / "s.db")
    _same_windows(fired, _brute_force(rows, 3, 15))
    assert {(row[9], row[-2]) for row in fired if row[0] == "a"} == {
        (4, statistics.variance([4, -2, 9, 5, 4]))}
    # first and last by time, then value: 4 at 0 first; 4 and 5 at 2 tie, 5 is last
    assert {row[10:12] for row in fired if row[0] == "a"} == {(4, 5)}
    assert left == 0


def test_a_crowded_chunk_is_folded_into_one_entry(tmp_path: Path) -> None:
    # Width far ahead of the watermark: nothing fires for a while, one entry per
    # epoch lands in chunk 0, then a due epoch folds them.
    epochs = [[("a", 1, i)] for i in range(ENTRIES_PER_CHUNK + 3)]
    watermarks = [0] * (len(epochs) - 1) + [5]
    spec = _spec(1, 1_000)
    path = tmp_path / "s.db"
    _run(epochs, watermarks, 1, 1_000, 1, path)
    with open_store(f"sqlite:///{path}") as store:
        entries = list(store.pipeline("t", "p").scan(f"{spec.operator_id}/pane_columns",
                                                     range(GROUPS)))
    assert len(entries) == 1


def test_a_cold_task_reads_nothing_of_groups_whose_windows_are_not_due(tmp_path: Path) -> None:
    """After a move or rescale a task's cache is empty: an epoch that fires nothing
    reads the groups' timers, never their panes."""
    url = f"sqlite:///{tmp_path / 'state.db'}"
    spec = _spec(1_000, 10**9)  # the watermark stays before every window end
    work = WindowColumnsRange(spec, output_schema(spec, _partials([], 1_000).schema))
    ranges = split_key_groups(GROUPS, 1)

    def run_epoch(epoch: int, rows: list[Row], cache: StateCache) -> int:
        with open_store(url, cache=cache) as store:
            state = store.pipeline("t", "p")
            state.begin_epoch(epoch, ranges)
            writer = state.writer(epoch, ranges[0])
            task_epoch = TaskEpoch(b"", "t", "p", "run", epoch, epoch - 1 if epoch else None,
                                   ((0, GROUPS),), NO_WATERMARK, 100)
            assert work(_partials(rows, 1_000), state, writer, task_epoch,
                        TaskStats()).num_rows == 0
            writer.commit()
            state.commit_epoch(epoch, {})
            return cache.stats().remote_bytes

    run_epoch(0, [(str(key), 500, key) for key in range(4_000)], StateCache(10**8))
    with open_store(url) as store:
        stored = sum(len(v) for _, _, v in store.pipeline("t", "p").scan(
            work.panes_name, range(GROUPS), epoch=0))
    read = run_epoch(1, [(str(key), 700, 1) for key in (3, 77, 1_001)], StateCache(10**8))
    assert read < stored / 100, f"read {read} bytes of {stored} for 3 keys"


def test_fired_windows_merge_a_keys_overlapping_intervals() -> None:
    # key 0: panes in slots 0 and 2; key 1: slot 10.  Windows of 3 slots.
    keys = np.array([0, 0, 1])
    slots = np.array([0, 2, 10])
    fired = fired_windows(keys, slots, 3, first_end=0, last_end=12)
    got = list(zip(keys[fired.key_rows].tolist(), fired.end_slots.tolist(),
                   (fired.stop - fired.first).tolist(), strict=True))
    assert got == [(0, 1, 1), (0, 2, 1), (0, 3, 2), (0, 4, 1), (0, 5, 1),
                   (1, 11, 1), (1, 12, 1)]


def test_key_ids_treat_null_keys_as_one_key() -> None:
    table = pa.table({"a": pa.array([1, 1, None, None, 2]),
                      "b": pa.array(["x", "y", None, None, None])})
    assert key_ids(table, ["a", "b"]).tolist() == [0, 1, 2, 2, 3]


def test_which_aggregates_run_in_pane_columns() -> None:
    schema = _partials([], 1).schema
    assert columnar(_spec(1, 5), schema)
    session = WindowAggregate(operator_id="s", input_sql="", key_columns=("k0",),
                              window=WindowSpec("session", 0, 0, 10), aggregates=AGGREGATES,
                              output_view="v")
    assert not columnar(session, schema)
    distinct = WindowAggregate(operator_id="d", input_sql="", key_columns=("k0",),
                               window=WindowSpec("hop", 5, 1),
                               aggregates=(AggregateCall("count_distinct", "a0", "d"),),
                               output_view="v")
    assert columnar(distinct, schema.set(schema.get_field_index("p0_0"),
                                          pa.field("p0_0", pa.list_(pa.int64()))))
    # floats too: equal as Spark equates them (every NaN, -0.0 and 0.0) by their keys
    assert columnar(distinct, schema.set(schema.get_field_index("p0_0"),
                                          pa.field("p0_0", pa.list_(pa.float64()))))
    # decimals and bytes too (Arrow hashes and orders them as Spark does), not lists
    for kind, runs in ((pa.decimal128(9, 2), True), (pa.binary(), True),
                       (pa.list_(pa.int64()), False)):
        assert columnar(distinct, schema.set(schema.get_field_index("p0_0"),
                                             pa.field("p0_0", pa.list_(kind)))) == runs

    def alone(function: str, values: pa.DataType) -> bool:
        spec = WindowAggregate(operator_id="b", input_sql="", key_columns=("k0",),
                               window=WindowSpec("hop", 5, 1),
                               aggregates=(AggregateCall(function, "a0", "m"),),
                               output_view="v")
        bag = pa.list_(pa.struct([pa.field("v", values)]))
        return columnar(spec, schema.set(schema.get_field_index("p0_0"), pa.field("p0_0", bag)))

    # percentiles of numbers (weighted: of [x, weight] doubles), array_agg of anything
    assert alone("median", pa.decimal128(9, 2)) and alone("percentile_cont", pa.float64())
    assert not alone("median", pa.string())
    assert alone("array_agg", pa.string())
    assert alone("percentile_cont_weighted", pa.list_(pa.float64()))
    assert not alone("percentile_cont_weighted", pa.float64())


def test_a_run_over_per_key_window_state_keeps_the_per_key_path(tmp_path: Path) -> None:
    from spate.engine.runtime.window import WindowStep

    spec = _spec(1, 5)
    with open_store(f"sqlite:///{tmp_path / 'state.db'}") as store:
        state = store.pipeline("t", "p")
        assert not WindowStep(spec, state, GROUPS)._keyed_state()
        ranges = split_key_groups(GROUPS, 1)
        state.begin_epoch(0, ranges)
        writer = state.writer(0, ranges[0])
        writer.put(spec.operator_id, 3, ("a",), b"\x90")
        writer.commit()
        state.commit_epoch(0, {})
        assert WindowStep(spec, state, GROUPS)._keyed_state()


def test_nan_wins_a_max_and_loses_a_min_as_in_spark() -> None:
    from spate.engine.operators.window_columns import FiredWindows, window_extremes

    values = np.array([1.0, np.nan, 3.0, 2.0])
    one = np.array([0, 0])
    fired = FiredWindows(key_rows=one, end_slots=np.array([3, 4]), first=np.array([0, 2]),
                         stop=np.array([3, 4]))
    assert window_extremes(values, fired, largest=False).tolist() == [1.0, 2.0]
    largest = window_extremes(values, fired, largest=True)
    assert np.isnan(largest[0]) and largest[1] == 3.0


def test_distinct_counts_of_panes_far_apart_in_time() -> None:
    """Slots too far apart to pack (key, slot) into one int64 take the ranked path."""
    from spate.engine.operators.window_columns import window_distinct

    far = 2**61
    keys, slots = np.array([0, 0, 1]), np.array([0, far, 5])
    sets = pa.chunked_array([pa.array([[1, 2], [2], [3, 3]], pa.list_(pa.int64()))])
    fired = fired_windows(keys, slots, 3, first_end=0, last_end=far + 3)
    counts = window_distinct(keys, slots, sets, 3, fired)
    got = sorted(zip(keys[fired.key_rows].tolist(), fired.end_slots.tolist(), counts.tolist(),
                     strict=True))
    assert got == [(0, 1, 2), (0, 2, 2), (0, 3, 2), (0, far + 1, 1), (0, far + 2, 1),
                   (0, far + 3, 1), (1, 6, 1), (1, 7, 1), (1, 8, 1)]


def test_distinct_counts_of_floats_take_every_nan_as_one_value_and_minus_zero_as_zero(
        ) -> None:
    """Windows over panes holding NaNs of two bit patterns, -0.0 and 0.0: in columns and
    in the per-key accumulator, each window counts as Spark's count(DISTINCT) does."""
    from spate.engine.operators.aggregates.counts import CountDistinct
    from spate.engine.operators.window_columns import window_distinct

    negative_nan = -float("nan")
    panes = [[float("nan"), 1.5], [negative_nan, -0.0], [0.0, 2.5, float("inf")], [1.5]]
    keys, slots = np.zeros(4, np.int64), np.arange(4, dtype=np.int64)
    sets = pa.chunked_array([pa.array(panes, pa.list_(pa.float64()))])
    fired = fired_windows(keys, slots, 2, first_end=1, last_end=5)
    counts = window_distinct(keys, slots, sets, 2, fired)
    expected = {1: 2, 2: 3, 3: 4, 4: 4, 5: 1}  # windows of two panes, ending at slots 1..5
    assert dict(zip(fired.end_slots.tolist(), counts.tolist(), strict=True)) == expected
    distinct = CountDistinct()
    for end, want in expected.items():
        acc = distinct.initialize()
        for pane in panes[max(0, end - 2):end]:
            acc = distinct.add(acc, pane)
        assert distinct.result(acc) == want, end
    acc = distinct.add(distinct.add(distinct.initialize(), panes[0]), panes[1])
    assert distinct.result(distinct.remove(acc, panes[0])) == 2  # a NaN left: NaN and -0.0


def test_first_and_last_values_of_floats_order_a_tie_in_time_as_spark_orders_doubles(
        ) -> None:
    """Panes whose earliest and latest pairs tie in time, with NaN, infinity and -0.0 as
    values: in columns and in the per-key accumulator, a tie goes to the smaller value
    for first_value and the larger for last_value, NaN being larger than any number."""
    from spate.engine.operators.aggregates.timed import ByTime
    from spate.engine.operators.window_columns import window_timed

    nan, inf = float("nan"), float("inf")
    panes = [(5, nan), (5, 2.5), (5, inf), (7, -0.0), (7, -inf), (9, None)]
    keys, slots = np.zeros(len(panes), np.int64), np.arange(len(panes), dtype=np.int64)
    pairs = pa.chunked_array([pa.array([{"t": t, "v": v} for t, v in panes],
                                       pa.struct([("t", pa.int64()), ("v", pa.float64())]))])
    fired = fired_windows(keys, slots, 3, first_end=2, last_end=len(panes))
    for latest in (False, True):
        rows, present = window_timed(pairs, fired, latest)
        got = [panes[row][1] if has else "none" for row, has in zip(rows, present, strict=True)]
        per_key = ByTime(latest)
        want = []
        for end in fired.end_slots.tolist():
            acc = None
            for t, v in panes[max(0, end - 3):end]:  # a window ends after its last pane
                acc = [t, v] if acc is None or per_key.better([t, v], acc) else acc
            want.append(per_key.result(acc))
        assert repr(got) == repr(want), latest
        # windows of panes 0-1, 0-2, 1-3, 2-4, 3-5: (5, NaN) is the latest pair of two
        expected = [2.5, 2.5, 2.5, inf, -inf] if not latest else [nan, nan, -0.0, -0.0, None]
        assert repr(got) == repr(expected), latest


#: An aggregate UDF's argument rows (``udaf_rows`` of ``STRUCT(value AS a0, time AS a1)``)
#: beside a count.
UDAF_ROWS = (AggregateCall("count_star", None, "n"), AggregateCall("udaf_rows", "a0", "rows"))
UDAF_ROW = pa.struct([pa.field("a0", pa.int64()), pa.field("a1", pa.int64())])


def _rows_partials(rows: list[Row], slide: int) -> pa.Table:
    """Native Spark's pane partials of :data:`UDAF_ROWS`: each pane's rows, sorted."""
    panes: dict[tuple[Any, int], list[dict[str, Any]]] = defaultdict(list)
    for key, ts, value in rows:
        panes[(key, ts - ts % slide)].append({"a0": value, "a1": ts})
    items = list(panes.items())
    return pa.table({
        **_counted_panes(items),
        "p1_0": pa.array([sorted(v, key=lambda r: (r["a0"] is not None, r["a0"] or 0, r["a1"]))
                          for _, v in items], pa.list_(UDAF_ROW)),
    })


def _counted_panes(items: list[tuple[tuple[Any, int], list[Any]]]) -> dict[str, pa.Array]:
    """The columns every pane partial has, for ``((key, pane), rows)`` items: its key,
    pane, key group and rows, and count(*) as the first aggregate."""
    return {"k0": pa.array([k for (k, _), _ in items], pa.string()),
            "__pane": pa.array([p for (_, p), _ in items], pa.int64()),
            "__kg": pa.array([hash(k) % GROUPS for (k, _), _ in items], pa.int32()),
            "__rows": pa.array([len(v) for _, v in items], pa.int64()),
            "p0_0": pa.array([len(v) for _, v in items], pa.int64())}


def _in_epochs(rows: list[Row], epochs: int, ordered: bool
               ) -> tuple[list[list[Row]], list[int]]:
    """``rows`` (sorted by time if ``ordered``) cut into ``epochs`` parts, and each one's
    watermark: 3 behind the latest time so far (out of order, some rows come late), the
    last one's the end of time."""
    if ordered:
        rows = sorted(rows, key=lambda r: r[1])
    size = -(-len(rows) // epochs)
    chunks = [rows[i:i + size] for i in range(0, len(rows), size)]
    watermarks = list(accumulate((max(r[1] for r in chunk) - 3 for chunk in chunks[:-1]),
                                 max)) + [END_OF_TIME]
    return chunks, watermarks


def _fire_rows(work: Any, chunks: list[list[Row]], watermarks: list[int], slide: int,
               parallelism: int, path: Path) -> list[tuple[Any, int, int, list[Any]]]:
    """Each epoch's :data:`UDAF_ROWS` partials through ``work``: (key, start, count, rows)
    of every fired window."""
    return [(row["k0"], _micros(row[WINDOW_COLUMN]["start"]), row["n"],
             [(r["a0"], r["a1"]) for r in row["rows"]])
            for table, _ in through_ranges(work, path,
                                           [_rows_partials(rows, slide) for rows in chunks],
                                           watermarks, GROUPS, parallelism)
            for row in table.to_pylist()]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(0, 200),
                               st.one_of(st.none(), st.integers(-9, 9))),
                     min_size=1, max_size=60),
       slide=st.sampled_from([1, 3]), factor=st.sampled_from([1, 4, PANES_PER_CHUNK + 2]),
       epochs=st.integers(1, 5), parallelism=st.integers(1, 3), ordered=st.booleans())
def test_an_aggregate_udfs_rows_in_columns_as_per_key(rows, slide, factor, epochs, parallelism,
                                                      ordered, tmp_path_factory
                                                      ) -> None:  # type: ignore[no-untyped-def]
    """A window's rows for an aggregate UDF: its panes' rows, panes in time order, a pane
    filled over several epochs in the order they came. Over input in time order that
    is the per-key path's order too; out of order, a pane filled after it entered the
    per-key path's running window goes last there, so only the rows are compared."""
    from spate.engine.runtime.window import _WindowRange

    width = slide * factor
    spec = WindowAggregate(operator_id="q0_window", input_sql="", key_columns=("k0",),
                           window=WindowSpec("hop", width, slide), aggregates=UDAF_ROWS,
                           output_view="v")
    partial_schema = _rows_partials([], slide).schema
    assert columnar(spec, partial_schema)
    schema = output_schema(spec, partial_schema)
    chunks, watermarks = _in_epochs(rows, epochs, ordered)
    folder = tmp_path_factory.mktemp("udaf")
    in_columns = _fire_rows(WindowColumnsRange(spec, schema), chunks, watermarks, slide,
                            parallelism, folder / "columns.db")
    per_key = _fire_rows(_WindowRange(spec, GROUPS, schema), chunks, watermarks, slide,
                         parallelism, folder / "keys.db")
    assert all(n == len(got) for _, _, n, got in in_columns)
    for _, _, _, got in in_columns:  # panes in time order
        panes = [ts - ts % slide for _, ts in got]
        assert panes == sorted(panes)
    if ordered:
        assert sorted(in_columns, key=repr) == sorted(per_key, key=repr)
    else:
        assert sorted(((k, s, n, sorted(r, key=repr)) for k, s, n, r in in_columns), key=repr) \
            == sorted(((k, s, n, sorted(r, key=repr)) for k, s, n, r in per_key), key=repr)


#: min and max of text (or bytes): each value's place in a sort orders them
TEXT_EXTREMES = (AggregateCall("count_star", None, "n"), AggregateCall("min", "a0", "lo"),
                 AggregateCall("max", "a0", "hi"))
#: distinct counts, first and last values of decimals (or bytes): Arrow hashes and
#: orders them as Spark does
HASHED = (AggregateCall("count_star", None, "n"), AggregateCall("count_distinct", "a0", "d"),
          AggregateCall("first_value", "a0", "fv"), AggregateCall("last_value", "a0", "lv"))
#: Text Spark orders by its UTF-8 bytes (so "B" < "a" < "é"), bytes, and decimals.
_TEXTS = ["", "B", "a", "ab", "é", "z", "\U0001F600"]
_VALUES = {"text": (pa.string(), _TEXTS),
           "bytes": (pa.binary(), [t.encode() for t in _TEXTS] + [b"\x00", b"\xff"]),
           "decimals": (pa.decimal128(38, 10), [Decimal("0.1000000001"), Decimal("-2"),
                                                Decimal("0"), Decimal("1234567890123.45678")])}
#: TUMBLE and HOP (kind, slide, width), a HOP across chunks, SESSION (gap 7)
_WINDOWS = [("hop", 1, 1), ("hop", 3, 12), ("hop", 1, PANES_PER_CHUNK + 2), ("session", 1, 7)]


def _value_partials(rows: list[Row], slide: int, kind: pa.DataType,
                    aggregates: tuple[AggregateCall, ...]) -> pa.Table:
    """Native Spark's pane partials of :data:`TEXT_EXTREMES` or :data:`HASHED` (per key
    and exact time for a slide of 1)."""
    panes: dict[tuple[Any, int], list[tuple[int, Any]]] = defaultdict(list)
    for key, ts, value in rows:
        panes[(key, ts - ts % slide)].append((ts, value))
    items = list(panes.items())
    present = [[v for _, v in timed if v is not None] for _, timed in items]
    if aggregates == TEXT_EXTREMES:
        return pa.table({**_counted_panes(items),
                         "p1_0": pa.array([min(v, default=None) for v in present], kind),
                         "p2_0": pa.array([max(v, default=None) for v in present], kind)})
    pair = pa.struct([pa.field("t", pa.int64()), pa.field("v", kind)])
    return pa.table({
        **_counted_panes(items),
        "p1_0": pa.array([sorted(set(v)) for v in present], pa.list_(kind)),
        "p2_0": pa.array([dict(zip("tv", min(timed, key=_by_time), strict=True))
                          for _, timed in items], pair),
        "p3_0": pa.array([dict(zip("tv", max(timed, key=_by_time), strict=True))
                          for _, timed in items], pair)})


def _both_ways(aggregates: tuple[AggregateCall, ...], kind: pa.DataType, rows: list[Row],
               window: tuple[str, int, int], epochs: int, parallelism: int, ordered: bool,
               folder: Path) -> dict[str, list[tuple[Any, ...]]]:
    """``rows`` through the columnar operator (which must take ``aggregates`` of ``kind``
    values) and the per-key one: what each fired, sorted."""
    from spate.engine.runtime.session_columns import SessionColumnsRange, session_columnar
    from spate.engine.runtime.window import _WindowRange

    how, slide, size = window
    session = how == "session"
    spec = WindowAggregate(operator_id="q0_window", input_sql="", key_columns=("k0",),
                           window=WindowSpec(how, 0, 0, size) if session
                           else WindowSpec(how, size, slide),
                           aggregates=aggregates, output_view="v")
    partial_schema = _value_partials([], slide, kind, aggregates).schema
    assert (session_columnar if session else columnar)(spec, partial_schema)
    schema = output_schema(spec, partial_schema)
    chunks, watermarks = _in_epochs(rows, epochs, ordered)
    fired = {}
    for name, work in (("columns", (SessionColumnsRange if session else WindowColumnsRange)(
                            spec, schema)),
                       ("per_key", _WindowRange(spec, GROUPS, schema))):
        fired[name] = sorted(
            ((row["k0"], _micros(row[WINDOW_COLUMN]["start"]),
              *(row[call.output] for call in aggregates))
             for table, _ in through_ranges(work, folder / f"{name}.db",
                                            [_value_partials(c, slide, kind, aggregates)
                                             for c in chunks], watermarks, GROUPS, parallelism)
             for row in table.to_pylist()), key=repr)
    return fired


def _valued_rows(samples: list[Any]) -> st.SearchStrategy[list[Row]]:
    return st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(0, 200),
                              st.one_of(st.none(), st.sampled_from(samples))),
                    min_size=1, max_size=60)


@pytest.mark.parametrize("kind", ["text", "bytes"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(data=st.data(), window=st.sampled_from(_WINDOWS), epochs=st.integers(1, 5),
       parallelism=st.integers(1, 3), ordered=st.booleans())
def test_text_extremes_in_columns_as_per_key(kind, data, window, epochs, parallelism, ordered,
                                             tmp_path_factory
                                             ) -> None:  # type: ignore[no-untyped-def]
    """min and max of text or bytes in TUMBLE, HOP and SESSION windows, in columns (by
    each value's place in a sort of the panes) and per key: the same windows, the same
    values."""
    value_type, samples = _VALUES[kind]
    fired = _both_ways(TEXT_EXTREMES, value_type, data.draw(_valued_rows(samples)), window,
                       epochs, parallelism, ordered, tmp_path_factory.mktemp("text"))
    assert fired["columns"] == fired["per_key"]


@pytest.mark.parametrize("kind", ["decimals", "bytes"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(data=st.data(), window=st.sampled_from(_WINDOWS), epochs=st.integers(1, 5),
       parallelism=st.integers(1, 3), ordered=st.booleans())
def test_distinct_first_and_last_of_decimals_and_bytes_in_columns_as_per_key(
        kind, data, window, epochs, parallelism, ordered,
        tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    """count(DISTINCT), first_value and last_value of decimals or bytes in TUMBLE, HOP and
    SESSION windows, in columns and per key: the same windows, the same values (a
    decimal as the double nearest it)."""
    value_type, samples = _VALUES[kind]
    fired = _both_ways(HASHED, value_type, data.draw(_valued_rows(samples)), window,
                       epochs, parallelism, ordered, tmp_path_factory.mktemp("hashed"))
    assert fired["columns"] == fired["per_key"]
