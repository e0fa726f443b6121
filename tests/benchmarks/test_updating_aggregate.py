"""Updating aggregates (a GROUP BY without a window) over many keys.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_updating_aggregate.py -s``

1. Whole processes, Spate against a Spark user's update-mode ``groupBy`` on the
   same Nexmark bids (:mod:`tests.benchmarks.scaling_job`, ``local[2]``, each run
   in a process of its own after a warm-up run): ``count(*), sum(price)`` by
   ``price % 100000`` (at most 65,536 keys: a bid's price takes that many values)
   and ``count(*), sum(price), max(price)`` by an auction and price folded into a
   million keys.
2. The operator alone, without Spark: the same signed partials (what native
   pre-aggregation gives for an epoch) through the columnar operator
   (:mod:`spate.engine.runtime.updating_columns`) and the per-key one
   (:class:`spate.engine.runtime.updating.UpdatingAggregateOperator`), over an
   embedded (SQLite) store, both key-group ranges of each epoch in turn; and the
   same for ``max``, distinct counts (of numbers and of text), percentiles and
   bit_or over updating input (a multiset of values a key) and for variances
   (moments a key).

Results go under ``updating_aggregate`` in ``docs/benchmarks/results.json``.
"""

from __future__ import annotations

from typing import Any

import matplotlib
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from spate.engine.planner.plan import AggregateCall, UpdatingAggregate
from spate.engine.runtime.tasks import TaskEpoch
from spate.engine.runtime.updating import UpdatingAggregateOperator, _UpdatingRange
from spate.engine.runtime.updating_columns import UpdatingColumnsRange, columnar
from spate.engine.runtime.watermarks import NO_WATERMARK
from tests.benchmarks.scaling_job import run_in_process
from tests.benchmarks.workloads import RESULTS_DIR, load_results, operator_seconds, save_result

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # noqa: E402  (after choosing the file backend)

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.timeout(7200)]

#: Events of each whole-process run (ten epochs).
EVENTS = 1_000_000
RUNS = 2
GROUPS = 128
#: what earlier runs measured, updated test by test
RESULTS: dict[str, Any] = load_results().get("updating_aggregate", {})


@pytest.mark.parametrize("query", ["updating100k", "updating1m"])
def test_whole_process_against_native_spark(query: str) -> None:
    seconds: dict[str, list[float]] = {"spate": [], "native": []}
    for _ in range(RUNS):  # alternating, so both meet the machine's load alike
        for engine in seconds:
            seconds[engine].append(run_in_process(engine, query, EVENTS)["seconds"])
    best = {engine: min(runs) for engine, runs in seconds.items()}
    row = {"events": EVENTS, "seconds": seconds,
           "events_per_s": {e: EVENTS / s for e, s in best.items()},
           "spate_over_native": best["native"] / best["spate"]}
    print(f"{query}: Spate {best['spate']:.1f} s, native {best['native']:.1f} s "
          f"({row['spate_over_native']:.2f}x of native's throughput)", flush=True)
    RESULTS[query] = row
    save_result("updating_aggregate", RESULTS)
    _plot()


def _partials(rng: np.random.Generator, events: int, keys: int) -> pa.Table:
    """An epoch's signed partials of ``count(*), sum(v), max(v) GROUP BY k`` over
    ``events`` rows with uniform keys."""
    drawn = rng.integers(0, keys, events)
    unique, counts = np.unique(drawn, return_counts=True)
    values = rng.integers(1, 1_000, events)
    sums = np.bincount(drawn, weights=values, minlength=keys)[unique].astype(np.int64)
    tops = np.zeros(keys, np.int64)
    np.maximum.at(tops, drawn, values)
    return pa.table({
        "__key": pa.array([f'{{"k":{k}}}' for k in unique.tolist()]),
        "k": unique.astype(np.int64), "__count": counts, "__rows": counts,
        "__seen": pa.array(np.full(len(unique), 10**12), pa.int64())
        .cast(pa.timestamp("us", tz="UTC")),
        "p0_0": counts, "p1_0": sums, "p1_1": counts, "p2_0": tops[unique],
        "__kg": pa.array(unique % GROUPS, pa.int32())})


def _epoch(number: int, ranges: list[range]) -> TaskEpoch:
    """Epoch ``number``, flushing every key it changed (a second apart)."""
    return TaskEpoch(b"", "bench", "operator", "run", number, number - 1 if number else None,
                     tuple((r.start, r.stop) for r in ranges), NO_WATERMARK, 10**12,
                     clock_ms=number * 1_000, flush_interval_ms=0)


