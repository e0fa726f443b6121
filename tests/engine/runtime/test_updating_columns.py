"""The columnar updating aggregate against the per-key one, over real (embedded) state
stores and without Spark: the same signed partials go into both epoch by epoch
(several ranges, withdrawals, NULL values and keys, flush intervals, updating_ttl
expiry, input ending); every epoch both must emit the same changes, a key's
withdrawal before its new row, and nothing may be left of a key once it is gone."""

from __future__ import annotations

import json
import math
import operator
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from decimal import Decimal, localcontext
from functools import reduce
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spate.engine.operators.aggregates.multiset import hashable
from spate.engine.operators.aggregates.timed import time_key
from spate.engine.planner.plan import AggregateCall, UpdatingAggregate
from spate.engine.runtime.tasks import TaskEpoch, TaskStats
from spate.engine.runtime.updating import UpdatingAggregateOperator, _UpdatingRange
from spate.engine.runtime.updating_columns import (
    ENTRIES_PER_GROUP,
    UpdatingColumnsRange,
    columnar,
)
from spate.engine.runtime.watermarks import END_OF_TIME, NO_WATERMARK
from spate.statestore import open_store, split_key_groups

GROUPS = 8
SECOND = 1_000_000
#: key (None: NULL), withdrawn, event time (s), value (None: NULL)
Row = tuple[Any, bool, int, Any]
AGGREGATES = (AggregateCall("count_star", None, "n"), AggregateCall("count", "a0", "c"),
              AggregateCall("sum", "a0", "s"), AggregateCall("avg", "a0", "mean"),
              AggregateCall("sum", "a1", "fs"))
#: min and max over append-only input (one value a key)
EXTREMES = (AggregateCall("min", "a0", "lo"), AggregateCall("max", "a1", "hi"),
            AggregateCall("max", "a2", "latest"), AggregateCall("min", "a3", "all_positive"))
#: min and max over updating input (a multiset a key), of all but floats
UPDATING_EXTREMES = (AggregateCall("min", "a0", "lo"), AggregateCall("max", "a2", "latest"),
                     AggregateCall("max", "a3", "any_positive"))
#: variances: moments of the rows added and of those withdrawn (the last aggregates)
VARIANCES = (AggregateCall("var_samp", "a0", "spread"), AggregateCall("stddev_pop", "a0", "sd"))
#: (y, x) aggregates of (value, event time): co-moments, after the variances
COMOMENTS = (AggregateCall("covar_samp", "a4", "cov"), AggregateCall("regr_slope", "a4", "slope"))
#: a distinct count: a multiset of values, after the co-moments
DISTINCT = (AggregateCall("count_distinct", "a0", "distinct"),)
#: percentiles: a multiset of values, after the distinct count
PERCENTILES = (AggregateCall("median", "a0", "med"),
               AggregateCall("percentile_cont", "a0", "p30", 0.3))
#: bitwise aggregates, after the percentiles: bit_and and bit_or a multiset of values,
#: bit_xor the xor and net count of values
BITWISE = (AggregateCall("bit_and", "a0", "all"), AggregateCall("bit_or", "a0", "any"),
           AggregateCall("bit_xor", "a0", "odd"))
#: A signed-values partial: each value (NULLs too) with its row's sign.
SIGNED = pa.list_(pa.struct([pa.field("v", pa.int64()), pa.field("s", pa.int32())]))


def _comoments(pairs: list[tuple[float, float]]) -> list[Any]:
    """``[count, mean y, mean x, y squares, x squares, products]`` as Spark's SQL gives them."""
    if not pairs:
        return [0, None, None, None, None, None]
    my = sum(y for y, _ in pairs) / len(pairs)
    mx = sum(x for _, x in pairs) / len(pairs)
    return [len(pairs), my, mx, sum((y - my) ** 2 for y, _ in pairs),
            sum((x - mx) ** 2 for _, x in pairs), sum((y - my) * (x - mx) for y, x in pairs)]


def _spec(ttl_s: int, updating_input: bool) -> UpdatingAggregate:
    aggregates = (AGGREGATES + (UPDATING_EXTREMES if updating_input else EXTREMES) + VARIANCES
                  + COMOMENTS + DISTINCT + PERCENTILES + BITWISE)
    return UpdatingAggregate(operator_id="q0_updating", input_sql="", key_columns=("k0",),
                             aggregates=aggregates, updating_input=updating_input,
                             output_view="v", ttl_us=ttl_s * SECOND)


def _by_key(rows: list[Row]) -> dict[Any, list[Row]]:
    keys: dict[Any, list[Row]] = defaultdict(list)
    for row in rows:
        keys[row[0]].append(row)
    return keys


def _key_columns(columns: dict[str, list[Any]], key: Any, mine: list[Row]
                 ) -> tuple[list[int], str]:
    """Append a key's row of the columns every partial has (its key, rows, latest time,
    count(*)); return its rows' signs and its serialized key."""
    signs = [-1 if withdrawn else 1 for _, withdrawn, _, _ in mine]
    row_key = json.dumps({"k0": key}, separators=(",", ":"))
    columns["__key"].append(row_key)
    columns["k0"].append(key)
    columns["__count"].append(len(mine))
    columns["__rows"].append(sum(signs))
    columns["__seen"].append(max(ts for _, _, ts, _ in mine) * SECOND)
    columns["p0_0"].append(sum(signs))
    return signs, row_key


