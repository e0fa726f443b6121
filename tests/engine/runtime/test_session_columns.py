"""The columnar SESSION operator against the per-key one, without Spark: the same
partials (as native pre-aggregation gives them: per key and exact event time) go
epoch by epoch through both, each over its own embedded state store, in several
ranges, with late rows, NULL values and keys; both must fire the same sessions
and count the same late rows, the columnar one in time order, and neither may
keep anything once the input ended."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal, localcontext
from itertools import accumulate
from pathlib import Path
from typing import Any

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spate.engine.planner.plan import WINDOW_COLUMN, AggregateCall, WindowAggregate, WindowSpec
from spate.engine.runtime.output import output_schema
from spate.engine.runtime.session_columns import SessionColumnsRange, session_columnar
from spate.engine.runtime.tasks import RangeWork
from spate.engine.runtime.watermarks import END_OF_TIME
from spate.engine.runtime.window import _WindowRange
from tests.engine.runtime.ranges import entries_left, through_ranges
from tests.engine.runtime.test_window_columns import (
    GROUPS,
    UDAF_ROWS,
    WINDOW_AGGREGATES,
    Row,
    _in_order,
    _same_windows,
)
from tests.engine.runtime.test_window_columns import _fire_rows as fire_rows
from tests.engine.runtime.test_window_columns import _partials as window_partials
from tests.engine.runtime.test_window_columns import _rows_partials as rows_partials

#: What a fired session holds after its key and bounds: the exact values first, then the
#: variance and correlation (compared within a tolerance).
NAMES = [call.output for call in WINDOW_AGGREGATES if call.output not in ("spread", "r")] \
    + ["spread", "r"]
EXACT = 3 + len(NAMES) - 2


def _spec(gap: int) -> WindowAggregate:
    # a key named like a partial column ("p…") must not be taken for one
    return WindowAggregate(operator_id="q0_window", input_sql="", key_columns=("pk",),
                           window=WindowSpec("session", 0, 0, gap), aggregates=WINDOW_AGGREGATES,
                           output_view="v")


def _partials(rows: list[Row]) -> pa.Table:
    """What native Spark's pre-aggregation gives for ``rows``: one partial per key and
    exact event time."""
    return window_partials(rows, 1, key_name="pk")


def _run(work_of: Any, rows_by_epoch: list[list[Row]], watermarks: list[int], gap: int,
         parallelism: int, path: Path) -> tuple[list[tuple[Any, ...]], int, int]:
    """Each epoch's partials through one operator; returns what fired (in the order
    each range emitted it), the late rows, and the entries left in the store."""
    spec = _spec(gap)
    work: RangeWork = work_of(spec, output_schema(spec, _partials([]).schema))
    fired: list[tuple[Any, ...]] = []
    late = 0
    for table, stats in through_ranges(work, path, [_partials(rows) for rows in rows_by_epoch],
                                       watermarks, GROUPS, parallelism):
        late += stats.rows_late
        for row in table.to_pylist():
            window = row[WINDOW_COLUMN]
            fired.append((row["pk"], _micros(window["start"]), _micros(window["end"]),
                          *(_in_order(row[name]) if name == "aa" else row[name]
                            for name in NAMES)))
    left = entries_left(path, [spec.operator_id, *(f"{spec.operator_id}/{suffix}" for suffix
                                                   in ("session_columns", "session_timers"))],
                        GROUPS)
    return fired, late, left


def _per_key(spec: WindowAggregate, schema: pa.Schema) -> RangeWork:
    return _WindowRange(spec, GROUPS, schema)


def _micros(value: datetime) -> int:
    return (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


def _in_time_order(fired: list[tuple[Any, ...]], parallelism: int) -> bool:
    """Whether each range's sessions came out by end, then start (ranges interleave:
    the check runs over the whole list only with one range)."""
    if parallelism != 1:
        return True
    bounds = [(row[2], row[1]) for row in fired]
    return bounds == sorted(bounds)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(0, 600),
                               st.one_of(st.none(), st.integers(-9, 9))),
                     min_size=1, max_size=80),
       gap=st.sampled_from([1, 7, 40]), epochs=st.integers(1, 6),
       advances=st.lists(st.integers(0, 250), min_size=6, max_size=6),
       flush=st.booleans(), parallelism=st.integers(1, 3))
def test_columnar_sessions_equal_the_per_key_operator(
        rows: list[Row], gap: int, epochs: int, advances: list[int], flush: bool,
        parallelism: int, tmp_path_factory: Any) -> None:
    # Rows arrive out of order across epochs (each epoch takes a slice of the list),
    # so some fall behind the watermark: late alone, or joining an open session.
    rows_by_epoch = [rows[i::epochs] for i in range(epochs)]
    watermarks, mark = [], 0
    for advance in advances[:epochs]:
        mark += advance
        watermarks.append(mark)
    if flush:
        watermarks[-1] = END_OF_TIME
    folder = tmp_path_factory.mktemp("sessions")
    expected, expected_late, _ = _run(_per_key, rows_by_epoch, watermarks, gap, parallelism,
                                      folder / "per_key.db")
    fired, late, left = _run(SessionColumnsRange, rows_by_epoch, watermarks, gap, parallelism,
                             folder / "columns.db")
    _same_windows(fired, expected, exact=EXACT)
    assert late == expected_late
    assert _in_time_order(fired, parallelism)
    if flush:
        assert left == 0, "sessions left in the store after the input ended"


def test_a_late_row_joins_an_open_session_but_not_one_of_its_own(tmp_path: Path) -> None:
    """Gap 10, watermark 100 after the first epoch, whose row at 95 opens [95, 105).
    Rows at 90 (sessions [90, 100), behind the watermark) come next: a's joins its
    key's open session, b's has none to join and is late."""
    epochs = [[("a", 95, 1)], [("a", 90, 2), ("b", 90, 3)]]
    for work in (_per_key, SessionColumnsRange):
        fired, late, _ = _run(work, epochs, [100, END_OF_TIME], 10, 1,
                              tmp_path / f"{work.__name__}.db")
        assert late == 1
        assert [row[:9] for row in fired] == [("a", 90, 105, 2, 2, 3, 1.5, 1, 2)]
        assert fired[0][9:12] == (2, 2, 1)  # distinct values; first (at 90), last (at 95)
        assert fired[0][12:15] == (0, 3, 3)  # bit_and, bit_or, bit_xor of 1 and 2
        # median, percentile_cont(0.3), array_agg, weighted percentile(0.6) of 1 (w 1), 2 (w 2)
        assert fired[0][15:19] == (1.5, 1.3, [1, 2], 2.0)
        assert fired[0][19] == 0.5  # var_samp(1, 2)


def test_which_rows_are_late_does_not_depend_on_their_order(tmp_path: Path) -> None:
    """Gap 7, watermark 18: of a key's new rows at 12 and 10 (given in that order), the
    one at 10 is late ([10, 17) joins nothing open), however Spark ordered them; the
    one at 12 opens [12, 19)."""
    epochs = [[("c", 0, 5)], [("a", 12, 2), ("a", 10, 1)]]
    for work in (_per_key, SessionColumnsRange):
        fired, late, _ = _run(work, epochs, [18, END_OF_TIME], 7, 1,
                              tmp_path / f"{work.__name__}.db")
        assert late == 1
        assert fired == [
            ("c", 0, 7, 1, 1, 5, 5.0, 5, 5, 1, 5, 5, 5, 5, 5, 5.0, 5.0, [5], 5.0, None, None),
            ("a", 12, 19, 1, 1, 2, 2.0, 2, 2, 1, 2, 2, 2, 2, 2, 2.0, 2.0, [2], 2.0, None, None)]


def test_decimal_sessions_run_in_columns_and_nested_keys_per_key() -> None:
    schema = _partials([]).schema
    assert session_columnar(_spec(10), schema)
    decimal = schema.set(schema.get_field_index("p2_0"), pa.field("p2_0", pa.decimal128(10, 2)))
    assert session_columnar(_spec(10), decimal)
    nested = schema.set(schema.get_field_index("pk"), pa.field("pk", pa.list_(pa.int64())))
    assert not session_columnar(_spec(10), nested)


#: Aggregates of a DECIMAL(20, 2) argument, and their pane partials' types as native
#: Spark gives them (a sum's: DECIMAL(30, 2)).
DECIMAL_AGGREGATES = (AggregateCall("sum", "a0", "s"), AggregateCall("avg", "a0", "mean"),
                      AggregateCall("min", "a0", "lo"), AggregateCall("max", "a0", "hi"))
MONEY, MONEY_SUM = pa.decimal128(20, 2), pa.decimal128(30, 2)


def _decimal_partials(rows: list[tuple[Any, int, Decimal | None]]) -> pa.Table:
    """Native Spark's partials of :data:`DECIMAL_AGGREGATES`: per key and exact time."""
    values: dict[tuple[Any, int], list[Decimal]] = defaultdict(list)
    counts: dict[tuple[Any, int], int] = defaultdict(int)
    for key, ts, value in rows:
        counts[(key, ts)] += 1
        if value is not None:
            values[(key, ts)].append(value)
    items = [(pane, values[pane]) for pane in counts]
    sums = pa.array([_exact(v) for _, v in items], MONEY_SUM)
    present = pa.array([len(v) for _, v in items], pa.int64())
    return pa.table({
        "pk": pa.array([k for (k, _), _ in items], pa.string()),
        "__pane": pa.array([t for (_, t), _ in items], pa.int64()),
        "__kg": pa.array([hash(k) % GROUPS for (k, _), _ in items], pa.int32()),
        "__rows": pa.array([counts[pane] for pane, _ in items], pa.int64()),
        "p0_0": sums, "p0_1": present, "p1_0": sums, "p1_1": present,
        "p2_0": pa.array([min(v, default=None) for _, v in items], MONEY),
        "p3_0": pa.array([max(v, default=None) for _, v in items], MONEY)})