def _operator_seconds(work: Any, epochs: list[pa.Table]) -> float:
    return operator_seconds(work, epochs, GROUPS, _epoch)


@pytest.mark.parametrize(("keys", "events"), [(100_000, 40_000), (1_000_000, 250_000)])
def test_the_operator_alone_columns_against_per_key(keys: int, events: int) -> None:
    spec = UpdatingAggregate(
        operator_id="q0", input_sql="", key_columns=("k",), updating_input=False,
        aggregates=(AggregateCall("count_star", None, "n"), AggregateCall("sum", "a0", "total"),
                    AggregateCall("max", "a0", "top")), output_view="out")
    rng = np.random.default_rng(7)
    epochs = [_partials(rng, events, keys) for _ in range(10)]
    schema = epochs[0].schema
    operator = UpdatingAggregateOperator(spec, GROUPS)
    columns = _operator_seconds(UpdatingColumnsRange(spec, schema, operator.output_schema(schema)),
                                epochs)
    per_key = _operator_seconds(_UpdatingRange(operator, schema), epochs)
    print(f"{keys:,} keys, {events:,} events an epoch: columns {columns:.3f} s, "
          f"per key {per_key:.3f} s an epoch ({per_key / columns:.1f}x)", flush=True)
    RESULTS[f"operator_{keys}"] = {"events_per_epoch": events, "columns_s": columns,
                                   "per_key_s": per_key}
    save_result("updating_aggregate", RESULTS)
    _plot()


def _signed_epochs(rng: np.random.Generator, count: int, events: int, keys: int,
                   floats: bool = False) -> list[pa.Table]:
    """``count`` epochs' signed partials of ``count(*), max(v) GROUP BY k`` over updating
    input: each epoch adds ``events`` rows of uniform keys and withdraws half of the
    rows the epoch before added (max keeps each key's multiset of values); ``v`` a
    BIGINT, or with ``floats`` a DOUBLE (a thousand values, one in a hundred NaN) and
    then ``count(*), max(v), count(DISTINCT v)``."""
    epochs = []
    previous = (np.zeros(0, np.int64), np.zeros(0, np.float64 if floats else np.int64))
    for _ in range(count):
        keys_in = rng.integers(0, keys, events)
        values_in = rng.integers(1, 1_000, events)
        if floats:
            values_in = np.where(values_in % 100 == 0, np.nan, values_in / 8.0)
        gone = rng.random(len(previous[0])) < 0.5
        rows = np.concatenate([keys_in, previous[0][gone]])
        values = np.concatenate([values_in, previous[1][gone]])
        signs = np.concatenate([np.ones(events, np.int32), -np.ones(int(gone.sum()), np.int32)])
        previous = (keys_in, values_in)
        order = np.argsort(rows, kind="stable")
        rows, values, signs = rows[order], values[order], signs[order]
        unique, starts, counts = np.unique(rows, return_index=True, return_counts=True)
        offsets = np.r_[starts, len(rows)].astype(np.int32)
        multisets = pa.ListArray.from_arrays(pa.array(offsets), pa.StructArray.from_arrays(
            [pa.array(values, pa.float64() if floats else pa.int64()),
             pa.array(signs, pa.int32())], names=["v", "s"]))
        net = np.add.reduceat(signs.astype(np.int64), starts)
        epochs.append(pa.table({
            "__key": pa.array([f'{{"k":{k}}}' for k in unique.tolist()]),
            "k": unique.astype(np.int64), "__count": counts, "__rows": net,
            "__seen": pa.array(np.full(len(unique), 10**12), pa.int64())
            .cast(pa.timestamp("us", tz="UTC")),
            "p0_0": net, "p1_0": multisets,
            **({"p2_0": multisets} if floats else {}),  # max and a distinct count of v
            "__kg": pa.array(unique % GROUPS, pa.int32())}))
    return epochs