def _partials(rows: list[Row], updating_input: bool = False) -> pa.Table:
    """What native Spark's signed pre-aggregation (``partial_sql``) gives for ``rows``
    (over ``updating_input``, min and max as signed values)."""
    columns: dict[str, list[Any]] = defaultdict(list)
    for key, mine in _by_key(rows).items():
        signs, row_key = _key_columns(columns, key, mine)
        present = [(s, v) for s, (_, _, _, v) in zip(signs, mine, strict=True) if v is not None]
        columns["p1_0"].append(sum(s for s, _ in present))
        for i, scale in ((2, 1), (3, 1), (4, 0.5)):
            columns[f"p{i}_0"].append(sum(s * v * scale for s, v in present) if present
                                      else None)
            columns[f"p{i}_1"].append(sum(s for s, _ in present))
        values = [v for _, v in present]
        first_variance = 8 if updating_input else 9
        for i in range(first_variance, first_variance + len(VARIANCES)):
            for j, sign in ((0, 1), (3, -1)):  # the rows added, then those withdrawn
                mine_values = [float(v) for s, v in present if s == sign]
                mean = sum(mine_values) / len(mine_values) if mine_values else None
                columns[f"p{i}_{j}"].append(len(mine_values))
                columns[f"p{i}_{j + 1}"].append(mean)
                columns[f"p{i}_{j + 2}"].append(
                    None if mean is None else sum((v - mean) ** 2 for v in mine_values))
        for i in range(first_variance + len(VARIANCES),
                       first_variance + len(VARIANCES) + len(COMOMENTS)):
            for j, sign in ((0, 1), (6, -1)):  # the pairs added, then those withdrawn
                pairs = [(float(v), float(ts)) for s, (_, _, ts, v) in zip(signs, mine, strict=True)
                         if v is not None and s == sign]
                for k, value in enumerate(_comoments(pairs)):
                    columns[f"p{i}_{j + k}"].append(value)
        distinct = f"p{first_variance + len(VARIANCES) + len(COMOMENTS)}_0"
        columns[distinct].append([{"v": v, "s": s} for s, v in present] if updating_input
                                 else sorted({v for _, v in present}))
        for i in range(len(PERCENTILES)):  # every value, NULLs too, with its sign
            columns[_percentile_partial(first_variance, i)].append(
                [{"v": v, "s": s} for s, (_, _, _, v) in zip(signs, mine, strict=True)])
        bits = _bits_partial(first_variance)
        for name in bits[:2]:  # the non-NULL values with their signs (collect_list's)
            # Added values only: withdrawing a value never added (which these random rows
            # do) nets per bit on the per-key path, but leaves a multiset alone.  Both
            # agree on withdrawals of values held (test_bitwise_aggregates_withdraw_…).
            columns[name].append([{"v": v, "s": s} for s, v in present if s > 0])
        columns[bits[2]].append(reduce(operator.xor, (v for _, v in present), 0))
        columns[bits[3]].append(sum(s for s, _ in present))
        if updating_input:
            timed = [(s, ts) for s, (_, _, ts, v) in zip(signs, mine, strict=True)
                     if v is not None]
            columns["p5_0"].append([{"v": v, "s": s} for s, v in present])
            columns["p6_0"].append([{"v": ts * SECOND, "s": s} for s, ts in timed])
            columns["p7_0"].append([{"v": v > 0, "s": s} for s, v in present])
            columns["__kg"].append(sum(row_key.encode()) % GROUPS)
            continue
        columns["p5_0"].append(min(values) if values else None)
        columns["p6_0"].append(max(values) * 0.5 if values else None)
        times = [ts for _, _, ts, v in mine if v is not None]
        columns["p7_0"].append(max(times) * SECOND if times else None)
        columns["p8_0"].append(min(v > 0 for v in values) if values else None)
        columns["__kg"].append(sum(row_key.encode()) % GROUPS)
    types = {"__key": pa.string(), "k0": pa.string(), "__seen": pa.timestamp("us", tz="UTC"),
             "p4_0": pa.float64(), "p6_0": pa.float64(),
             "p7_0": pa.timestamp("us", tz="UTC"), "p8_0": pa.bool_(), "__kg": pa.int32()}
    names = ["__key", "k0", "__count", "__rows", "__seen", "p0_0", "p1_0", "p2_0", "p2_1",
             "p3_0", "p3_1", "p4_0", "p4_1", "p5_0", "p6_0", "p7_0", "p8_0",
             "__kg"]
    if updating_input:
        def signed(kind: pa.DataType) -> pa.DataType:
            return pa.list_(pa.struct([pa.field("v", kind), pa.field("s", pa.int32())]))
        types.update(p5_0=signed(pa.int64()), p6_0=signed(pa.timestamp("us", tz="UTC")),
                     p7_0=signed(pa.bool_()))
        names.remove("p8_0")
        del types["p8_0"]  # the first variance's count there
    first_variance = 8 if updating_input else 9
    for i in range(first_variance, first_variance + len(VARIANCES)):
        names[-1:-1] = [f"p{i}_{j}" for j in range(6)]
        types.update({f"p{i}_{j}": pa.float64() for j in (1, 2, 4, 5)})
    for i in range(first_variance + len(VARIANCES),
                   first_variance + len(VARIANCES) + len(COMOMENTS)):
        names[-1:-1] = [f"p{i}_{j}" for j in range(12)]
        types.update({f"p{i}_{j}": pa.float64() for j in range(12) if j % 6})
    distinct = f"p{first_variance + len(VARIANCES) + len(COMOMENTS)}_0"
    names[-1:-1] = [distinct]
    types[distinct] = SIGNED if updating_input else pa.list_(pa.int64())
    for i in range(len(PERCENTILES)):
        names[-1:-1] = [_percentile_partial(first_variance, i)]
        types[_percentile_partial(first_variance, i)] = SIGNED
    bits = _bits_partial(first_variance)
    names[-1:-1] = bits
    types.update({bits[0]: SIGNED, bits[1]: SIGNED})
    return pa.table({n: pa.array(columns[n], types.get(n, pa.int64())) for n in names})


def _percentile_partial(first_variance: int, i: int) -> str:
    """The partial column of :data:`PERCENTILES`' ``i``-th aggregate."""
    return f"p{first_variance + len(VARIANCES) + len(COMOMENTS) + 1 + i}_0"


def _bits_partial(first_variance: int) -> list[str]:
    """The partial columns of :data:`BITWISE`: bit_and's and bit_or's signed values, then
    bit_xor's xor and net count."""
    first = first_variance + len(VARIANCES) + len(COMOMENTS) + 1 + len(PERCENTILES)
    return [f"p{first}_0", f"p{first + 1}_0", f"p{first + 2}_0", f"p{first + 2}_1"]


