"""SESSION windows over many keys.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_session_windows.py -s``

1. Whole processes, Spate against a Spark user's append-mode ``groupBy`` with
   Spark's ``session_window`` on the same Nexmark bids
   (:mod:`tests.benchmarks.scaling_job`, query ``session10k``: ``count(*),
   sum(price)`` per bidder folded into 10,000 keys, gap 1 s, ``local[2]``, each
   run in a process of its own after a warm-up run).
2. The operator alone, without Spark: the same partials (per key and exact event
   time, as native pre-aggregation gives them) through the columnar operator
   (:mod:`spate.engine.runtime.session_columns`) and the per-key one
   (:mod:`spate.engine.runtime.window`), over an embedded (SQLite) store, both
   key-group ranges of each epoch in turn, the watermark 20 s further each epoch.

Results go under ``session_windows`` in ``docs/benchmarks/results.json``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from spate.engine.planner.plan import AggregateCall, WindowAggregate, WindowSpec
from spate.engine.runtime.output import output_schema
from spate.engine.runtime.session_columns import SessionColumnsRange
from spate.engine.runtime.tasks import TaskEpoch
from spate.engine.runtime.watermarks import NO_WATERMARK
from spate.engine.runtime.window import _WindowRange
from tests.benchmarks.scaling_job import run_in_process
from tests.benchmarks.workloads import load_results, operator_seconds, save_result

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.timeout(7200)]

#: Events of each whole-process run (ten epochs).
EVENTS = 1_000_000
RUNS = 2
GROUPS = 128
SECOND = 1_000_000
RESULTS: dict[str, Any] = load_results().get("session_windows", {})


def test_whole_process_against_native_spark() -> None:
    seconds: dict[str, list[float]] = {"spate": [], "native": []}
    for _ in range(RUNS):  # alternating, so both meet the machine's load alike
        for engine in seconds:
            seconds[engine].append(run_in_process(engine, "session10k", EVENTS)["seconds"])
    best = {engine: min(runs) for engine, runs in seconds.items()}
    row = {"events": EVENTS, "seconds": seconds,
           "events_per_s": {e: EVENTS / s for e, s in best.items()},
           "spate_over_native": best["native"] / best["spate"]}
    print(f"session10k: Spate {best['spate']:.1f} s, native {best['native']:.1f} s "
          f"({row['spate_over_native']:.2f}x of native's throughput)", flush=True)
    RESULTS["session10k"] = row
    save_result("session_windows", RESULTS)


def _partials(rng: np.random.Generator, epoch: int, events: int, keys: int,
              distinct: bool = False) -> pa.Table:
    """An epoch's partials of ``count(*), sum(v) GROUP BY k, SESSION`` over ``events``
    rows with uniform keys, spread over the epoch's 20 s of event time; with
    ``distinct``, of ``count(*), count(DISTINCT v), first_value(v), last_value(v)``."""
    drawn = rng.integers(0, keys, events)
    times = epoch * 20 * SECOND + np.sort(rng.integers(0, 20 * SECOND, events))
    values = rng.integers(1, 1_000, events)
    table = pa.table({"k": drawn.astype(np.int64), "__pane": times, "v": values})
    grouped = table.group_by(["k", "__pane"], use_threads=False).aggregate(
        [("v", "count"), ("v", "sum"), ("v", "distinct"), ("v", "min"), ("v", "max")])
    counts = grouped.column("v_count")
    if distinct:  # a partial's rows share one time: the first is the least value
        def pairs(values: pa.ChunkedArray) -> pa.Array:
            return pa.StructArray.from_arrays(
                [grouped.column("__pane").combine_chunks(), values.combine_chunks()],
                names=["t", "v"])
        return pa.table({
            "k": grouped.column("k"), "__pane": grouped.column("__pane"),
            "__kg": pa.array(grouped.column("k").to_numpy() % GROUPS, pa.int32()),
            "__rows": counts, "p0_0": counts, "p1_0": grouped.column("v_distinct"),
            "p2_0": pairs(grouped.column("v_min")), "p3_0": pairs(grouped.column("v_max"))})
    return pa.table({
        "k": grouped.column("k"), "__pane": grouped.column("__pane"),
        "__kg": pa.array(grouped.column("k").to_numpy() % GROUPS, pa.int32()),
        "__rows": counts, "p0_0": counts, "p1_0": grouped.column("v_sum"), "p1_1": counts})


def _epoch(number: int, ranges: list[range]) -> TaskEpoch:
    """Epoch ``number``: the watermark 1 s behind the end of its 20 s of event time."""
    before = NO_WATERMARK if number == 0 else number * 20 * SECOND - SECOND
    return TaskEpoch(b"", "bench", "operator", "run", number, number - 1 if number else None,
                     tuple((r.start, r.stop) for r in ranges), before,
                     (number + 1) * 20 * SECOND - SECOND)


def _operator_seconds(work: Any, epochs: list[pa.Table]) -> float:
    return operator_seconds(work, epochs, GROUPS, _epoch)


def _columns_against_per_key(aggregates: tuple[AggregateCall, ...], epochs: list[pa.Table],
                             events: int, what: str, name: str) -> None:
    """The same ``epochs`` of partials through the columnar and the per-key session
    operator (gap 1 s); prints and records (as ``name``) each one's seconds an epoch."""
    spec = WindowAggregate(
        operator_id="q0", input_sql="", key_columns=("k",),
        window=WindowSpec("session", 0, 0, SECOND), aggregates=aggregates, output_view="out")
    schema = output_schema(spec, epochs[0].schema)
    columns = _operator_seconds(SessionColumnsRange(spec, schema), epochs)
    per_key = _operator_seconds(_WindowRange(spec, GROUPS, schema), epochs)
    print(f"{what}: columns {columns:.3f} s, per key {per_key:.3f} s an epoch "
          f"({per_key / columns:.1f}x)", flush=True)
    RESULTS[name] = {"events_per_epoch": events, "columns_s": columns, "per_key_s": per_key}
    save_result("session_windows", RESULTS)