def _moment_epochs(rng: np.random.Generator, count: int, events: int, keys: int
                   ) -> list[pa.Table]:
    """``count`` epochs' signed partials of ``count(*), var_samp(v), stddev_pop(v) GROUP
    BY k`` over ``events`` appended rows of uniform keys: each variance's moments of the
    rows added (count, mean, squared deviations), then of those withdrawn (none)."""
    epochs = []
    for _ in range(count):
        drawn = rng.integers(0, keys, events)
        values = rng.integers(1, 1_000, events).astype(np.float64)
        unique, inverse, counts = np.unique(drawn, return_inverse=True, return_counts=True)
        means = np.bincount(inverse, weights=values) / counts
        squares = np.bincount(inverse, weights=(values - means[inverse]) ** 2)
        columns: dict[str, Any] = {
            "__key": pa.array([f'{{"k":{k}}}' for k in unique.tolist()]),
            "k": unique.astype(np.int64), "__count": counts, "__rows": counts,
            "__seen": pa.array(np.full(len(unique), 10**12), pa.int64())
            .cast(pa.timestamp("us", tz="UTC")), "p0_0": counts}
        for i in (1, 2):
            columns.update({f"p{i}_0": counts, f"p{i}_1": means, f"p{i}_2": squares,
                            f"p{i}_3": np.zeros(len(unique), np.int64),
                            f"p{i}_4": pa.nulls(len(unique), pa.float64()),
                            f"p{i}_5": pa.nulls(len(unique), pa.float64())})
        columns["__kg"] = pa.array(unique % GROUPS, pa.int32())
        epochs.append(pa.table(columns))
    return epochs


def _as_text(epoch: pa.Table) -> pa.Table:
    """An epoch of :func:`_signed_epochs` with its values as text, for two aggregates."""
    text = pa.list_(pa.struct([pa.field("v", pa.string()), pa.field("s", pa.int32())]))
    values = epoch.column("p1_0").cast(text)
    return epoch.set_column(epoch.schema.get_field_index("p1_0"), "p1_0", values) \
        .add_column(epoch.num_columns - 1, "p2_0", values)


_PAIR = pa.struct([pa.field("t", pa.int64()), pa.field("v", pa.float64())])