def _run(work: Any, path: Path, epochs: list[tuple[list[Row], int, int | None]],
         interval_ms: int, parallelism: int, updating_input: bool = False,
         partials_of: Callable[[list[Row], bool], pa.Table] = _partials,
         ) -> tuple[list[list[tuple[Any, ...]]], int]:
    """Each epoch's partials through ``work``; returns each epoch's changes and the
    number of keys the store holds at the end."""
    changes: list[list[tuple[Any, ...]]] = []
    with open_store(f"sqlite:///{path}") as store:
        state = store.pipeline("t", "p")
        ranges = split_key_groups(GROUPS, parallelism)
        before = NO_WATERMARK
        for epoch, (rows, after, clock) in enumerate(epochs):
            state.begin_epoch(epoch, ranges)
            task_epoch = TaskEpoch(b"", "t", "p", "run", epoch, epoch - 1 if epoch else None,
                                   tuple((r.start, r.stop) for r in ranges), before, after,
                                   clock_ms=clock, flush_interval_ms=interval_ms)
            emitted = []
            partials = partials_of(rows, updating_input)
            for key_groups in ranges:  # each range as its own task would
                mine = [g in key_groups for g in partials.column("__kg").to_pylist()]
                writer = state.writer(epoch, key_groups)
                table = work(partials.filter(pa.array(mine, pa.bool_())), state, writer,
                             task_epoch, TaskStats())
                writer.commit()
                emitted += [tuple(r.values()) for r in table.to_pylist()]
            _check_order(emitted)
            changes.append(emitted)
            state.commit_epoch(epoch, {})
            before = after
        if isinstance(work, UpdatingColumnsRange):
            groups = list(range(GROUPS))
            left = work.read_keys(groups, state.read_range(work.states_name, range(GROUPS)))
            held = left.num_rows
        else:
            held = sum(1 for _ in state.scan(work.operator.records_name, range(GROUPS)))
    return changes, held


def _check_order(rows: list[tuple[Any, ...]]) -> None:
    """A key's withdrawal comes before its new row."""
    inserted = set()
    for row in rows:
        retract, row_key = row[-3], row[-2]
        if retract:
            assert row_key not in inserted, f"{row_key} inserted before it was withdrawn"
        else:
            inserted.add(row_key)


def _epochs(rows: list[Row], count: int, step_s: int) -> list[tuple[list[Row], int, int]]:
    """``rows`` cut into ``count`` epochs, the watermark at each epoch's latest event time,
    the clock ``step_s`` seconds later each epoch; one more epoch ends the input."""
    size = -(-len(rows) // count) if rows else 1
    epochs = []
    watermark = NO_WATERMARK
    for n, start in enumerate(range(0, max(len(rows), 1), size)):
        part = rows[start:start + size]
        watermark = max([watermark, *(ts * SECOND for _, _, ts, _ in part)])
        epochs.append((part, watermark, n * step_s * 1000))
    epochs.append(([], END_OF_TIME, len(epochs) * step_s * 1000))
    return epochs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d", None]), st.booleans(),
                               st.integers(0, 300), st.one_of(st.none(), st.integers(-9, 9))),
                     min_size=1, max_size=60),
       count=st.integers(1, ENTRIES_PER_GROUP + 4), parallelism=st.integers(1, 3),
       interval_s=st.sampled_from([0, 1, 5]), ttl_s=st.sampled_from([20, 100, 10_000]),
       ordered=st.booleans(), append_only=st.booleans())
def test_columns_emit_what_the_per_key_operator_emits(rows, count, parallelism, interval_s,
                                                      ttl_s, ordered, append_only,
                                                      tmp_path_factory
                                                      ) -> None:  # type: ignore[no-untyped-def]
    if append_only:  # no withdrawals: min and max of floats run in columns too
        rows = [(key, False, ts, value) for key, _, ts, value in rows]
    if ordered:  # event time in order, so keys idle for updating_ttl expire mid-run
        rows = sorted(rows, key=lambda r: r[2])
    updating_input = any(withdrawn for _, withdrawn, _, _ in rows)
    spec = _spec(ttl_s, updating_input)
    operator = UpdatingAggregateOperator(spec, GROUPS)
    partial_schema = _partials([], updating_input).schema
    assert columnar(spec, partial_schema)
    schema = operator.output_schema(partial_schema)
    epochs = _epochs(rows, count, step_s=2)
    folder = tmp_path_factory.mktemp("stores")
    per_key, keys_held = _run(_UpdatingRange(operator, partial_schema), folder / "keys.db",
                              epochs, interval_s * 1000, parallelism, updating_input)
    work = UpdatingColumnsRange(spec, partial_schema, schema)
    in_columns, columns_held = _run(work, folder / "columns.db", epochs, interval_s * 1000,
                                    parallelism, updating_input)
    for epoch, (expected, got) in enumerate(zip(per_key, in_columns, strict=True)):
        assert Counter(got) == Counter(expected), f"epoch {epoch}"
    assert columns_held == keys_held


#: min, max and a distinct count of a DOUBLE over updating input: multisets of floats.
FLOAT_AGGREGATES = (AggregateCall("count_star", None, "n"), AggregateCall("min", "a0", "lo"),
                    AggregateCall("max", "a0", "hi"),
                    AggregateCall("count_distinct", "a0", "distinct"))
_SIGNED_FLOATS = pa.list_(pa.struct([pa.field("v", pa.float64()), pa.field("s", pa.int32())]))


def _float_partials(rows: list[Row], updating_input: bool = True,
                    signed_type: pa.DataType = _SIGNED_FLOATS) -> pa.Table:
    """Spark's signed partials of :data:`FLOAT_AGGREGATES` for ``rows`` (values floats, or
    as ``signed_type`` holds them)."""
    columns: dict[str, list[Any]] = defaultdict(list)
    for key, mine in _by_key(rows).items():
        signs, row_key = _key_columns(columns, key, mine)
        signed = [{"v": v, "s": s} for s, (_, _, _, v) in zip(signs, mine, strict=True)
                  if v is not None]
        for i in (1, 2, 3):
            columns[f"p{i}_0"].append(signed)
        columns["__kg"].append(sum(row_key.encode()) % GROUPS)
    types = {"__key": pa.string(), "k0": pa.string(), "__seen": pa.timestamp("us", tz="UTC"),
             "p1_0": signed_type, "p2_0": signed_type, "p3_0": signed_type,
             "__kg": pa.int32()}
    names = ["__key", "k0", "__count", "__rows", "__seen", "p0_0", "p1_0", "p2_0", "p3_0",
             "__kg"]
    return pa.table({n: pa.array(columns[n], types.get(n, pa.int64())) for n in names})