#: count(*) and count(DISTINCT v), first_value(v), last_value(v)
DISTINCT_AGGREGATES = (AggregateCall("count_star", None, "n"),
                       AggregateCall("count_distinct", "a0", "kinds"),
                       AggregateCall("first_value", "a0", "earliest"),
                       AggregateCall("last_value", "a0", "latest"))


@pytest.mark.parametrize(("keys", "events", "distinct"),
                         [(10_000, 100_000, False), (100_000, 250_000, False),
                          (10_000, 100_000, True)])
def test_the_operator_alone_columns_against_per_key(keys: int, events: int,
                                                    distinct: bool) -> None:
    aggregates = DISTINCT_AGGREGATES if distinct else (
        AggregateCall("count_star", None, "n"), AggregateCall("sum", "a0", "total"))
    rng = np.random.default_rng(7)
    epochs = [_partials(rng, number, events, keys, distinct) for number in range(10)]
    kind = "distinct, first and last" if distinct else "count, sum"
    _columns_against_per_key(aggregates, epochs, events,
                             f"{kind}, {keys:,} keys, {events:,} events an epoch",
                             f"operator_{keys}{'_distinct' if distinct else ''}")


def _rows_partials(rng: np.random.Generator, epoch: int, events: int, keys: int) -> pa.Table:
    """An epoch's partials of ``count(*), udaf(v) GROUP BY k, SESSION``: per key and exact
    time, the count and the rows (``struct<a0>``) an aggregate UDF is handed."""
    drawn = rng.integers(0, keys, events)
    times = epoch * 20 * SECOND + np.sort(rng.integers(0, 20 * SECOND, events))
    table = pa.table({"k": drawn.astype(np.int64), "__pane": times,
                      "v": rng.integers(1, 1_000, events)})
    grouped = table.group_by(["k", "__pane"], use_threads=False).aggregate(
        [("v", "count"), ("v", "list")])
    lists = grouped.column("v_list").combine_chunks()
    rows = pa.ListArray.from_arrays(
        lists.offsets, pa.StructArray.from_arrays([lists.values], names=["a0"]))
    counts = grouped.column("v_count")
    return pa.table({
        "k": grouped.column("k"), "__pane": grouped.column("__pane"),
        "__kg": pa.array(grouped.column("k").to_numpy() % GROUPS, pa.int32()),
        "__rows": counts, "p0_0": counts, "p1_0": rows})


@pytest.mark.parametrize(("keys", "events"), [(10_000, 100_000), (1_000, 100_000)])
def test_an_aggregate_udfs_rows_columns_against_per_key(keys: int, events: int) -> None:
    rng = np.random.default_rng(7)
    epochs = [_rows_partials(rng, number, events, keys) for number in range(10)]
    _columns_against_per_key(
        (AggregateCall("count_star", None, "n"), AggregateCall("udaf_rows", "a0", "rows")),
        epochs, events, f"an aggregate UDF's rows, {keys:,} keys, {events:,} events an epoch",
        f"operator_{keys}_udaf_rows")


#: count(*), sum(v), min(v), max(v) of a DECIMAL(20, 2)
DECIMAL_AGGREGATES = (AggregateCall("count_star", None, "n"), AggregateCall("sum", "a0", "total"),
                      AggregateCall("min", "a0", "least"), AggregateCall("max", "a0", "most"))


def _cents(values: pa.ChunkedArray, kind: pa.DataType) -> pa.Array:
    """Whole numbers of cents (below 2**53) as DECIMALs of ``kind`` (scale 2)."""
    return pa.array(values.to_numpy() / 100).cast(kind)


def _decimal_partials(rng: np.random.Generator, epoch: int, events: int,
                      keys: int) -> pa.Table:
    """An epoch's partials of :data:`DECIMAL_AGGREGATES` per key and exact time, as native
    Spark gives them (the sum a DECIMAL(30, 2))."""
    drawn = rng.integers(0, keys, events)
    times = epoch * 20 * SECOND + np.sort(rng.integers(0, 20 * SECOND, events))
    table = pa.table({"k": drawn.astype(np.int64), "__pane": times,
                      "v": rng.integers(1, 10_000_000, events)})
    grouped = table.group_by(["k", "__pane"], use_threads=False).aggregate(
        [("v", "count"), ("v", "sum"), ("v", "min"), ("v", "max")])
    counts = grouped.column("v_count")
    money, total = pa.decimal128(20, 2), pa.decimal128(30, 2)
    return pa.table({
        "k": grouped.column("k"), "__pane": grouped.column("__pane"),
        "__kg": pa.array(grouped.column("k").to_numpy() % GROUPS, pa.int32()),
        "__rows": counts, "p0_0": counts, "p1_0": _cents(grouped.column("v_sum"), total),
        "p1_1": counts, "p2_0": _cents(grouped.column("v_min"), money),
        "p3_0": _cents(grouped.column("v_max"), money)})


@pytest.mark.parametrize(("keys", "events"), [(10_000, 100_000), (100_000, 250_000)])
def test_decimal_sums_columns_against_per_key(keys: int, events: int) -> None:
    rng = np.random.default_rng(7)
    epochs = [_decimal_partials(rng, number, events, keys) for number in range(10)]
    _columns_against_per_key(
        DECIMAL_AGGREGATES, epochs, events,
        f"decimal count, sum, min, max, {keys:,} keys, {events:,} events an epoch",
        f"operator_{keys}_decimal")