def _timed_epochs(rng: np.random.Generator, count: int, events: int, keys: int
                  ) -> list[pa.Table]:
    """``count`` epochs' partials of ``count(*), first_value(v), last_value(v) GROUP BY
    k`` over ``events`` appended rows of uniform keys, a microsecond apart: each key's
    earliest and latest (event time, value) pair of the epoch."""
    epochs = []
    for number in range(count):
        drawn = rng.integers(0, keys, events)
        times = number * events + np.arange(events, dtype=np.int64)
        values = rng.integers(1, 1_000, events) / 8.0
        unique, first, counts = np.unique(drawn, return_index=True, return_counts=True)
        _, from_end = np.unique(drawn[::-1], return_index=True)
        last = events - 1 - from_end
        first_pairs, last_pairs = (
            pa.StructArray.from_arrays([pa.array(times[at]), pa.array(values[at])],
                                       fields=list(_PAIR)) for at in (first, last))
        epochs.append(pa.table({
            "__key": pa.array([f'{{"k":{k}}}' for k in unique.tolist()]),
            "k": unique.astype(np.int64), "__count": counts, "__rows": counts,
            "__seen": pa.array(times[last], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "p0_0": counts, "p1_0": first_pairs, "p2_0": last_pairs,
            "__kg": pa.array(unique % GROUPS, pa.int32())}))
    return epochs


def _as_pairs(epoch: pa.Table) -> pa.Table:
    """An epoch of :func:`_signed_epochs` with each value ``v`` as the pair (``v``
    microseconds, ``v / 8``), for first_value and last_value."""
    lists = epoch.column("p1_0").combine_chunks()
    flat = pc.list_flatten(lists)
    numbers = flat.field("v")
    pairs = pa.StructArray.from_arrays([numbers, pc.divide(numbers.cast(pa.float64()), 8.0)],
                                       fields=list(_PAIR))
    signed = pa.ListArray.from_arrays(lists.offsets, pa.StructArray.from_arrays(
        [pairs, flat.field("s")], names=["v", "s"]))
    return epoch.set_column(epoch.schema.get_field_index("p1_0"), "p1_0", signed) \
        .add_column(epoch.num_columns - 1, "p2_0", signed)


def _as_weighted(epoch: pa.Table) -> pa.Table:
    """An epoch of :func:`_signed_epochs` with each value ``v`` as the pair
    ``[v / 8, v % 3 + 1]`` (value, weight), for the weighted percentile."""
    lists = epoch.column("p1_0").combine_chunks()
    flat = pc.list_flatten(lists)
    numbers = flat.field("v").to_numpy()
    pairs = pa.ListArray.from_arrays(
        pa.array(np.arange(0, 2 * len(numbers) + 1, 2, dtype=np.int32)),
        pa.array(np.column_stack([numbers / 8.0, numbers % 3 + 1.0]).reshape(-1)))
    signed = pa.ListArray.from_arrays(lists.offsets, pa.StructArray.from_arrays(
        [pairs, flat.field("s")], names=["v", "s"]))
    return epoch.set_column(epoch.schema.get_field_index("p1_0"), "p1_0", signed)


def _decimal_sums_epochs(rng: np.random.Generator, count: int, events: int,
                         keys: int) -> list[pa.Table]:
    """``count`` epochs' partials of ``count(*), sum(v), avg(v) GROUP BY k`` over appended
    rows, ``v`` a DECIMAL(20, 2) of whole cents (its partial sums DECIMAL(30, 2))."""
    epochs = []
    for _ in range(count):
        epoch = _partials(rng, events, keys)
        cents = pa.array(epoch.column("p1_0").to_numpy() / 100).cast(pa.decimal128(30, 2))
        counted = epoch.column("p1_1")
        epochs.append(epoch.drop_columns(["p1_0", "p1_1", "p2_0", "__kg"]).append_column(
            "p1_0", cents).append_column("p1_1", counted).append_column(
            "p2_0", cents).append_column("p2_1", counted).append_column(
            "__kg", epoch.column("__kg")))
    return epochs


def _text_max(epoch: pa.Table) -> pa.Table:
    """An epoch of :func:`_partials` as ``count(*), max(name)``: each key's greatest value
    as the text ``name-<value>`` (zero-padded, so text order is number order)."""
    tops = pc.binary_join_element_wise(
        "name-", pc.utf8_lpad(epoch.column("p2_0").cast(pa.string()), 6, "0"), "")
    return epoch.drop_columns(["p1_0", "p1_1", "p2_0", "__kg"]).append_column(
        "p1_0", tops).append_column("__kg", epoch.column("__kg"))


_TIMED = (AggregateCall("count_star", None, "n"), AggregateCall("first_value", "a0", "earliest"),
          AggregateCall("last_value", "a0", "latest"))

#: name -> (its aggregates, updating input, its epochs' partials)
_KEPT_IN_COLUMNS_SINCE_DECEMBER = {
    "updating_max": ((AggregateCall("count_star", None, "n"), AggregateCall("max", "a0", "top")),
                     True, _signed_epochs),
    "variances": ((AggregateCall("count_star", None, "n"),
                   AggregateCall("var_samp", "a0", "spread"),
                   AggregateCall("stddev_pop", "a0", "sd")), False, _moment_epochs),
    # the same multisets of values as updating_max's (later the same day)
    "updating_distinct": ((AggregateCall("count_star", None, "n"),
                           AggregateCall("count_distinct", "a0", "kinds")), True, _signed_epochs),
    # the same multisets of DOUBLE values (a NaN among them), max and distinct count
    "updating_floats": ((AggregateCall("count_star", None, "n"),
                         AggregateCall("max", "a0", "top"),
                         AggregateCall("count_distinct", "a0", "kinds")), True,
                        lambda rng, count, events, keys: _signed_epochs(
                            rng, count, events, keys, floats=True)),
    # the same multisets of DOUBLE values, median and 90th percentile (2026-12-03)
    "updating_percentiles": ((AggregateCall("count_star", None, "n"),
                              AggregateCall("median", "a0", "p50"),
                              AggregateCall("percentile_cont", "a0", "p90", 0.9)), True,
                             lambda rng, count, events, keys: _signed_epochs(
                                 rng, count, events, keys, floats=True)),
    # the same multisets of integers as text, count(DISTINCT) and max (2026-12-03)
    "updating_text": ((AggregateCall("count_star", None, "n"),
                       AggregateCall("count_distinct", "a0", "kinds"),
                       AggregateCall("max", "a1", "top")), True,
                      lambda rng, count, events, keys: [_as_text(epoch) for epoch in
                                                        _signed_epochs(rng, count, events, keys)]),
    # the same multisets of integers, bit_or (2026-12-03)
    "updating_bits": ((AggregateCall("count_star", None, "n"),
                       AggregateCall("bit_or", "a0", "any")), True, _signed_epochs),
    # the same multisets of integers, array_agg (2026-12-03)
    "updating_array_agg": ((AggregateCall("count_star", None, "n"),
                            AggregateCall("array_agg", "a0", "all")), True, _signed_epochs),
    # the same multisets of integers as [value, weight] pairs, the weighted median
    "updating_weighted": ((AggregateCall("count_star", None, "n"),
                           AggregateCall("percentile_cont_weighted", "a0", "p50")), True,
                          lambda rng, count, events, keys: [
                              _as_weighted(epoch)
                              for epoch in _signed_epochs(rng, count, events, keys)]),
    # first_value and last_value of a DOUBLE over appended rows: a pair a key (2026-12-03)
    "timed": (_TIMED, False, _timed_epochs),
    # ... and over updating input, of the same multisets as updating_max's, as pairs
    "updating_timed": (_TIMED, True, lambda rng, count, events, keys: [
        _as_pairs(epoch) for epoch in _signed_epochs(rng, count, events, keys)]),
    # sum and avg of a DECIMAL, exact: a key's sum as four 32-bit words
    "decimal_sums": ((AggregateCall("count_star", None, "n"), AggregateCall("sum", "a0", "total"),
                      AggregateCall("avg", "a0", "mean")), False, _decimal_sums_epochs),
    # the greatest text of appended rows: an Arrow column of each key's greatest
    "text_max": ((AggregateCall("count_star", None, "n"), AggregateCall("max", "a0", "top")),
                 False, lambda rng, count, events, keys: [
                     _text_max(epoch) for epoch in (_partials(rng, events, keys)
                                                    for _ in range(count))]),
}


@pytest.mark.parametrize("name", list(_KEPT_IN_COLUMNS_SINCE_DECEMBER))
def test_the_operator_alone_multisets_and_moments(name: str) -> None:
    """max and count(DISTINCT) over updating input (a multiset of values a key) and
    variances (moments a key): in columns since 2026-12-01, per key before."""
    keys, events = 100_000, 40_000
    aggregates, updating_input, make_epochs = _KEPT_IN_COLUMNS_SINCE_DECEMBER[name]
    spec = UpdatingAggregate(operator_id="q0", input_sql="", key_columns=("k",),
                             updating_input=updating_input, aggregates=aggregates,
                             output_view="out")
    epochs = make_epochs(np.random.default_rng(7), 10, events, keys)
    schema = epochs[0].schema
    operator = UpdatingAggregateOperator(spec, GROUPS)
    assert columnar(spec, schema)
    columns = _operator_seconds(UpdatingColumnsRange(spec, schema, operator.output_schema(schema)),
                                epochs)
    per_key = _operator_seconds(_UpdatingRange(operator, schema), epochs)
    print(f"{name}, {keys:,} keys, {events:,} events an epoch: columns {columns:.3f} s, "
          f"per key {per_key:.3f} s an epoch ({per_key / columns:.1f}x)", flush=True)
    RESULTS[f"operator_{name}_{keys}"] = {"events_per_epoch": events,
                                          "columns_s": columns, "per_key_s": per_key}
    save_result("updating_aggregate", RESULTS)


def _plot() -> None:
    """Whole-process throughput of both engines, and the operator's seconds an epoch."""
    figure, (runs, operator) = plt.subplots(1, 2, figsize=(9, 3.8))
    queries = [q for q in ("updating100k", "updating1m") if q in RESULTS]
    for offset, engine in ((-0.2, "spate"), (0.2, "native")):
        runs.bar([i + offset for i in range(len(queries))],
                 [RESULTS[q]["events_per_s"][engine] / 1000 for q in queries], width=0.4,
                 label=engine, color="tab:blue" if engine == "spate" else "tab:gray")
    runs.set_xticks(range(len(queries)), queries)
    runs.set_ylabel("thousand events / s (best run)")
    runs.set_title("whole process, local[2]", fontsize=10)
    runs.legend(fontsize=8)
    sizes = [k for k in ("operator_100000", "operator_1000000") if k in RESULTS]
    for offset, (column, label) in ((-0.2, ("columns_s", "columns")),
                                    (0.2, ("per_key_s", "per key"))):
        operator.bar([i + offset for i in range(len(sizes))],
                     [RESULTS[k][column] for k in sizes], width=0.4, label=label,
                     color="tab:blue" if column == "columns_s" else "tab:orange")
    operator.set_xticks(range(len(sizes)), [k.removeprefix("operator_") + " keys"
                                            for k in sizes])
    operator.set_ylabel("seconds an epoch")
    operator.set_title("the operator alone", fontsize=10)
    operator.legend(fontsize=8)
    figure.suptitle("Updating aggregates", fontsize=11)
    figure.tight_layout()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    figure.savefig(RESULTS_DIR / "updating_aggregate.png", dpi=110)
    plt.close(figure)