def _per_key_and_in_columns(aggregates: tuple[AggregateCall, ...],
                            partials: Callable[[list[Row], bool], pa.Table], rows: list[Row],
                            count: int, parallelism: int, folder: Path,
                            updating_input: bool = True, interval_ms: int = 0
                            ) -> list[list[tuple[Any, ...]]]:
    """``rows`` in ``count`` epochs through the per-key and the columnar operator (which
    must take ``aggregates``): every epoch both emit the same changes, and both hold
    the same keys at the end.  Returns the columnar operator's changes."""
    spec = UpdatingAggregate(operator_id="q0_updating", input_sql="", key_columns=("k0",),
                             aggregates=aggregates, updating_input=updating_input,
                             output_view="v", ttl_us=10_000 * SECOND)
    partial_schema = partials([], updating_input).schema
    assert columnar(spec, partial_schema)
    operator_ = UpdatingAggregateOperator(spec, GROUPS)
    schema = operator_.output_schema(partial_schema)
    epochs = _epochs(rows, count, step_s=2)
    per_key, keys_held = _run(_UpdatingRange(operator_, partial_schema), folder / "keys.db",
                              epochs, interval_ms, parallelism, updating_input, partials)
    in_columns, columns_held = _run(UpdatingColumnsRange(spec, partial_schema, schema),
                                    folder / "columns.db", epochs, interval_ms, parallelism,
                                    updating_input, partials)
    for epoch, (expected, got) in enumerate(zip(per_key, in_columns, strict=True)):
        assert Counter(map(_comparable, got)) == Counter(map(_comparable, expected)), \
            f"epoch {epoch}"
    assert columns_held == keys_held
    return in_columns


def _updating(rows: list[Row], sample: Any,
              same: Callable[[Row], Any] = lambda row: (row[0], hashable(row[3]))
              ) -> list[Row]:
    """``rows`` as an updating stream gives them: a withdrawn row only while a row the same
    (as ``same`` tells) is held; then a key ``z`` adds and withdraws ``sample``, so that
    the input is updating."""
    held: Counter[Any] = Counter()
    kept = []
    for row in rows:
        if row[1] and not held[same(row)]:
            continue
        held[same(row)] += -1 if row[1] else 1
        kept.append(row)
    return [*kept, ("z", False, 1, sample), ("z", True, 1, sample)]


