"""Variances, correlations, distinct counts, first and last values, bitwise aggregates and
percentiles over TUMBLE and HOP windows: the operator alone, in columns against per key.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_window_aggregates.py -s``

``count(*), stddev_samp(v), corr(v, x)`` (``moments``), ``count(*), count(DISTINCT
item)`` (``distinct``, 100 items) or ``first_value(price), last_value(price),
min(price), max(price)`` (``first_last``: a candle) or ``count(*), bit_and(flags),
bit_or(flags), bit_xor(flags)`` (``bits``, 16 random flags) or ``count(*), median(ms),
percentile_cont(0.99) WITHIN GROUP (ORDER BY ms)`` (``percentiles``: latencies) or
``count(*), udaf(ms)`` (``udaf_rows``: an aggregate UDF's argument rows, which a window
hands to the UDF whole) or ``count(*), min(name), max(name)`` (``text_extremes``, 10,000
names) ``GROUP BY k, HOP(1 s, width)``
(width 1 s: TUMBLE): the same pane partials (per key and one-second pane, as Spark's native
pre-aggregation gives them) through the columnar operator
(:mod:`spate.engine.runtime.window_columns`) and the per-key one
(:mod:`spate.engine.runtime.window`), over an embedded (SQLite) store, both
key-group ranges of each epoch in turn; each epoch brings 20 s of event time and
the watermark follows it 1 s behind, so each epoch fires 20 slides of windows.

Results go under ``window_aggregates`` in ``docs/benchmarks/results.json``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from spate.engine.planner.plan import AggregateCall, WindowAggregate, WindowSpec
from spate.engine.runtime.output import output_schema
from spate.engine.runtime.tasks import TaskEpoch
from spate.engine.runtime.watermarks import NO_WATERMARK
from spate.engine.runtime.window import _WindowRange
from spate.engine.runtime.window_columns import WindowColumnsRange
from tests.benchmarks.workloads import load_results, operator_seconds, save_result

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(7200)]

GROUPS = 128
SECOND = 1_000_000
EPOCHS = 6
EPOCH_S = 20
ITEMS = 100
RESULTS: dict[str, Any] = load_results().get("window_aggregates", {})
#: The aggregates of each case.
CASES = {
    "moments": (AggregateCall("count_star", None, "n"),
                AggregateCall("stddev_samp", "a0", "sd"), AggregateCall("corr", "a1", "r")),
    "distinct": (AggregateCall("count_star", None, "n"),
                 AggregateCall("count_distinct", "a0", "items")),
    # a candle: open, close, low, high
    "first_last": (AggregateCall("first_value", "a0", "open"),
                   AggregateCall("last_value", "a0", "close"),
                   AggregateCall("min", "a0", "low"), AggregateCall("max", "a0", "high")),
    "bits": (AggregateCall("count_star", None, "n"), AggregateCall("bit_and", "a0", "all"),
             AggregateCall("bit_or", "a0", "any"), AggregateCall("bit_xor", "a0", "odd")),
    "percentiles": (AggregateCall("count_star", None, "n"),
                    AggregateCall("median", "a0", "p50"),
                    AggregateCall("percentile_cont", "a0", "p99", 0.99)),
    "udaf_rows": (AggregateCall("count_star", None, "n"),
                  AggregateCall("udaf_rows", "a0", "rows")),
    # the least and greatest of text: each value's place in a sort of the panes
    "text_extremes": (AggregateCall("count_star", None, "n"),
                      AggregateCall("min", "a0", "first_name"),
                      AggregateCall("max", "a0", "last_name")),
}
#: Each bitwise aggregate's pane partial, as Spark's own ``bit_*`` gives it.
BITWISE = (np.bitwise_and, np.bitwise_or, np.bitwise_xor)
PAIR = pa.struct([pa.field("t", pa.int64()), pa.field("v", pa.int64())])


def _first_last_partials(rng: np.random.Generator, epoch: int, events: int,
                         keys: int) -> pa.Table:
    """An epoch's pane partials of a candle per key and one-second pane: the earliest and
    latest ``(time, price)`` pairs, the lowest and highest price."""
    k = rng.integers(0, keys, events)
    ts = epoch * EPOCH_S * SECOND + rng.integers(0, EPOCH_S * SECOND, events)
    price = rng.integers(1_000, 2_000, events)
    order = np.lexsort((price, ts, k))
    k, ts, price = k[order], ts[order], price[order]
    pane = ts - ts % SECOND
    firsts = np.flatnonzero(np.diff(k * (2**40) + pane, prepend=-1))
    lasts = np.append(firsts[1:] - 1, events - 1)
    n = pa.array(np.diff(np.append(firsts, events)))

    def pairs(rows: np.ndarray) -> pa.StructArray:
        return pa.StructArray.from_arrays([pa.array(ts[rows]), pa.array(price[rows])],
                                          fields=list(PAIR))

    return pa.table({
        "k": pa.array(k[firsts]), "__pane": pa.array(pane[firsts]),
        "__kg": pa.array((k[firsts] % GROUPS).astype(np.int32)), "__rows": n,
        "p0_0": pairs(firsts), "p1_0": pairs(lasts),
        "p2_0": pa.array(np.minimum.reduceat(price, firsts)),
        "p3_0": pa.array(np.maximum.reduceat(price, firsts))})


def _bits_partials(rng: np.random.Generator, epoch: int, events: int, keys: int) -> pa.Table:
    """An epoch's pane partials: ``count(*)``, and per bitwise aggregate its value and the
    count of values, per key and one-second pane, over 16-bit random flags."""
    k = rng.integers(0, keys, events)
    pane = (epoch * EPOCH_S + rng.integers(0, EPOCH_S, events)) * SECOND
    flags = rng.integers(0, 1 << 16, events)
    order = np.lexsort((pane, k))
    k, pane, flags = k[order], pane[order], flags[order]
    firsts = np.flatnonzero(np.diff(k * (2**40) + pane, prepend=-1))
    counts = pa.array(np.diff(np.append(firsts, events)).astype(np.int64))
    columns = {"k": pa.array(k[firsts]), "__pane": pa.array(pane[firsts]),
               "__kg": pa.array((k[firsts] % GROUPS).astype(np.int32)), "__rows": counts,
               "p0_0": counts}
    for i, operation in enumerate(BITWISE, start=1):
        columns[f"p{i}_0"] = pa.array(operation.reduceat(flags, firsts))
        columns[f"p{i}_1"] = counts
    return pa.table(columns)


def _percentile_partials(rng: np.random.Generator, epoch: int, events: int,
                         keys: int, field: str = "v") -> pa.Table:
    """An epoch's pane partials: ``count(*)``, and for each percentile the pane's values
    (sorted, as ``struct<v>``; an aggregate UDF's rows: ``struct<a0>``), per key and
    one-second pane, over log-normal latencies."""
    k = rng.integers(0, keys, events)
    pane = (epoch * EPOCH_S + rng.integers(0, EPOCH_S, events)) * SECOND
    ms = np.round(rng.lognormal(3.0, 1.0, events), 1)
    order = np.lexsort((ms, pane, k))
    k, pane, ms = k[order], pane[order], ms[order]
    firsts = np.flatnonzero(np.diff(k * (2**40) + pane, prepend=-1))
    counts = np.diff(np.append(firsts, events)).astype(np.int64)
    offsets = pa.array(np.append(firsts, events).astype(np.int32))
    values = pa.StructArray.from_arrays([pa.array(ms)], names=[field])
    bags = pa.ListArray.from_arrays(offsets, values)
    return pa.table({
        "k": pa.array(k[firsts]), "__pane": pa.array(pane[firsts]),
        "__kg": pa.array((k[firsts] % GROUPS).astype(np.int32)), "__rows": pa.array(counts),
        "p0_0": pa.array(counts), "p1_0": bags, "p2_0": bags})


def _distinct_partials(rng: np.random.Generator, epoch: int, events: int,
                       keys: int) -> pa.Table:
    """An epoch's pane partials: ``count(*)`` and the set of items per key and
    one-second pane, over ``events`` rows with uniform keys and items."""
    k = rng.integers(0, keys, events)
    pane = (epoch * EPOCH_S + rng.integers(0, EPOCH_S, events)) * SECOND
    item = rng.integers(0, ITEMS, events)
    order = np.lexsort((item, pane, k))
    k, pane, item = k[order], pane[order], item[order]
    firsts = np.flatnonzero(np.diff(k * (2**40) + pane, prepend=-1))
    n = np.diff(np.append(firsts, events))
    unique = np.ones(events, bool)
    unique[1:] = (k[1:] != k[:-1]) | (pane[1:] != pane[:-1]) | (item[1:] != item[:-1])
    pane_of = np.cumsum(np.isin(np.arange(events), firsts)) - 1
    offsets = np.concatenate([[0], np.cumsum(np.bincount(pane_of[unique],
                                                         minlength=len(firsts)))])
    counts = pa.array(n.astype(np.int64))
    return pa.table({
        "k": pa.array(k[firsts]), "__pane": pa.array(pane[firsts]),
        "__kg": pa.array((k[firsts] % GROUPS).astype(np.int32)), "__rows": counts,
        "p0_0": counts,
        "p1_0": pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                         pa.array(item[unique]))})


def _moment_partials(rng: np.random.Generator, epoch: int, events: int,
                     keys: int) -> pa.Table:
    """An epoch's pane partials: ``count(*)``, the moments of ``v`` and the co-moments of
    ``(v, x)`` per key and one-second pane, over ``events`` rows with uniform keys."""
    k = rng.integers(0, keys, events)
    pane = (epoch * EPOCH_S + rng.integers(0, EPOCH_S, events)) * SECOND
    y = rng.normal(500.0, 100.0, events)
    x = y * 0.3 + rng.normal(0.0, 10.0, events)
    order = np.lexsort((pane, k))
    k, pane, y, x = k[order], pane[order], y[order], x[order]
    firsts = np.flatnonzero(np.diff(k * (2**40) + pane, prepend=-1))
    n = np.diff(np.append(firsts, events))

    def sums(values: np.ndarray) -> np.ndarray:
        summed: np.ndarray = np.add.reduceat(values, firsts)
        return summed

    my, mx = sums(y) / n, sums(x) / n
    syy = np.maximum(sums(y * y) - n * my * my, 0.0)
    sxx = np.maximum(sums(x * x) - n * mx * mx, 0.0)
    sxy = sums(x * y) - n * mx * my
    counts = pa.array(n.astype(np.int64))
    return pa.table({
        "k": pa.array(k[firsts]), "__pane": pa.array(pane[firsts]),
        "__kg": pa.array((k[firsts] % GROUPS).astype(np.int32)), "__rows": counts,
        "p0_0": counts, "p1_0": counts, "p1_1": pa.array(my), "p1_2": pa.array(syy),
        "p2_0": counts, "p2_1": pa.array(my), "p2_2": pa.array(mx), "p2_3": pa.array(syy),
        "p2_4": pa.array(sxx), "p2_5": pa.array(sxy)})


def _text_partials(rng: np.random.Generator, epoch: int, events: int, keys: int) -> pa.Table:
    """An epoch's pane partials: ``count(*)`` and the least and greatest of 10,000 names
    per key and one-second pane, over ``events`` rows with uniform keys and names."""
    names = pa.array([f"customer-{n:05d}" for n in rng.integers(0, 10_000, events)])
    table = pa.table({"k": rng.integers(0, keys, events),
                      "__pane": (epoch * EPOCH_S + rng.integers(0, EPOCH_S, events)) * SECOND,
                      "name": names})
    grouped = table.group_by(["k", "__pane"], use_threads=False).aggregate(
        [("name", "count"), ("name", "min"), ("name", "max")])
    counts = grouped.column("name_count")
    return pa.table({
        "k": grouped.column("k"), "__pane": grouped.column("__pane"),
        "__kg": pa.array(grouped.column("k").to_numpy() % GROUPS, pa.int32()),
        "__rows": counts, "p0_0": counts, "p1_0": grouped.column("name_min"),
        "p2_0": grouped.column("name_max")})


def _epoch(number: int, ranges: list[range]) -> TaskEpoch:
    """Epoch ``number``: the watermark 1 s behind the end of its event time."""
    before = NO_WATERMARK if number == 0 else number * EPOCH_S * SECOND - SECOND
    return TaskEpoch(b"", "bench", "operator", "run", number, number - 1 if number else None,
                     tuple((r.start, r.stop) for r in ranges), before,
                     (number + 1) * EPOCH_S * SECOND - SECOND)


@pytest.mark.parametrize(("case", "keys", "events", "width_s"),
                         [(case, *sizes) for case in CASES
                          for sizes in ((1_000, 100_000, 1), (1_000, 100_000, 10),
                                        (1_000, 100_000, 60), (10_000, 100_000, 10))])
def test_the_operator_alone_columns_against_per_key(case: str, keys: int, events: int,
                                                    width_s: int) -> None:
    spec = WindowAggregate(
        operator_id="q0", input_sql="", key_columns=("k",),
        window=WindowSpec("hop", width_s * SECOND, SECOND), aggregates=CASES[case],
        output_view="out")
    rng = np.random.default_rng(7)
    partials = {"moments": _moment_partials, "distinct": _distinct_partials,
                "first_last": _first_last_partials, "bits": _bits_partials,
                "percentiles": _percentile_partials,
                "udaf_rows": lambda *a: _percentile_partials(*a, field="a0").drop(["p2_0"]),
                "text_extremes": _text_partials}[case]
    epochs = [partials(rng, number, events, keys) for number in range(EPOCHS)]
    schema = output_schema(spec, epochs[0].schema)
    columns = operator_seconds(WindowColumnsRange(spec, schema), epochs, GROUPS, _epoch)
    per_key = operator_seconds(_WindowRange(spec, GROUPS, schema), epochs, GROUPS, _epoch)
    print(f"{case}, width {width_s} s, {keys:,} keys, {events:,} events an epoch: columns "
          f"{columns:.3f} s, per key {per_key:.3f} s an epoch ({per_key / columns:.1f}x)",
          flush=True)
    RESULTS[f"{case}_{keys}_keys_width_{width_s}"] = {
        "events_per_epoch": events, "columns_s": columns, "per_key_s": per_key}
    save_result("window_aggregates", RESULTS)