def _exact(values: list[Decimal]) -> Decimal | None:
    with localcontext(prec=60):
        return sum(values, Decimal(0)) if values else None


def _decimal_sessions(rows: list[tuple[Any, int, Decimal | None]],
                      gap: int) -> list[tuple[Any, ...]]:
    """Every session of ``rows`` at once, its sum the exact sum rounded to a double."""
    by_key: dict[Any, list[tuple[int, Decimal | None]]] = defaultdict(list)
    for key, ts, value in rows:
        by_key[key].append((ts, value))
    sessions = []
    for key, items in by_key.items():
        items.sort(key=lambda item: item[0])
        groups: list[list[tuple[int, Decimal | None]]] = [[items[0]]]
        for item in items[1:]:
            if item[0] <= groups[-1][-1][0] + gap:  # touching sessions merge
                groups[-1].append(item)
            else:
                groups.append([item])
        for group in groups:
            present = [v for _, v in group if v is not None]
            total = _exact(present)
            sessions.append((key, group[0][0], group[-1][0] + gap,
                             None if total is None else float(total),
                             None if total is None else float(total) / len(present),
                             float(min(present)) if present else None,
                             float(max(present)) if present else None))
    return sorted(sessions, key=repr)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.integers(0, 300),
                               st.one_of(st.none(), st.integers(-10**18 + 1, 10**18 - 1)
                                         .map(lambda u: Decimal(u).scaleb(-2)))),
                     min_size=1, max_size=60),
       gap=st.sampled_from([1, 7, 40]), epochs=st.integers(1, 4),
       parallelism=st.integers(1, 3))