def _same_floats(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row with NaN as one comparable value (NaN equals nothing in Python)."""
    return tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.booleans(),
                               st.integers(0, 100),
                               st.sampled_from([None, math.nan, -math.nan, -0.0, 0.0, -math.inf,
                                                math.inf, 1.5, -2.5, 1e-300])),
                     min_size=1, max_size=40),
       count=st.integers(1, 6), parallelism=st.integers(1, 3))
def test_floats_in_multisets_order_and_count_as_spark_does(rows, count, parallelism,
                                                            tmp_path_factory
                                                            ) -> None:  # type: ignore[no-untyped-def]
    """NaN is the greatest value and one value however many NaNs there are; -0.0 is 0.0:
    min, max and count(DISTINCT) of a DOUBLE over updating input, in columns and per key."""
    rows = _updating(rows, 1.5)
    in_columns = _per_key_and_in_columns(FLOAT_AGGREGATES, _float_partials, rows, count,
                                         parallelism, tmp_path_factory.mktemp("floats"))
    # What Spark answers, over the rows every epoch added minus those it withdrew.
    net: dict[Any, Counter[Any]] = defaultdict(Counter)
    for key, withdrawn, _, value in rows:
        if value is not None:
            net[key]["NaN" if math.isnan(value) else value + 0.0] += -1 if withdrawn else 1
    final = {row[-2]: row for changes in in_columns for row in changes if not row[-3]}
    for key, counted in net.items():
        values = [v for v, c in counted.items() if c > 0]
        row_key = json.dumps({"k0": key}, separators=(",", ":"))
        if not values or row_key not in final:
            continue
        numbers = [v for v in values if v != "NaN"]
        _, lo, hi, distinct = _same_floats(final[row_key][1:5])  # after the key: n, ...
        assert distinct == len(values)
        assert hi == ("NaN" if "NaN" in values else max(numbers))
        assert lo == (min(numbers) if numbers else "NaN")


def test_bitwise_aggregates_withdraw_values_in_columns_as_per_key(tmp_path: Path) -> None:
    """Over updating input: 1, 2 and 4 added, then 4 withdrawn, then 2."""
    rows: list[list[Row]] = [[("a", False, 1, 1), ("a", False, 1, 2), ("a", False, 1, 4)],
                             [("a", True, 2, 4)], [("a", True, 3, 2)]]
    epochs = [(part, n * SECOND, n * 1000) for n, part in enumerate(rows)]

    def bitwise_partials(part: list[Row], updating_input: bool) -> pa.Table:
        signed = [{"v": v, "s": -1 if withdrawn else 1} for _, withdrawn, _, v in part]
        xor = reduce(operator.xor, (v for _, _, _, v in part), 0)
        net = sum(item["s"] for item in signed)
        return pa.table({
            "__key": ['{"k0":"a"}'], "k0": ["a"], "__count": [len(part)], "__rows": [net],
            "__seen": pa.array([max(ts for _, _, ts, _ in part) * SECOND],
                               pa.timestamp("us", tz="UTC")),
            "p0_0": pa.array([signed], SIGNED), "p1_0": pa.array([signed], SIGNED),
            "p2_0": [xor], "p2_1": [net], "__kg": pa.array([0], pa.int32())})

    spec = UpdatingAggregate(operator_id="q0", input_sql="", key_columns=("k0",),
                             aggregates=BITWISE, updating_input=True, output_view="v",
                             ttl_us=10_000 * SECOND)
    schema = bitwise_partials(rows[0], True).schema
    assert columnar(spec, schema)
    operator_ = UpdatingAggregateOperator(spec, GROUPS)
    inserted = []
    for work, name in ((UpdatingColumnsRange(spec, schema, operator_.output_schema(schema)),
                        "columns"), (_UpdatingRange(operator_, schema), "per_key")):
        changes, _ = _run(work, tmp_path / f"{name}.db", epochs, 0, 1, True,
                          partials_of=bitwise_partials)
        inserted.append([[row[1:4] for row in epoch if not row[-3]] for epoch in changes])
    # bit_and, bit_or, bit_xor of {1, 2, 4}, then {1, 2}, then {1}
    assert inserted[0] == inserted[1] == [[(0, 7, 7)], [(0, 3, 3)], [(1, 1, 1)]]


def test_the_columnar_path_takes_aggregates_of_numbers_it_computes_in_columns() -> None:
    spec = _spec(100, False)
    schema = _partials([]).schema
    assert columnar(spec, schema)
    decimals = schema.set(schema.get_field_index("p2_0"), pa.field("p2_0", pa.decimal128(20, 2)))
    assert columnar(spec, decimals)  # exact sums, in words
    decimal_min = schema.set(schema.get_field_index("p5_0"),
                             pa.field("p5_0", pa.decimal128(20, 2)))
    assert columnar(spec, decimal_min)  # compared in words
    text_min = schema.set(schema.get_field_index("p5_0"), pa.field("p5_0", pa.string()))
    assert columnar(spec, text_min)  # an Arrow column of each key's least text
    listed_min = schema.set(schema.get_field_index("p5_0"),
                            pa.field("p5_0", pa.list_(pa.int64())))
    assert not columnar(spec, listed_min)
    assert not columnar(UpdatingAggregate(
        operator_id="q0", input_sql="", key_columns=("k0",),
        aggregates=(AggregateCall("max", "a0", "m"),), updating_input=True,
        output_view="v"), schema)
    nested = schema.set(schema.get_field_index("k0"), pa.field("k0", pa.list_(pa.int64())))
    assert not columnar(spec, nested)
    # over updating input min and max keep multisets in columns, of floats too
    updating, signed = _spec(100, True), _partials([], True).schema
    assert columnar(updating, signed)
    assert columnar(updating, signed.set(signed.get_field_index("p5_0"),
                                         pa.field("p5_0", _SIGNED_FLOATS)))
    # a distinct count keeps a multiset of numbers (floats too), text, bytes or decimals,
    # not of lists
    distinct = f"p{8 + len(VARIANCES) + len(COMOMENTS)}_0"
    for kind, runs in ((pa.string(), True), (pa.decimal128(10, 2), True),
                       (pa.binary(), True), (pa.list_(pa.int64()), False)):
        values = pa.list_(pa.struct([pa.field("v", kind), pa.field("s", pa.int32())]))
        assert columnar(updating, signed.set(signed.get_field_index(distinct),
                                             pa.field(distinct, values))) == runs


def test_a_group_written_in_many_epochs_reads_back_whole(tmp_path: Path) -> None:
    """More epochs than a group keeps entries: the state folds, and a key updated in
    every epoch ends at its total."""
    spec = _spec(10_000, False)
    operator = UpdatingAggregateOperator(spec, GROUPS)
    partial_schema = _partials([]).schema
    work = UpdatingColumnsRange(spec, partial_schema, operator.output_schema(partial_schema))
    keys = [f"k{i}" for i in range(500)]
    epochs = [([(keys[(e * 7 + i) % len(keys)], False, e, i % 5) for i in range(10)]
               + [("hot", False, e, 1)], e * SECOND, e * 1000)
              for e in range(3 * ENTRIES_PER_GROUP)]
    epochs.append(([], END_OF_TIME, len(epochs) * 1000))
    changes, held = _run(work, tmp_path / "s.db", epochs, 0, 2)
    hot = [c for c in changes[-2] if c[0] == "hot"]
    assert hot[-1][:4] == ("hot", 3 * ENTRIES_PER_GROUP, 3 * ENTRIES_PER_GROUP,
                           3 * ENTRIES_PER_GROUP)
    with open_store(f"sqlite:///{tmp_path / 's.db'}") as store:
        entries = Counter(group for group, _, _ in store.pipeline("t", "p").scan(
            work.states_name, range(GROUPS)))
    touched = {row[0] for rows, _, _ in epochs for row in rows}
    assert held == len(touched) and max(entries.values()) <= ENTRIES_PER_GROUP


#: Values a multiset holds as they are: text (ordered by its UTF-8 bytes, as Spark orders
#: it), bytes and decimals.
_AS_THEY_ARE = {
    "text": (pa.string(), ["", "a", "B", "ab", "é", "z"]),
    "bytes": (pa.binary(), [b"", b"\x00", b"\xff", b"a", b"ab"]),
    "decimals": (pa.decimal128(10, 2), [Decimal("1.10"), Decimal("-2.00"), Decimal("0.00"),
                                        Decimal("99999999.99"), Decimal("-0.01")]),
}


@pytest.mark.parametrize("kind", list(_AS_THEY_ARE))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(data=st.data(), count=st.integers(1, 6), parallelism=st.integers(1, 3))
def test_text_bytes_and_decimals_in_multisets_as_per_key(kind, data, count, parallelism,
                                                         tmp_path_factory
                                                         ) -> None:  # type: ignore[no-untyped-def]
    """min, max and count(DISTINCT) of text, bytes or decimals over updating input, in
    columns (each value as it is) and per key."""
    value_type, samples = _AS_THEY_ARE[kind]
    rows = data.draw(st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.booleans(),
                                        st.integers(0, 100),
                                        st.one_of(st.none(), st.sampled_from(samples))),
                              min_size=1, max_size=40))
    rows = _updating(rows, samples[0])
    signed = pa.list_(pa.struct([pa.field("v", value_type), pa.field("s", pa.int32())]))

    def partials(part: list[Row], updating_input: bool) -> pa.Table:
        return _float_partials(part, updating_input, signed)

    _per_key_and_in_columns(FLOAT_AGGREGATES, partials, rows, count, parallelism,
                            tmp_path_factory.mktemp(kind))


#: count(*), min and max over appended rows
APPENDED_EXTREMES = (AggregateCall("count_star", None, "n"), AggregateCall("min", "a0", "lo"),
                     AggregateCall("max", "a0", "hi"))


def _extreme_partials(value_type: pa.DataType) -> Callable[[list[Row], bool], pa.Table]:
    """Spark's partials of :data:`APPENDED_EXTREMES` over rows of ``value_type`` values."""
    def partials(rows: list[Row], updating_input: bool) -> pa.Table:
        columns: dict[str, list[Any]] = defaultdict(list)
        for key, mine in _by_key(rows).items():
            _, row_key = _key_columns(columns, key, mine)
            values = [v for _, _, _, v in mine if v is not None]
            columns["p1_0"].append(min(values, default=None))
            columns["p2_0"].append(max(values, default=None))
            columns["__kg"].append(sum(row_key.encode()) % GROUPS)
        types = {"__key": pa.string(), "k0": pa.string(), "__seen": pa.timestamp("us", tz="UTC"),
                 "p1_0": value_type, "p2_0": value_type, "__kg": pa.int32()}
        names = ["__key", "k0", "__count", "__rows", "__seen", "p0_0", "p1_0", "p2_0", "__kg"]
        return pa.table({n: pa.array(columns[n], types.get(n, pa.int64())) for n in names})

    return partials


@pytest.mark.parametrize("kind", ["text", "bytes"])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(data=st.data(), count=st.integers(1, 6), parallelism=st.integers(1, 3),
       interval_s=st.sampled_from([0, 5]))
def test_text_and_bytes_extremes_of_appended_rows_as_per_key(kind, data, count, parallelism,
                                                            interval_s, tmp_path_factory
                                                            ) -> None:  # type: ignore[no-untyped-def]
    """min and max of text or bytes over appended rows: a key's least and greatest so
    far, in an Arrow column of the key states (by their bytes, as Spark orders them)."""
    value_type, samples = _AS_THEY_ARE[kind]
    rows = data.draw(st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.just(False),
                                        st.integers(0, 100),
                                        st.one_of(st.none(), st.sampled_from(samples))),
                              min_size=1, max_size=40))
    _per_key_and_in_columns(APPENDED_EXTREMES, _extreme_partials(value_type), rows, count,
                            parallelism, tmp_path_factory.mktemp(kind), False,
                            interval_s * 1000)


#: first_value and last_value: each key's earliest and latest (event time, value) pair.
TIMED = (AggregateCall("count_star", None, "n"), AggregateCall("first_value", "a0", "fv"),
         AggregateCall("last_value", "a0", "lv"))
#: Values whose ties in time the pairs' order settles as Spark orders them.
_TIMED_VALUES = {
    "integers": (pa.int64(), [-3, 0, 2, 7]),
    "floats": (pa.float64(), [math.nan, -0.0, 0.0, -math.inf, 1.5]),
    "text": (pa.string(), ["", "a", "B", "é"]),
    "booleans": (pa.bool_(), [True, False]),
    "decimals": (pa.decimal128(10, 2), [Decimal("1.10"), Decimal("-2.00"), Decimal("0.00"),
                                        Decimal("12345678.91")]),
    "bytes": (pa.binary(), [b"", b"\x00", b"\xff", b"a"]),
}


def _timed_partials(value_type: pa.DataType) -> Callable[[list[Row], bool], pa.Table]:
    """Spark's signed partials of :data:`TIMED` for rows of ``value_type`` values: over
    append-only input the least and the greatest ``struct<t, v>`` (by time, then value,
    NULLs first), over updating input every row's pair with its sign."""
    pair = pa.struct([pa.field("t", pa.int64()), pa.field("v", value_type)])
    signed = pa.list_(pa.struct([pa.field("v", pair), pa.field("s", pa.int32())]))

    def partials(rows: list[Row], updating_input: bool) -> pa.Table:
        columns: dict[str, list[Any]] = defaultdict(list)
        for key, mine in _by_key(rows).items():
            signs, row_key = _key_columns(columns, key, mine)
            pairs = [[ts * SECOND, v] for _, _, ts, v in mine]
            if updating_input:
                entries = [{"v": {"t": t, "v": v}, "s": s}
                           for s, (t, v) in zip(signs, pairs, strict=True)]
                columns["p1_0"].append(entries)
                columns["p2_0"].append(entries)
            else:
                for name, pick in (("p1_0", min), ("p2_0", max)):
                    t, v = pick(pairs, key=time_key)
                    columns[name].append({"t": t, "v": v})
            columns["__kg"].append(sum(row_key.encode()) % GROUPS)
        kind = signed if updating_input else pair
        types = {"__key": pa.string(), "k0": pa.string(), "__seen": pa.timestamp("us", tz="UTC"),
                 "p1_0": kind, "p2_0": kind, "__kg": pa.int32()}
        names = ["__key", "k0", "__count", "__rows", "__seen", "p0_0", "p1_0", "p2_0", "__kg"]
        return pa.table({n: pa.array(columns[n], types.get(n, pa.int64())) for n in names})

    return partials


@pytest.mark.parametrize("kind", list(_TIMED_VALUES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(data=st.data(), count=st.integers(1, 6), parallelism=st.integers(1, 3),
       updating_input=st.booleans())
def test_first_and_last_values_in_columns_as_per_key(kind, data, count, parallelism,
                                                    updating_input, tmp_path_factory
                                                    ) -> None:  # type: ignore[no-untyped-def]
    """first_value and last_value, over append-only input (one pair per key) and over
    updating input (every pair, so that withdrawing the answer finds the next): ties in
    time go by value, NULL first, NaN after every number, -0.0 as 0.0."""
    value_type, samples = _TIMED_VALUES[kind]
    rows = data.draw(st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.booleans(),
                                        st.integers(0, 6),
                                        st.one_of(st.none(), st.sampled_from(samples))),
                              min_size=1, max_size=40))
    if updating_input:  # a pair is its time and value
        rows = _updating(rows, samples[0], lambda row: (row[0], row[2], hashable(row[3])))
    else:
        rows = [(key, False, ts, value) for key, _, ts, value in rows]
    partials = _timed_partials(value_type)
    in_columns = _per_key_and_in_columns(TIMED, partials, rows, count, parallelism,
                                         tmp_path_factory.mktemp(kind), updating_input)
    if not updating_input:  # what Spark answers: the earliest and the latest row's value
        final = {row[-2]: row for changes in in_columns for row in changes if not row[-3]}
        for key, mine in _by_key(rows).items():
            pairs = [[ts, v] for _, _, ts, v in mine]
            row_key = json.dumps({"k0": key}, separators=(",", ":"))
            # (a DECIMAL comes out of updating state as a DOUBLE: plain_type)
            expected = tuple(float(v) if isinstance(v, Decimal) else v for v in
                             (min(pairs, key=time_key)[1], max(pairs, key=time_key)[1]))
            assert _same_floats(final[row_key][2:4]) == _same_floats(expected)


def _listed_partials(value_type: pa.DataType) -> Callable[[list[Row], bool], pa.Table]:
    """Spark's signed partials of ``count(*), array_agg(v)`` for rows of ``value_type``
    values: every row's value (NULLs too) with its sign."""
    signed = pa.list_(pa.struct([pa.field("v", value_type), pa.field("s", pa.int32())]))

    def partials(rows: list[Row], updating_input: bool) -> pa.Table:
        columns: dict[str, list[Any]] = defaultdict(list)
        for key, mine in _by_key(rows).items():
            signs, row_key = _key_columns(columns, key, mine)
            columns["p1_0"].append([{"v": v, "s": s}
                                    for s, (_, _, _, v) in zip(signs, mine, strict=True)])
            columns["__kg"].append(sum(row_key.encode()) % GROUPS)
        types = {"__key": pa.string(), "k0": pa.string(), "__seen": pa.timestamp("us", tz="UTC"),
                 "p1_0": signed, "__kg": pa.int32()}
        names = ["__key", "k0", "__count", "__rows", "__seen", "p0_0", "p1_0", "__kg"]
        return pa.table({n: pa.array(columns[n], types.get(n, pa.int64())) for n in names})

    return partials