def test_decimal_sessions_sum_exactly(rows: list[tuple[Any, int, Decimal | None]], gap: int,
                                      epochs: int, parallelism: int,
                                      tmp_path_factory: Any) -> None:
    """DECIMAL sums over sessions that close while others stay open across epochs: each
    session's sum is its exact sum rounded once to a double (0.10 three times is 0.3,
    not 0.30000000000000004), its extremes the exact values'.  Rows come in time order
    and the watermark stays behind the next epoch's rows: none is late."""
    rows = sorted(rows, key=lambda row: row[1])
    chunks = [rows[len(rows) * i // epochs:len(rows) * (i + 1) // epochs]
              for i in range(epochs)]
    chunks = [chunk for chunk in chunks if chunk]
    watermarks = [chunks[i + 1][0][1] - 1 for i in range(len(chunks) - 1)] + [END_OF_TIME]
    spec = WindowAggregate(operator_id="q0_window", input_sql="", key_columns=("pk",),
                           window=WindowSpec("session", 0, 0, gap),
                           aggregates=DECIMAL_AGGREGATES, output_view="v")
    schema = _decimal_partials([]).schema
    assert session_columnar(spec, schema)
    work = SessionColumnsRange(spec, output_schema(spec, schema))
    fired = [(row["pk"], _micros(row[WINDOW_COLUMN]["start"]),
              _micros(row[WINDOW_COLUMN]["end"]), row["s"], row["mean"], row["lo"], row["hi"])
             for table, _ in through_ranges(work, tmp_path_factory.mktemp("decimals") / "s.db",
                                            [_decimal_partials(chunk) for chunk in chunks],
                                            watermarks, GROUPS, parallelism)
             for row in table.to_pylist()]
    assert sorted(fired, key=repr) == _decimal_sessions(rows, gap)


def test_a_dime_three_times_is_three_dimes(tmp_path: Path) -> None:
    rows = [("a", t, Decimal("0.10")) for t in (1, 2, 3)]
    work = SessionColumnsRange(_decimal_spec := WindowAggregate(
        operator_id="q0_window", input_sql="", key_columns=("pk",),
        window=WindowSpec("session", 0, 0, 5), aggregates=DECIMAL_AGGREGATES, output_view="v"),
        output_schema(_decimal_spec, _decimal_partials([]).schema))
    [(table, _)] = list(through_ranges(work, tmp_path / "s.db", [_decimal_partials(rows)],
                                      [END_OF_TIME], GROUPS, 1))
    assert table.column("s").to_pylist() == [0.3]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.integers(0, 300),
                               st.one_of(st.none(), st.integers(-9, 9))),
                     min_size=1, max_size=60),
       gap=st.sampled_from([1, 7, 40]), epochs=st.integers(1, 5),
       advances=st.lists(st.integers(0, 120), min_size=5, max_size=5),
       parallelism=st.integers(1, 3))