def _comparable(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row with its lists as tuples and NaN as one comparable value."""
    return _same_floats(tuple(tuple(_same_floats(tuple(v))) if isinstance(v, list) else v
                              for v in row))


@pytest.mark.parametrize("kind", list(_TIMED_VALUES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(data=st.data(), count=st.integers(1, 6), parallelism=st.integers(1, 3),
       updating_input=st.booleans(), interval_s=st.sampled_from([0, 5]))
def test_array_agg_in_columns_as_per_key(kind, data, count, parallelism, updating_input,
                                        interval_s, tmp_path_factory
                                        ) -> None:  # type: ignore[no-untyped-def]
    """array_agg over append-only and updating input: a key's values, NULLs too, each as
    often as it is held, in the order the key first held each; a list that changes is
    withdrawn and emitted again, one that does not is left alone."""
    value_type, samples = _TIMED_VALUES[kind]
    rows = data.draw(st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.booleans(),
                                        st.integers(0, 100),
                                        st.one_of(st.none(), st.sampled_from(samples))),
                              min_size=1, max_size=40))
    if updating_input:
        rows = _updating(rows, samples[0])
    else:
        rows = [(key, False, ts, value) for key, _, ts, value in rows]
    partials = _listed_partials(value_type)
    _per_key_and_in_columns((AggregateCall("count_star", None, "n"),
                             AggregateCall("array_agg", "a0", "values")), partials, rows,
                            count, parallelism, tmp_path_factory.mktemp(kind), updating_input,
                            interval_s * 1000)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.booleans(),
                               st.integers(0, 100),
                               st.one_of(st.none(), st.sampled_from(
                                   [Decimal("0.1000000001"), Decimal("1234567890.0123456789"),
                                    Decimal("-3.3000000000"), Decimal("0E-10"),
                                    Decimal("2.5000000000")]))),
                     min_size=1, max_size=40),
       count=st.integers(1, 6), parallelism=st.integers(1, 3))
def test_percentiles_of_decimals_in_columns_as_per_key(rows, count, parallelism,
                                                       tmp_path_factory
                                                       ) -> None:  # type: ignore[no-untyped-def]
    """median and percentile_cont of a DECIMAL over updating input: each value as the double
    nearest it, as on the per-key path."""
    rows = _updating(rows, Decimal("1.0000000000"))
    signed = pa.list_(pa.struct([pa.field("v", pa.decimal128(20, 10)),
                                 pa.field("s", pa.int32())]))

    def partials(part: list[Row], updating_input: bool) -> pa.Table:
        return _float_partials(part, updating_input, signed)

    aggregates = (AggregateCall("count_star", None, "n"), *PERCENTILES,
                  AggregateCall("median", "a0", "again"))
    _per_key_and_in_columns(aggregates, partials, rows, count, parallelism,
                            tmp_path_factory.mktemp("decimal_percentiles"))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", None]), st.booleans(),
                               st.integers(0, 100),
                               st.one_of(st.none(), st.tuples(
                                   st.sampled_from([-2.5, -0.0, 0.0, 1.0, 7.25, math.inf]),
                                   st.sampled_from([1.0, 2.0, 3.0])))),
                     min_size=1, max_size=40),
       count=st.integers(1, 6), parallelism=st.integers(1, 3),
       updating_input=st.booleans())
def test_weighted_percentiles_in_columns_as_per_key(rows, count, parallelism, updating_input,
                                                    tmp_path_factory
                                                    ) -> None:  # type: ignore[no-untyped-def]
    """The weighted percentile (approx_percentile_cont_with_weight) over updating and
    append-only input: a multiset of ``[x, weight]`` pairs, as on the per-key path (a row
    of a NULL pair carries no weight)."""
    if updating_input:
        rows = _updating(rows, (1.0, 1.0), lambda row: (row[0], hashable(
            None if row[3] is None else list(row[3]))))
    else:
        rows = [(key, False, ts, pair) for key, _, ts, pair in rows]
    signed = pa.list_(pa.struct([pa.field("v", pa.list_(pa.float64())),
                                 pa.field("s", pa.int32())]))

    def partials(part: list[Row], updating_input: bool) -> pa.Table:
        columns: dict[str, list[Any]] = defaultdict(list)
        for key, mine in _by_key(part).items():
            signs, row_key = _key_columns(columns, key, mine)
            entries = [{"v": None if pair is None else list(pair), "s": s}
                       for s, (_, _, _, pair) in zip(signs, mine, strict=True)]
            columns["p1_0"].append(entries)
            columns["p2_0"].append(entries)
            columns["__kg"].append(sum(row_key.encode()) % GROUPS)
        types = {"__key": pa.string(), "k0": pa.string(), "__seen": pa.timestamp("us", tz="UTC"),
                 "p1_0": signed, "p2_0": signed, "__kg": pa.int32()}
        names = ["__key", "k0", "__count", "__rows", "__seen", "p0_0", "p1_0", "p2_0", "__kg"]
        return pa.table({n: pa.array(columns[n], types.get(n, pa.int64())) for n in names})

    aggregates = (AggregateCall("count_star", None, "n"),
                  AggregateCall("percentile_cont_weighted", "a0", "p30", 0.3),
                  AggregateCall("percentile_cont_weighted", "a0", "p50"))
    _per_key_and_in_columns(aggregates, partials, rows, count, parallelism,
                            tmp_path_factory.mktemp("weighted"), updating_input)


def test_a_result_of_nan_that_did_not_change_is_not_emitted_again(tmp_path: Path) -> None:
    """NaN is one value (as Spark has it): a key whose max stays NaN through an epoch that
    adds and withdraws a row emits nothing, in columns and per key."""
    rows: list[Row] = [("a", False, 0, math.nan), ("b", False, 0, 1.0),
                       ("a", False, 1, 1.5), ("a", True, 1, 1.5)]
    changes = _per_key_and_in_columns(FLOAT_AGGREGATES, _float_partials, rows, 2, 1, tmp_path)
    assert [_same_floats(row[1:5]) for row in changes[0] if row[0] == "a"] \
        == [(1, "NaN", "NaN", 1)]
    assert changes[1] == []


#: count(*), sum and avg of a DECIMAL(20, 2)
DECIMAL_SUMS = (AggregateCall("count_star", None, "n"), AggregateCall("sum", "a0", "s"),
                AggregateCall("avg", "a0", "mean"))
#: Native Spark's signed sum of a DECIMAL(20, 2): ``sum(-1 * a)`` is a DECIMAL(31, 2).
SIGNED_MONEY = pa.decimal128(31, 2)


def _net(values: list[tuple[int, Decimal]]) -> Decimal:
    with localcontext(prec=60):
        return sum((sign * value for sign, value in values), Decimal(0))


def _decimal_partials(rows: list[Row], updating_input: bool = True) -> pa.Table:
    """Spark's signed partials of :data:`DECIMAL_SUMS` for ``rows``."""
    columns: dict[str, list[Any]] = defaultdict(list)
    for key, mine in _by_key(rows).items():
        signs, row_key = _key_columns(columns, key, mine)
        present = [(s, v) for s, (_, _, _, v) in zip(signs, mine, strict=True) if v is not None]
        for i in (1, 2):
            columns[f"p{i}_0"].append(_net(present) if present else None)
            columns[f"p{i}_1"].append(sum(s for s, _ in present))
        columns["__kg"].append(sum(row_key.encode()) % GROUPS)
    types = {"__key": pa.string(), "k0": pa.string(), "__seen": pa.timestamp("us", tz="UTC"),
             "p1_0": SIGNED_MONEY, "p2_0": SIGNED_MONEY, "__kg": pa.int32()}
    names = ["__key", "k0", "__count", "__rows", "__seen", "p0_0", "p1_0", "p1_1", "p2_0",
             "p2_1", "__kg"]
    return pa.table({n: pa.array(columns[n], types.get(n, pa.int64())) for n in names})


def _inserts_in_columns(aggregates: tuple[AggregateCall, ...],
                        partials: Callable[[list[Row], bool], pa.Table], rows: list[Row],
                        count: int, parallelism: int, folder: Path, updating_input: bool
                        ) -> Iterator[tuple[list[Row], tuple[Any, ...]]]:
    """``rows`` in ``count`` epochs through the columnar operator alone (which must take
    ``aggregates``), flushing every epoch: each row it inserts, with the input rows
    seen by then."""
    spec = UpdatingAggregate(operator_id="q0_updating", input_sql="", key_columns=("k0",),
                             aggregates=aggregates, updating_input=updating_input,
                             output_view="v", ttl_us=10_000 * SECOND)
    partial_schema = partials([], updating_input).schema
    assert columnar(spec, partial_schema)
    schema = UpdatingAggregateOperator(spec, GROUPS).output_schema(partial_schema)
    epochs = _epochs(rows, count, step_s=2)
    changes, _ = _run(UpdatingColumnsRange(spec, partial_schema, schema), folder / "columns.db",
                      epochs, 0, parallelism, updating_input, partials)
    seen: list[Row] = []
    for (epoch_rows, _, _), emitted in zip(epochs, changes, strict=True):
        seen += epoch_rows
        for row in emitted:
            if not row[-3]:  # not a withdrawal
                yield seen, row


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.booleans(),
                               st.integers(0, 100),
                               st.one_of(st.none(), st.sampled_from(
                                   [Decimal("0.10"), Decimal("-0.20"), Decimal("0.00"),
                                    Decimal("123456789012345678.99"),
                                    Decimal("-999999999999999999.99")]))),
                     min_size=1, max_size=50),
       count=st.integers(1, ENTRIES_PER_GROUP + 2), parallelism=st.integers(1, 3))
def test_decimal_sums_are_exact_in_columns(rows, count, parallelism,
                                           tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    """sum and avg of a DECIMAL over updating input, flushed every epoch: each key's sum
    is the exact net sum of its rows so far rounded once to a double (a dime added three
    times is 0.3; values past 2**53 keep their cents until the sum is rounded), its avg
    that over the net count of values."""
    rows = _updating(rows, Decimal("1.00"))
    for seen, (key, n, total, mean, *_) in _inserts_in_columns(
            DECIMAL_SUMS, _decimal_partials, rows, count, parallelism,
            tmp_path_factory.mktemp("decimal_sums"), True):
        mine = [(-1 if withdrawn else 1, v) for k, withdrawn, _, v in seen if k == key]
        present = [(sign, v) for sign, v in mine if v is not None]
        held = sum(sign for sign, _ in present)
        assert n == sum(sign for sign, _ in mine)
        assert total == (float(_net(present)) if held else None)
        assert mean == (float(_net(present)) / held if held else None)


def test_a_dime_added_three_times_is_three_dimes(tmp_path: Path) -> None:
    rows = [("a", False, t, Decimal("0.10")) for t in (1, 2, 3)]
    inserted = [row[1:3] for _, row in _inserts_in_columns(
        DECIMAL_SUMS, _decimal_partials, rows, 3, 1, tmp_path, False)]
    assert inserted == [(1, 0.1), (2, 0.2), (3, 0.3)]


#: A DECIMAL past 18 digits: its extremes compared word by word.
WIDE = pa.decimal128(38, 10)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                               HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b", "c", None]), st.just(False),
                               st.integers(0, 100),
                               st.one_of(st.none(), st.integers(-10**27, 10**27).map(
                                   lambda u: Decimal(u).scaleb(-10)))),
                     min_size=1, max_size=50),
       count=st.integers(1, ENTRIES_PER_GROUP + 2), parallelism=st.integers(1, 3))
def test_decimal_extremes_of_appended_rows_in_columns(rows, count, parallelism,
                                                      tmp_path_factory
                                                      ) -> None:  # type: ignore[no-untyped-def]
    """min and max of a DECIMAL(38, 10) (past 18 digits: compared word by word) over
    appended rows, flushed every epoch: each key's extremes so far, as the nearest
    doubles."""
    for seen, (key, n, lo, hi, *_) in _inserts_in_columns(
            APPENDED_EXTREMES, _extreme_partials(WIDE), rows, count, parallelism,
            tmp_path_factory.mktemp("decimal_extremes"), False):
        mine = [v for k, _, _, v in seen if k == key]
        values = [v for v in mine if v is not None]
        assert n == len(mine)
        assert (lo, hi) == ((float(min(values)), float(max(values))) if values
                            else (None, None))