def test_an_aggregate_udfs_rows_in_columnar_sessions_as_per_key(
        rows: list[Row], gap: int, epochs: int, advances: list[int], parallelism: int,
        tmp_path_factory: Any) -> None:
    """A session's rows for an aggregate UDF are its parts' rows, the parts (one exact
    time's rows, or a session kept from an earlier epoch) in the order of their starts:
    the rows the per-key path holds (which lists them in the order its parts merged),
    also when rows come out of order and bridge sessions; in one epoch, in time order."""
    spec = WindowAggregate(operator_id="q0_window", input_sql="", key_columns=("k0",),
                           window=WindowSpec("session", 0, 0, gap), aggregates=UDAF_ROWS,
                           output_view="v")
    partial_schema = rows_partials([], 1).schema
    assert session_columnar(spec, partial_schema)
    schema = output_schema(spec, partial_schema)
    rows_by_epoch = [rows[i::epochs] for i in range(epochs)]
    watermarks = list(accumulate(advances[:epochs - 1])) + [END_OF_TIME]
    folder = tmp_path_factory.mktemp("sessions")
    in_columns = fire_rows(SessionColumnsRange(spec, schema), rows_by_epoch, watermarks, 1,
                           parallelism, folder / "columns.db")
    per_key = fire_rows(_WindowRange(spec, GROUPS, schema), rows_by_epoch, watermarks, 1,
                        parallelism, folder / "per_key.db")
    assert sorted(((k, s, n, sorted(r, key=repr)) for k, s, n, r in in_columns), key=repr) \
        == sorted(((k, s, n, sorted(r, key=repr)) for k, s, n, r in per_key), key=repr)
    assert all(n == len(got) for _, _, n, got in in_columns)
    if epochs == 1:
        assert all([ts for _, ts in got] == sorted(ts for _, ts in got)
                   for _, _, _, got in in_columns)
