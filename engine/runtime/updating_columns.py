"""Runs an updating aggregate on one key-group range for one epoch, in columns.

The columnar counterpart of :class:`~spate.engine.runtime.updating.UpdatingAggregateOperator`
for the aggregates :func:`columnar` accepts (count; sum and avg of integers,
floats and decimals; min and max of integers, floats, decimals, times, dates and
booleans, and over appended rows of text and bytes; the
variances and standard deviations; the (y, x) aggregates corr, covar_* and
regr_*; distinct counts of integers, floats, times, dates, booleans, text, bytes
and decimals, and their min and max over updating input; median and
percentile_cont of integers, floats and decimals, also weighted; bit_and, bit_or
and bit_xor; first_value and last_value of the values distinct counts take;
array_agg of numbers, decimals, text, bytes, booleans, times and dates): the epoch's
signed partials merge into the keys' states, due groups flush and idle keys expire as
whole NumPy and Arrow columns, with no Python statement per key.  What it emits
is what the per-key operator emits: the same changes, with a key's withdrawal
before its new row.

State layout in the store (per key group):

* operator ``<id>/key_columns``: the group's key states as Arrow IPC tables,
  one entry ``(epoch,)`` per epoch that changed keys of the group, holding
  just the keys it changed (a key removed is a row marked ``__gone``).  A key's
  latest entry wins when read.  An epoch that changes a group already holding
  :data:`ENTRIES_PER_GROUP` entries writes the group whole as one entry and
  deletes the others, so writes stay proportional to the keys an epoch
  changes and reads to the group's keys.
* operator ``<id>/key_flush``: per key group, one entry ``()``:
  ``[last flush (ms), whether keys wait for a flush, the earliest latest event
  time of its keys]``.

A key's state row: its row key (``__key``) and group-by values, net rows, the
accumulator columns ``a<i>_<j>`` (a sum or avg: the sum and the net count of values,
a sum of decimals exact as a DECIMAL(38, s); a variance: count, mean and the sum of
squared deviations; a (y, x) aggregate: count, the two means, the two sums of
squared deviations and of their products; bit_xor: the xor and the net count of
values; min and max over appended rows: the extreme (a decimal as a DECIMAL(38, s))
and whether there is one; min and max over updating input, distinct counts,
percentiles, bit_and and bit_or: one column ``a<i>_0``, the key's multiset of values
as a list of ``{v, c}``, each value as an int64 number (a float as its
:func:`float_keys` key; text, bytes and decimals as they are) with its positive net
count; first_value and last_value: the same list of its (event time, value) pairs
``struct<t, v>``, over append-only input just its earliest or latest one; array_agg:
the same list of its values as they are, NULLs too, in the order the key first held
each; the weighted percentile: its ``[x, weight]`` pairs as ``{v, w, c}``, both as
float keys), its latest event time (µs), whether it has output out (``__out``) and
that output (``e<i>``), and whether it waits for a flush (``__pending``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.engine.operators.aggregates import AGGREGATES
from spate.engine.operators.aggregates.moments import (
    MOMENT_COLUMNS,
    columns_result,
    combined_columns,
)
from spate.engine.operators.decimal_columns import (
    as_output,
    compare_words,
    doubles,
    from_words,
    words,
)
from spate.engine.operators.updating import flush_due
from spate.engine.operators.window_columns import (
    BITS,
    BITWISE,
    COUNTS,
    DISTINCTS,
    EXTREMES,
    SUMS,
    TIMED,
    by_place,
    float_keys,
    floats_of_keys,
    keyable,
    pair_keys,
    window_percentiles,
)
from spate.engine.planner.plan import EVENT_TIME, UpdatingAggregate
from spate.engine.runtime.tasks import KEY_GROUP, TaskEpoch, TaskStats
from spate.engine.runtime.values import from_ipc, to_ipc
from spate.engine.runtime.watermarks import END_OF_TIME
from spate.engine.runtime.window_columns import as_numbers, from_numbers
from spate.statestore import CachedPipelineState, EpochWriter, UserKey
from spate.statestore.encoding import decode, encode

#: The percentiles run here, over the key's multiset of values ...
PERCENTILES = frozenset({"median", "percentile_cont"})
#: ... and the weighted one, over its multiset of ``[x, weight]`` pairs.
WEIGHTED = "percentile_cont_weighted"
#: ... and bit_and and bit_or (not invertible as values; bit_xor keeps its xor and count).
BAGGED_BITS = frozenset({"bit_and", "bit_or"})
#: ... and array_agg, whose multiset holds its values as they are, NULLs too, in the order
#: a key first held each (the order it lists them in).
LISTED = frozenset({"array_agg"})
#: The variances and standard deviations, and the (y, x) aggregates: (co-)moments
#: merged in columns.
VARIANCES = frozenset(name for name, f in AGGREGATES.items()
                      if f.columnar in ("moments", "comoments"))
#: Entries a group holds at most: a change to a group holding this many writes it whole.
ENTRIES_PER_GROUP = 8
#: Later than any event time: a group without keys that have one.
_NEVER = 2**63 - 1
_KEY = "__key"
_KG = "__kg"
_GONE = "__gone"
_ROWS = "__rows"
_SEEN = "__seen"
_OUT = "__out"
_PENDING = "__pending"


def columnar(spec: UpdatingAggregate, partial_schema: pa.Schema) -> bool:
    """Whether ``spec`` runs here: plain keys, and only the aggregates of the values the
    module's docstring lists (of nested values, none)."""
    if any(pa.types.is_nested(partial_schema.field(k).type) for k in spec.key_columns):
        return False
    for i, call in enumerate(spec.aggregates):
        if call.function in COUNTS:
            continue
        kind = partial_schema.field(f"p{i}_0").type
        number = pa.types.is_integer(kind) or pa.types.is_floating(kind)
        if call.function in SUMS and (number or pa.types.is_decimal128(kind)):
            continue
        if call.function in VARIANCES:  # of numbers: the planner casts them to DOUBLE
            continue
        if call.function in EXTREMES and (
                _orderable(_multiset_value_type(kind)) or _by_value(_multiset_value_type(kind))
                if spec.updating_input else
                _orderable(kind) or pa.types.is_decimal128(kind) or by_place(kind)):
            continue
        if call.function in DISTINCTS and (_orderable(_multiset_value_type(kind))
                                           or _by_value(_multiset_value_type(kind))):
            continue
        value = _multiset_value_type(kind)
        if call.function in PERCENTILES and (pa.types.is_integer(value)
                                             or _as_floats(value)):
            continue
        if call.function in BITS and pa.types.is_integer(
                value if call.function in BAGGED_BITS else kind):
            continue
        if call.function in LISTED and keyable(value):
            continue
        if call.function == WEIGHTED:  # [x, weight] as doubles
            continue
        pair = value if spec.updating_input else kind
        if call.function in TIMED and pa.types.is_struct(pair) and (
                keyable(pair.field("v").type) or _by_value(pair.field("v").type)):
            continue
        return False
    return True


def _by_value(kind: pa.DataType) -> bool:
    """Values a multiset holds as they are (:class:`_ValueBag`): text, bytes and decimals,
    which Arrow orders and compares as Spark does (text and bytes by their bytes)."""
    return by_place(kind) or bool(pa.types.is_decimal(kind))


def _orderable(kind: pa.DataType) -> bool:
    """Values whose minimum and maximum run in columns, as numbers (:func:`as_numbers`;
    in a multiset, floats as :func:`float_keys`)."""
    return bool(pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or pa.types.is_timestamp(kind) or pa.types.is_date32(kind)
            or pa.types.is_boolean(kind))


def _multiset_value_type(kind: pa.DataType) -> pa.DataType:
    """The value type of a signed-values partial (``list<struct<v, s>>``) or of a set of
    values (``list<v>``); for any other partial the null type, which nothing runs in
    columns over."""
    if pa.types.is_list(kind) and pa.types.is_struct(kind.value_type):
        return kind.value_type.field("v").type
    if pa.types.is_list(kind):
        return kind.value_type
    return pa.null()


#: A key's multiset in state: each value (as a number) with its net count.
_MULTISET = pa.list_(pa.struct([pa.field("v", pa.int64()), pa.field("c", pa.int64())]))
#: ... and the weighted percentile's: each ``[x, weight]`` pair (as float keys) with its count.
_WEIGHTED = pa.list_(pa.struct([pa.field("v", pa.int64()), pa.field("w", pa.int64()),
                                pa.field("c", pa.int64())]))


@dataclass(frozen=True)
class UpdatingColumnsRange:
    """An updating aggregate's work on one key-group range, run in a Spark task (picklable)."""

    spec: UpdatingAggregate
    partial_schema: pa.Schema
    #: the output table's schema (``UpdatingAggregateOperator.output_schema``)
    schema: pa.Schema

    @property
    def states_name(self) -> str:
        return f"{self.spec.operator_id}/key_columns"

    @property
    def flush_name(self) -> str:
        return f"{self.spec.operator_id}/key_flush"

    def __call__(self, partials: pa.Table, state: CachedPipelineState, writer: EpochWriter,
                 epoch: TaskEpoch, stats: TaskStats) -> pa.Table:
        stats.rows_in = int(pc.sum(partials.column("__count")).as_py() or 0)
        finishing = epoch.watermark_after >= END_OF_TIME
        horizon = epoch.watermark_after - self.spec.ttl_us
        metas = state.read_range(self.flush_name, writer.key_groups,
                                 epoch=epoch.previous_epoch)
        with_rows = set(np.unique(partials.column(KEY_GROUP).to_numpy()).tolist())
        work: list[int] = []
        due: list[int] = []
        stored_metas: dict[int, list[Any] | None] = {}
        for group in writer.key_groups:
            raw = metas[group].get(())
            stored_metas[group] = None if raw is None else decode(raw)
            last_flush, waiting, oldest = stored_metas[group] or [None, False, _NEVER]
            rows = group in with_rows
            is_due = bool(waiting or rows) and (finishing or flush_due(
                last_flush, epoch.clock_ms, epoch.flush_interval_ms))
            expiring = not finishing and oldest <= horizon
            if rows or is_due or expiring:
                work.append(group)
            if is_due:
                due.append(group)
        if not work:
            return self.schema.empty_table()

        entries = state.read_range(self.states_name, writer.key_groups,
                                   epoch=epoch.previous_epoch)
        keys = _Keys(self, self.read_keys(work, entries))
        keys.merge(partials)
        expired = keys.expire(horizon) if not finishing else np.zeros(keys.size, bool)
        retracted = keys.withdrawals(expired)
        flushing = np.isin(keys.groups, np.array(due, np.int64)) & keys.pending & ~expired
        changes = keys.flush(flushing)
        self._keep(keys, expired | flushing | keys.touched, work, due, entries, stored_metas,
                   writer, epoch)
        return pa.concat_tables([retracted, changes])

    def read_keys(self, work: list[int], entries: Mapping[int, Mapping[UserKey, bytes]]
                  ) -> pa.Table:
        """The work groups' key states, one row per live key."""
        # Each group's entries newest first, so a key's first row is its latest.
        tables = [from_ipc(entries[group][key]) for group in work
                  for key in sorted(entries[group], reverse=True)]
        if not tables:
            return self.state_schema().empty_table().drop_columns([_GONE])
        table = pa.concat_tables(tables)
        live = ~table.column(_GONE).to_numpy(zero_copy_only=False)
        if any(len(entries[group]) > 1 for group in work):
            names = table.column(_KEY)
            first = pc.index_in(names, value_set=names).to_numpy()
            live &= first == np.arange(table.num_rows)
        return table.filter(pa.array(live)).drop_columns([_GONE])

    def multiset(self, index: int) -> bool:
        """Whether aggregate ``index`` keeps a multiset (min or max of updating input, a
        distinct count, a percentile, bit_and, bit_or, first_value, last_value)."""
        function = self.spec.aggregates[index].function
        return (function in DISTINCTS or function in PERCENTILES or function in BAGGED_BITS
                or function in TIMED or function in LISTED or function == WEIGHTED
                or (self.spec.updating_input and function in EXTREMES))

    def _bag_class(self, index: int) -> type[_Bag | _ValueBag | _PairBag | _WeightedBag]:
        """Which multiset aggregate ``index`` keeps: values as numbers (:class:`_Bag`), or
        text, bytes and decimals as they are (:class:`_ValueBag`), array_agg's lists,
        first_value's and last_value's pairs, the weighted percentile's pairs."""
        function = self.spec.aggregates[index].function
        if function == WEIGHTED:
            return _WeightedBag
        if function in LISTED:
            return _ListBag
        if function in TIMED:
            return _PairBag
        value = _multiset_value_type(self.partial_schema.field(f"p{index}_0").type)
        return _Bag if function in PERCENTILES or not _by_value(value) else _ValueBag

    def multiset_type(self, index: int) -> pa.DataType:
        """How aggregate ``index``'s multisets are stored: values as numbers (``v``
        int64), or text, bytes, decimals and first_value's and last_value's (event time,
        value) pairs as they are; each with its count ``c``."""
        kind = self._bag_class(index)
        if kind is _WeightedBag:
            return _WEIGHTED
        if kind is _Bag:
            return _MULTISET
        partial = self.partial_schema.field(f"p{index}_0").type
        value = _multiset_value_type(partial)
        if kind is _PairBag and not self.spec.updating_input:
            value = partial  # struct<t, v>
        return pa.list_(pa.struct([pa.field("v", value), pa.field("c", pa.int64())]))

    def read_bag(self, index: int, column: pa.ChunkedArray
                 ) -> _Bag | _ValueBag | _PairBag | _WeightedBag:
        """Aggregate ``index``'s multisets of every key row, from the state's column."""
        kind = self._bag_class(index)
        if issubclass(kind, _PairBag):
            return kind.read(column, self.spec.aggregates[index].function == "last_value",
                             self.spec.updating_input)
        return kind.read(column)

    def state_schema(self) -> pa.Schema:
        fields = [pa.field(_KEY, pa.string()), pa.field(_KG, pa.int32())]
        fields += [self.partial_schema.field(k) for k in self.spec.key_columns]
        fields += [pa.field(_ROWS, pa.int64())]
        for i, call in enumerate(self.spec.aggregates):
            # count: the net count; sum, avg: the sum and the net count of values;
            # min, max: the extreme and whether there is one, or over updating input
            # the multiset of values
            if self.multiset(i):
                fields.append(pa.field(f"a{i}_0", self.multiset_type(i)))
                continue
            if call.function in VARIANCES:  # count, mean(s), squared deviations, products
                fields += [pa.field(f"a{i}_0", pa.int64())]
                fields += [pa.field(f"a{i}_{j}", pa.float64())
                           for j in range(1, _width(call.function))]
                continue
            fields.append(pa.field(f"a{i}_0", pa.int64() if call.function in COUNTS
                                   else _number_type(self.partial_schema.field(f"p{i}_0").type)))
            if call.function in SUMS or call.function in BITS:
                fields.append(pa.field(f"a{i}_1", pa.int64()))
            elif call.function in EXTREMES:
                fields.append(pa.field(f"a{i}_1", pa.bool_()))
        fields += [pa.field(_SEEN, pa.int64()), pa.field(_OUT, pa.bool_())]
        fields += [pa.field(f"e{i}", self.schema.field(call.output).type)
                   for i, call in enumerate(self.spec.aggregates)]
        fields += [pa.field(_PENDING, pa.bool_()), pa.field(_GONE, pa.bool_())]
        return pa.schema(fields)

    # -- what the state keeps ---------------------------------------------------------

    def _keep(self, keys: _Keys, changed: np.ndarray, work: list[int], due: list[int],
              entries: Mapping[int, Mapping[UserKey, bytes]],
              stored_metas: Mapping[int, list[Any] | None], writer: EpochWriter,
              epoch: TaskEpoch) -> None:
        """Stage each work group's changed keys (or the whole group when crowded) and its
        flush entry."""
        start, size = writer.key_groups.start, len(writer.key_groups)
        local = keys.groups - start  # each row's group, from 0 within the range
        live = ~keys.gone

        def per_group(mask: np.ndarray) -> np.ndarray:
            return np.bincount(local[mask], minlength=size) > 0

        has_change, has_live = per_group(changed), per_group(live)
        held = np.zeros(size, np.int64)
        held[[g - start for g in work]] = [len(entries[g]) for g in work]
        # A group whose keys are all gone, or whose entries crowd, is written whole.
        whole = has_change & (~has_live | (held >= ENTRIES_PER_GROUP))
        written = np.flatnonzero(np.where(whole[local], live, changed))
        written = written[np.argsort(local[written], kind="stable")]
        bounds = np.searchsorted(local[written], np.arange(size + 1))
        table = keys.table().take(pa.array(written))
        waiting = per_group(keys.pending & live)
        oldest = np.full(size, _NEVER, np.int64)
        timed = live & keys.has_seen
        np.minimum.at(oldest, local[timed], keys.seen[timed])
        at = (epoch.number,)
        for group in work:
            index = group - start
            if whole[index]:
                for key in entries[group]:
                    writer.delete(self.states_name, group, tuple(key))
            rows = bounds[index + 1] - bounds[index]
            if has_change[index] and rows:
                writer.put(self.states_name, group, at,
                           to_ipc(table.slice(bounds[index], rows)))
            stored = stored_metas[group]
            last_flush = epoch.clock_ms if group in due else (
                stored[0] if stored is not None else None)
            meta = [last_flush, bool(waiting[index]), int(oldest[index])]
            if meta != stored:
                writer.put(self.flush_name, group, (), encode(meta))


class _Keys:
    """The work groups' key states for one epoch, as columns the epoch changes in place."""

    def __init__(self, work: UpdatingColumnsRange, stored: pa.Table) -> None:
        self.work = work
        self.aggregates = work.spec.aggregates
        self.static = stored.select([_KEY, _KG, *work.spec.key_columns])
        self.groups = stored.column(_KG).to_numpy().astype(np.int64)
        self.rows = stored.column(_ROWS).to_numpy().copy()
        #: per aggregate, its accumulator columns (``a<i>_<j>``; none for a multiset)
        self.accs = [[] if work.multiset(i) else
                     [_accumulator(stored.column(f"a{i}_{j}"))
                      for j in range(_width(call.function))]
                     for i, call in enumerate(self.aggregates)]
        #: per multiset aggregate: (key row, value, net count), sorted by key row and value
        self.bags = {i: work.read_bag(i, stored.column(f"a{i}_0"))
                     for i in range(len(self.aggregates)) if work.multiset(i)}
        seen = stored.column(_SEEN)
        self.has_seen = seen.is_valid().to_numpy(zero_copy_only=False)
        self.seen = seen.fill_null(0).to_numpy().copy()
        self.out = stored.column(_OUT).to_numpy(zero_copy_only=False).copy()
        self.emitted = [stored.column(f"e{i}").combine_chunks()
                        for i in range(len(self.aggregates))]
        self.pending = stored.column(_PENDING).to_numpy(zero_copy_only=False).copy()
        self.gone = np.zeros(stored.num_rows, bool)
        self.touched = np.zeros(stored.num_rows, bool)
        #: the keys before this epoch's new ones
        self.stored = stored.num_rows

    @property
    def size(self) -> int:
        return len(self.rows)

    def merge(self, partials: pa.Table) -> None:
        """Fold the epoch's signed partials into the keys' states (new keys appended)."""
        if partials.num_rows == 0:
            return
        found = pc.index_in(partials.column(_KEY), value_set=self.static.column(_KEY))
        new = found.is_null().to_numpy(zero_copy_only=False)
        at = found.fill_null(-1).to_numpy().astype(np.int64)
        added = int(new.sum())
        at[new] = self.size + np.arange(added)
        if added:
            fresh = partials.filter(pa.array(new))
            self.static = pa.concat_tables([self.static, pa.table(
                [fresh.column(_KEY), fresh.column(KEY_GROUP).cast(pa.int32()),
                 *(fresh.column(k) for k in self.work.spec.key_columns)],
                schema=self.static.schema)])
            self.groups = np.concatenate([self.groups, fresh.column(KEY_GROUP).to_numpy()
                                          .astype(np.int64)])
            self.rows = np.concatenate([self.rows, np.zeros(added, np.int64)])
            self.accs = [[_grown(acc, added) for acc in accs] for accs in self.accs]
            self.has_seen = np.concatenate([self.has_seen, np.zeros(added, bool)])
            self.seen = np.concatenate([self.seen, np.zeros(added, np.int64)])
            self.out = np.concatenate([self.out, np.zeros(added, bool)])
            self.emitted = [pa.concat_arrays([e, pa.nulls(added, e.type)]) for e in self.emitted]
            self.pending = np.concatenate([self.pending, np.zeros(added, bool)])
            self.gone = np.concatenate([self.gone, np.zeros(added, bool)])
            self.touched = np.concatenate([self.touched, np.zeros(added, bool)])
        self.rows[at] += partials.column("__rows").to_numpy()
        for i, call in enumerate(self.aggregates):
            if i in self.bags:
                self.bags[i] = self.bags[i].merge(at, partials.column(f"p{i}_0"))
            else:
                _merge(call.function, self.accs[i], at, partials, i)
        seen = partials.column("__seen").cast(pa.int64())
        valid = seen.is_valid().to_numpy(zero_copy_only=False)
        micros = seen.fill_null(0).to_numpy()
        targets = at[valid]
        self.seen[targets] = np.where(self.has_seen[targets],
                                      np.maximum(self.seen[targets], micros[valid]),
                                      micros[valid])
        self.has_seen[targets] = True
        self.pending[at] = True
        self.touched[at] = True

    def expire(self, horizon: int) -> np.ndarray:
        """Mark keys last seen at or before ``horizon`` gone; return them.  A key first
        seen this epoch stays until the next."""
        expired: np.ndarray = self.has_seen & (self.seen <= horizon)
        expired[self.stored:] = False
        self.gone |= expired
        self.pending &= ~expired
        return expired

    def results(self) -> list[pa.Array]:
        """Every key's current aggregate values (NULL where it has no rows)."""
        exists = self.rows > 0
        columns = []
        for i, call in enumerate(self.aggregates):
            kind = self.work.schema.field(call.output).type
            bag = self.bags.get(i)
            if bag is not None:
                columns.append(as_output(self._bag_result(i, bag, exists), kind))
                continue
            first = self.accs[i][0]
            if call.function in VARIANCES:
                columns.append(columns_result(call.function, self.accs[i], exists).cast(kind))
                continue
            if call.function in COUNTS:
                columns.append(pa.array(first, kind, mask=~exists))
            elif call.function in EXTREMES:
                missing = ~exists | ~self.accs[i][1]
                partial = self.work.partial_schema.field(f"p{i}_0").type
                if isinstance(first, pa.Array):  # text, bytes
                    columns.append(pc.if_else(pa.array(missing), pa.nulls(self.size, kind),
                                              first.cast(kind)))
                elif first.ndim == 2:  # a decimal's words
                    columns.append(from_words(first, missing, partial.scale, kind))
                else:
                    columns.append(from_numbers(first, missing, partial, kind))
            else:
                counted = self.accs[i][1]
                if first.ndim == 2:  # a decimal's words: the exact sum, rounded once
                    scale = self.work.partial_schema.field(f"p{i}_0").type.scale
                    first = from_words(first, np.zeros(self.size, bool), scale, pa.float64()) \
                        .to_numpy(zero_copy_only=False)
                values = first / np.maximum(counted, 1) if call.function == "avg" else first
                columns.append(pa.array(values, mask=~exists | (counted <= 0)).cast(kind))
        return columns

    def _bag_result(self, index: int,
                    bag: _Bag | _ValueBag | _PairBag | _ListBag | _WeightedBag,
                    exists: np.ndarray) -> pa.Array:
        """Every key's value of aggregate ``index``, over multisets (NULL where a key has
        no rows)."""
        call = self.aggregates[index]
        if call.function in DISTINCTS:
            return pa.array(np.bincount(bag.rows, minlength=self.size), pa.int64(),
                            mask=~exists)
        if isinstance(bag, _ListBag):
            return bag.lists(self.size, ~exists)
        if isinstance(bag, _WeightedBag):
            percentile, missing = bag.percentiles(
                self.size, 0.5 if call.fraction is None else call.fraction)
            return pa.array(percentile, mask=missing | ~exists)
        if not isinstance(bag, _Bag):
            # min or max of text, bytes, decimals as they are; first_value, last_value
            picked = (bag.picks(self.size) if isinstance(bag, _PairBag)
                      else bag.extremes(self.size, call.function == "max"))
            return pc.if_else(pa.array(exists), picked, pa.nulls(self.size, picked.type))
        value_type = _multiset_value_type(self.work.partial_schema.field(f"p{index}_0").type)
        if call.function in PERCENTILES:
            percentile, missing = bag.percentiles(
                self.size, 0.5 if call.fraction is None else call.fraction,
                _as_floats(value_type))
            return pa.array(percentile, mask=missing | ~exists)
        if call.function in BAGGED_BITS:
            combined, present = bag.bitwise(self.size, call.function)
            return pa.array(combined, mask=~exists | ~present)
        extreme, present = bag.extremes(self.size, call.function == "max")
        if pa.types.is_floating(value_type):
            extreme = floats_of_keys(extreme)
        kind = self.work.schema.field(call.output).type
        return from_numbers(extreme, ~exists | ~present, value_type, kind)

    def withdrawals(self, which: np.ndarray) -> pa.Table:
        """The output the keys ``which`` have out, withdrawn."""
        rows = np.flatnonzero(which & self.out)
        return self._rows(rows, [e.take(pa.array(rows)) for e in self.emitted],
                          np.ones(len(rows), bool))

    def flush(self, flushing: np.ndarray) -> pa.Table:
        """Emit the flushing keys' changes since their last flush; keys left without rows
        are gone."""
        current = self.results()
        exists = self.rows > 0
        changed = exists != self.out
        for now, before in zip(current, self.emitted, strict=True):
            changed |= exists & self.out & _differs(now, before)
        changed &= flushing
        withdraw = np.flatnonzero(changed & self.out)
        insert = np.flatnonzero(changed & exists)
        rows = np.concatenate([withdraw, insert])
        retract = np.concatenate([np.ones(len(withdraw), bool), np.zeros(len(insert), bool)])
        order = np.lexsort((~retract, rows))
        rows, retract = rows[order], retract[order]
        values = [pc.if_else(pa.array(retract), before.take(pa.array(rows)),
                             now.take(pa.array(rows)))
                  for now, before in zip(current, self.emitted, strict=True)]
        output = self._rows(rows, values, retract)
        mask = pa.array(flushing)
        self.emitted = [pc.if_else(mask, now, before)
                        for now, before in zip(current, self.emitted, strict=True)]
        self.out = np.where(flushing, exists, self.out)
        self.pending &= ~flushing
        self.gone |= flushing & ~exists
        return output

    def _rows(self, rows: np.ndarray, values: list[pa.Array], retract: np.ndarray) -> pa.Table:
        schema = self.work.schema
        taken = self.static.take(pa.array(rows, pa.int64()))
        seen = pa.array(self.seen[rows], pa.int64(),
                        mask=~self.has_seen[rows]).cast(schema.field(EVENT_TIME).type)
        columns = [taken.column(k).cast(schema.field(k).type)
                   for k in self.work.spec.key_columns]
        columns += [v.cast(schema.field(call.output).type)
                    for v, call in zip(values, self.aggregates, strict=True)]
        columns += [pa.array(retract, pa.bool_()), taken.column(_KEY), seen]
        return pa.Table.from_arrays(columns, schema=schema)

    def table(self) -> pa.Table:
        """The key states, as stored (:meth:`UpdatingColumnsRange.state_schema`)."""
        schema = self.work.state_schema()
        columns: list[pa.Array | pa.ChunkedArray] = [*self.static.columns, pa.array(self.rows)]
        for i, accs in enumerate(self.accs):
            columns += ([self.bags[i].column(self.size)] if i in self.bags
                        else [_stored(acc, schema.field(f"a{i}_{j}").type)
                              for j, acc in enumerate(accs)])
        columns += [pa.array(self.seen, pa.int64(), mask=~self.has_seen),
                    pa.array(self.out), *self.emitted, pa.array(self.pending),
                    pa.array(self.gone)]
        return pa.Table.from_arrays(columns, schema=schema)


def _differs(now: pa.Array, before: pa.Array) -> np.ndarray:
    """Per row, whether the values of two columns of one type differ: NULL equals NULL,
    NaN equals NaN (as Spark compares them), lists (array_agg's) compare element by
    element."""
    null_now = now.is_null().to_numpy(zero_copy_only=False)
    differ: np.ndarray = null_now != before.is_null().to_numpy(zero_copy_only=False)
    if not pa.types.is_list(now.type):
        unequal = pc.not_equal(now, before)
        if pa.types.is_floating(now.type):
            unequal = pc.and_(unequal, pc.invert(pc.and_(pc.is_nan(now), pc.is_nan(before))))
        differ |= pc.fill_null(unequal, False).to_numpy(zero_copy_only=False)
        return differ
    lengths = pc.fill_null(pc.list_value_length(now), 0).to_numpy()
    differ |= lengths != pc.fill_null(pc.list_value_length(before), 0).to_numpy()
    both = pa.array(np.flatnonzero(~differ & ~null_now & (lengths > 0)))
    if len(both):  # the lists of equal lengths, element by element
        elements = _differs(pc.list_flatten(now.take(both)), pc.list_flatten(before.take(both)))
        differ[np.repeat(both.to_numpy(), lengths[both.to_numpy()])[elements]] = True
    return differ


def _merge(function: str, accs: list[np.ndarray], at: np.ndarray, partials: pa.Table,
           index: int) -> None:
    """Fold aggregate ``index``'s partials into its accumulator columns at rows ``at``."""
    if function in VARIANCES:
        _merge_moments(accs, at, partials, index)
        return
    first = partials.column(f"p{index}_0")
    if isinstance(accs[0], pa.Array):  # the least or greatest text or bytes
        pick = pc.max_element_wise if function == "max" else pc.min_element_wise
        best = pick(accs[0].take(pa.array(at)), first.combine_chunks(), skip_nulls=True)
        places = np.arange(len(accs[0]))
        places[at] = len(accs[0]) + np.arange(len(at))
        accs[0] = pa.concat_arrays([accs[0], best]).take(pa.array(places))
        accs[1][at] |= first.is_valid().to_numpy(zero_copy_only=False)
        return
    numbers = words(first) if pa.types.is_decimal(first.type) \
        else as_numbers(first, 0).astype(accs[0].dtype)
    if function in COUNTS:
        accs[0][at] += numbers
    elif function in SUMS or function in BITS:  # bit_xor: xor is its own inverse
        total, counted = accs
        if function in SUMS:
            total[at] += numbers
        else:
            total[at] ^= numbers
        counted[at] += partials.column(f"p{index}_1").to_numpy()
        total[at[counted[at] == 0]] = 0  # every value withdrawn: the total restarts at 0
    else:
        extreme, present = accs
        valid = first.is_valid().to_numpy(zero_copy_only=False)
        held, had = extreme[at], present[at]
        if extreme.ndim == 2:  # a decimal's words, a row each
            sign = compare_words(numbers, held)
            wins = (sign > 0 if function == "max" else sign < 0) | ~had
            extreme[at] = np.where((valid & wins)[:, None], numbers, held)
        else:
            better = np.maximum if function == "max" else np.minimum
            extreme[at] = np.where(valid & had, better(held, numbers),
                                   np.where(valid, numbers, held))
        present[at] = had | valid


def _width(function: str) -> int:
    """How many accumulator columns an aggregate keeps."""
    if function in VARIANCES:
        return MOMENT_COLUMNS[str(AGGREGATES[function].columnar)]
    return 1 if function in COUNTS else 2


def _merge_moments(accs: list[np.ndarray], at: np.ndarray, partials: pa.Table,
                   index: int) -> None:
    """Fold a variance's (or a (y, x) aggregate's) partials, the moments of the rows
    added, then of those withdrawn, into its moment columns at rows ``at``, with
    :func:`~spate.engine.operators.aggregates.moments.merge_moments`' arithmetic (or
    ``merge_comoments``')."""
    width = len(accs)
    means = 1 if width == 3 else 2
    parts = [as_numbers(partials.column(f"p{index}_{j}"), 0) for j in range(2 * width)]
    acc = [column[at] for column in accs]
    added = [parts[0].astype(np.int64), *parts[1:width]]
    withdrawn = [-parts[width].astype(np.int64), *parts[width + 1:width + 1 + means],
                 *(-part for part in parts[width + 1 + means:])]
    for more in (added, withdrawn):
        acc = combined_columns(acc, more)
    for column, merged in zip(accs, acc, strict=True):
        column[at] = merged


def _number_type(kind: pa.DataType) -> pa.DataType:
    """How a sum or an extreme of ``kind`` is stored: a double, an int64, a decimal as a
    DECIMAL(38, its scale), text and bytes as they are."""
    if pa.types.is_decimal(kind):
        return pa.decimal128(38, kind.scale)
    if by_place(kind):
        return kind
    return pa.float64() if pa.types.is_floating(kind) else pa.int64()


#: An accumulator column while an epoch changes it: NumPy (a decimal as its words, one
#: row of four per key), or for the least or greatest text or bytes an Arrow array.
Accumulator: TypeAlias = np.ndarray | pa.Array


def _accumulator(column: pa.ChunkedArray) -> Accumulator:
    """A stored accumulator column as an epoch changes it (:data:`Accumulator`)."""
    if pa.types.is_decimal(column.type):
        return words(column)
    if by_place(column.type):
        return column.combine_chunks()
    values: np.ndarray = column.to_numpy(zero_copy_only=False).copy()
    return values


def _grown(acc: Accumulator, added: int) -> Accumulator:
    """``acc`` with ``added`` new keys' empty accumulators after it."""
    if isinstance(acc, pa.Array):
        return pa.concat_arrays([acc, pa.nulls(added, acc.type)])
    return np.concatenate([acc, np.zeros((added, *acc.shape[1:]), acc.dtype)])


def _stored(acc: Accumulator, kind: pa.DataType) -> pa.Array:
    """An accumulator column back as stored (:func:`_accumulator`'s inverse)."""
    if isinstance(acc, pa.Array):
        return acc
    if acc.ndim == 2:
        return from_words(acc, np.zeros(len(acc), bool), kind.scale, kind)
    return pa.array(acc, kind)


def _as_floats(kind: pa.DataType) -> bool:
    """Values a multiset holds as doubles (:func:`float_keys`): floats, and the decimals
    of percentiles (which the per-key path, too, takes as doubles)."""
    return bool(pa.types.is_floating(kind) or pa.types.is_decimal(kind))


def _bag_numbers(values: pa.Array) -> np.ndarray:
    """Values (not NULL) as a multiset holds them: int64 numbers that compare and order
    as Spark compares and orders the values (floats as :func:`float_keys`; decimals as
    the doubles nearest them, through their text, as Python's ``float`` rounds them)."""
    if pa.types.is_decimal(values.type):
        values = doubles(values)
    if pa.types.is_floating(values.type):
        return float_keys(values.cast(pa.float64()).to_numpy(zero_copy_only=False))
    return as_numbers(pa.chunked_array([values]), 0).astype(np.int64)


def _stored_entries(column: pa.ChunkedArray) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """A stored multiset column's entries: each one's key row, value and count."""
    lists = column.combine_chunks()
    flat = pc.list_flatten(lists)
    return (pc.list_parent_indices(lists).to_numpy().astype(np.int64), flat.field("v"),
            flat.field("c").to_numpy(zero_copy_only=False).astype(np.int64))


def _signed_entries(at: np.ndarray, partial: pa.ChunkedArray
                    ) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """A partial's non-NULL values — signed (``list<struct<v, s>>``), or a set of values
    (``list<v>``, each counted once) — each with its key row (``at`` of its partial
    row) and sign."""
    lists = partial.combine_chunks()
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy()
    if pa.types.is_struct(flat.type):
        added, signs = flat.field("v"), flat.field("s").to_numpy(zero_copy_only=False)
    else:
        added, signs = flat, np.ones(len(flat), np.int64)
    present = added.is_valid().to_numpy(zero_copy_only=False)
    return (at[parents[present]], added.filter(pa.array(present)),
            signs[present].astype(np.int64))


def _entries_column(rows: np.ndarray, counts: np.ndarray, size: int, **fields: pa.Array
                    ) -> pa.Array:
    """Entries sorted by key row, as a multiset column over ``size`` key rows: per row,
    the list of its entries' ``fields`` (``v``, and the weighted percentile's ``w``)
    and count ``c``."""
    offsets = np.r_[0, np.cumsum(np.bincount(rows, minlength=size))].astype(np.int32)
    entries = pa.StructArray.from_arrays([*fields.values(), pa.array(counts, pa.int64())],
                                         names=[*fields, "c"])
    return pa.ListArray.from_arrays(pa.array(offsets), entries)


@dataclass(frozen=True)
class _Bag:
    """The multisets of one aggregate over every key row, flat: each value (a number)
    with its key row and positive net count, sorted by key row and value."""

    rows: np.ndarray
    values: np.ndarray
    counts: np.ndarray

    @classmethod
    def read(cls, column: pa.ChunkedArray) -> _Bag:
        """From the state's list column (one multiset per key row)."""
        rows, values, counts = _stored_entries(column)
        return cls(rows, values.to_numpy(zero_copy_only=False).astype(np.int64), counts)

    def merge(self, at: np.ndarray, partial: pa.ChunkedArray) -> _Bag:
        """With each partial row's signed values (``list<struct<v, s>>``), or set of values
        (``list<v>``, each counted once), added to key row ``at[row]``; values whose count
        reaches 0 leave."""
        new_rows, added, signs = _signed_entries(at, partial)
        rows = np.concatenate([self.rows, new_rows])
        values = np.concatenate([self.values, _bag_numbers(added)])
        counts = np.concatenate([self.counts, signs])
        order = np.lexsort((values, rows))
        rows, values, counts = rows[order], values[order], counts[order]
        if not len(rows):
            return self
        starts = np.flatnonzero(np.r_[True, (rows[1:] != rows[:-1])
                                      | (values[1:] != values[:-1])])
        net = np.add.reduceat(counts, starts)
        kept = net > 0
        return _Bag(rows[starts][kept], values[starts][kept], net[kept])

    def extremes(self, size: int, is_max: bool) -> tuple[np.ndarray, np.ndarray]:
        """Each of ``size`` key rows' largest (or smallest) value, and whether it has one."""
        extreme = np.zeros(size, np.int64)
        present = np.zeros(size, bool)
        # values are sorted within a key row: its first is the least, its last the most
        picked = _picked(self.rows, is_max)
        extreme[self.rows[picked]] = self.values[picked]
        present[self.rows[picked]] = True
        return extreme, present

    def bitwise(self, size: int, function: str) -> tuple[np.ndarray, np.ndarray]:
        """Each of ``size`` key rows' bit_and or bit_or (``function``) of its values (a
        value's count does not matter to either), and whether it has one."""
        operation, identity = BITWISE[function]
        combined = np.full(size, identity, np.int64)
        present = np.zeros(size, bool)
        if len(self.rows):
            starts = np.flatnonzero(np.r_[True, self.rows[1:] != self.rows[:-1]])
            combined[self.rows[starts]] = operation.reduceat(self.values, starts)
            present[self.rows[starts]] = True
        return combined, present

    def percentiles(self, size: int, fraction: float, floats: bool
                    ) -> tuple[np.ndarray, np.ndarray]:
        """Each of ``size`` key rows' percentile_cont(``fraction``) of its values (each
        as many times as its count; ``floats``: the numbers are float keys), and
        whether it has none."""
        numbers = floats_of_keys(self.values) if floats else self.values
        bounds = np.r_[0, np.cumsum(np.bincount(self.rows, minlength=size))]
        everything = np.arange(len(self.values), dtype=np.int64)
        return window_percentiles(numbers, np.ones(len(numbers), bool), everything, bounds,
                                  fraction, weights=self.counts)

    def column(self, size: int) -> pa.Array:
        """As the state's list column over ``size`` key rows."""
        return _entries_column(self.rows, self.counts, size, v=pa.array(self.values, pa.int64()))


@dataclass(frozen=True)
class _ValueBag:
    """As :class:`_Bag`, for values a multiset holds as they are (text, bytes, decimals):
    each value an entry of an Arrow array, with its key row and positive net count,
    sorted by key row and value."""

    rows: np.ndarray
    values: pa.Array
    counts: np.ndarray

    @classmethod
    def read(cls, column: pa.ChunkedArray) -> _ValueBag:
        """From the state's list column (one multiset per key row)."""
        return cls(*_stored_entries(column))

    def merge(self, at: np.ndarray, partial: pa.ChunkedArray) -> _ValueBag:
        """As :meth:`_Bag.merge`."""
        new_rows, added, signs = _signed_entries(at, partial)
        rows = np.concatenate([self.rows, new_rows])
        values = pa.concat_arrays([self.values, added.cast(self.values.type)])
        counts = np.concatenate([self.counts, signs])
        if not len(rows):
            return self
        order = pc.sort_indices(pa.table({"r": rows, "v": values}),
                                [("r", "ascending"), ("v", "ascending")])
        rows, values, counts = rows[order.to_numpy()], values.take(order), counts[order.to_numpy()]
        same = pc.equal(values.slice(1), values.slice(0, len(values) - 1))
        changed = (rows[1:] != rows[:-1]) | ~same.to_numpy(zero_copy_only=False)
        starts = np.flatnonzero(np.r_[True, changed])
        net = np.add.reduceat(counts, starts)
        kept = starts[net > 0]
        return _ValueBag(rows[kept], values.take(pa.array(kept)), net[net > 0])

    def extremes(self, size: int, is_max: bool) -> pa.Array:
        """Each of ``size`` key rows' largest (or smallest) value, NULL where it has none."""
        return _taken(self.values, self.rows, _picked(self.rows, is_max), size)

    def column(self, size: int) -> pa.Array:
        """As the state's list column over ``size`` key rows."""
        return _entries_column(self.rows, self.counts, size, v=self.values)


@dataclass(frozen=True)
class _PairBag:
    """first_value's (``latest``: last_value's) (event time, value) pairs over every key
    row, flat: each pair with its key row and positive net count, sorted by key row and
    then in the pairs' order (time, then value, NULLs first; :func:`pair_keys`).  Over
    updating input a key row keeps every pair it holds, so that withdrawing its answer
    finds the next; over append-only input only its earliest (latest) pair."""

    rows: np.ndarray
    pairs: pa.StructArray
    counts: np.ndarray
    latest: bool
    every: bool

    @classmethod
    def read(cls, column: pa.ChunkedArray, latest: bool, every: bool) -> _PairBag:
        """From the state's list column (one multiset per key row)."""
        rows, pairs, counts = _stored_entries(column)
        return cls(rows, pairs, counts, latest, every)

    def merge(self, at: np.ndarray, partial: pa.ChunkedArray) -> _PairBag:
        """With each partial row's pair (``struct<t, v>``, NULL: none) or, over updating
        input, its signed pairs (``list<struct<v: struct<t, v>, s>>``) added to key row
        ``at[row]``; pairs whose count reaches 0 leave."""
        if self.every:
            new_rows, added, signs = _signed_entries(at, partial)
        else:
            pairs = partial.combine_chunks()
            valid = pairs.is_valid().to_numpy(zero_copy_only=False)
            new_rows, added = at[valid], pairs.filter(pa.array(valid))
            signs = np.ones(len(new_rows), np.int64)
        rows = np.concatenate([self.rows, new_rows])
        if not len(rows):
            return self
        pairs = pa.concat_arrays([self.pairs, added.cast(self.pairs.type)])
        counts = np.concatenate([self.counts, signs])
        keys, order = pair_keys(pairs)
        if not self.every:  # append-only: each key row's earliest (latest) pair only
            ranks = np.empty(len(order), np.int64)
            ranks[order] = np.arange(len(order))
            by_row = np.lexsort((ranks, rows))
            kept = by_row[_picked(rows[by_row], self.latest)]
            return _PairBag(rows[kept], pairs.take(pa.array(kept)),
                            np.ones(len(kept), np.int64), self.latest, self.every)
        # equal pairs share a number, in the pairs' order (the order is stable: of equal
        # pairs, the one held longest comes first, and stays, as on the per-key path)
        ordered = keys.take(pa.array(order))
        differs = np.zeros(len(order), bool)
        for name in ("t", "v"):
            column = ordered.column(name).combine_chunks()
            later, earlier = column.slice(1), column.slice(0, len(column) - 1)
            same = pc.fill_null(pc.equal(later, earlier), False).to_numpy(zero_copy_only=False)
            same |= (later.is_null().to_numpy(zero_copy_only=False)
                     & earlier.is_null().to_numpy(zero_copy_only=False))
            differs[1:] |= ~same
        numbers = np.empty(len(order), np.int64)
        numbers[order] = np.cumsum(differs)
        order = np.lexsort((numbers, rows))
        rows, numbers, counts = rows[order], numbers[order], counts[order]
        starts = np.flatnonzero(np.r_[True, (rows[1:] != rows[:-1])
                                      | (numbers[1:] != numbers[:-1])])
        net = np.add.reduceat(counts, starts)
        kept = starts[net > 0]
        net = net[net > 0]
        return _PairBag(rows[kept], pairs.take(pa.array(order[kept])), net, self.latest,
                        self.every)

    def picks(self, size: int) -> pa.Array:
        """Each of ``size`` key rows' first_value (last_value), NULL where it has none."""
        return _taken(self.pairs.field("v"), self.rows, _picked(self.rows, self.latest), size)

    def column(self, size: int) -> pa.Array:
        """As the state's list column over ``size`` key rows."""
        return _entries_column(self.rows, self.counts, size, v=self.pairs)


def _picked(rows: np.ndarray, last: bool) -> np.ndarray:
    """Of entries sorted by key row, each key row's first (``last``: last) entry."""
    if not len(rows):
        return np.zeros(0, np.int64)
    bounds = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])
    return np.r_[bounds[1:], len(rows)] - 1 if last else bounds


def _taken(values: pa.Array, rows: np.ndarray, picked: np.ndarray, size: int) -> pa.Array:
    """Per key row of ``size``, the entry ``picked`` of its (``rows``), NULL for none."""
    at = np.zeros(size, np.int64)
    present = np.zeros(size, bool)
    at[rows[picked]] = picked
    present[rows[picked]] = True
    return values.take(pa.array(at, mask=~present))


@dataclass(frozen=True)
class _ListBag(_ValueBag):
    """array_agg's values over every key row, flat: each value as it is (NULL too) with
    its key row and positive net count, sorted by key row and then in the order the key
    first held each value, the order array_agg lists them in (as the per-key multiset)."""

    def merge(self, at: np.ndarray, partial: pa.ChunkedArray) -> _ListBag:
        """With each partial row's signed values (``list<struct<v, s>>``, NULLs too) added
        to key row ``at[row]`` after those it holds; values whose count reaches 0 leave."""
        lists = partial.combine_chunks()
        flat = pc.list_flatten(lists)
        rows = np.concatenate([self.rows, at[pc.list_parent_indices(lists).to_numpy()]])
        if not len(rows):
            return self
        values = pa.concat_arrays([self.values, flat.field("v").cast(self.values.type)])
        counts = np.concatenate([self.counts, flat.field("s").to_numpy(
            zero_copy_only=False).astype(np.int64)])
        if pa.types.is_floating(values.type):  # as Spark equates doubles
            missing = values.is_null().to_numpy(zero_copy_only=False)
            same = pa.array(float_keys(values.fill_null(0.0).to_numpy(zero_copy_only=False)),
                            mask=missing)
        else:
            same = values
        ids = pc.fill_null(pc.dictionary_encode(same).indices, -1).to_numpy()
        # stable: of a key's equal values, the one it held first leads its group
        order = np.lexsort((ids, rows))
        starts = np.flatnonzero(np.r_[True, (rows[order][1:] != rows[order][:-1])
                                      | (ids[order][1:] != ids[order][:-1])])
        net = np.add.reduceat(counts[order], starts)
        first = order[starts][net > 0]
        net = net[net > 0]
        by_seen = np.lexsort((first, rows[first]))
        return _ListBag(rows[first][by_seen], values.take(pa.array(first[by_seen])),
                        net[by_seen])

    def lists(self, size: int, missing: np.ndarray) -> pa.Array:
        """Each of ``size`` key rows' array_agg: every value as many times as its count,
        NULL where the row has none or is ``missing``."""
        lengths = np.bincount(self.rows, weights=self.counts, minlength=size).astype(np.int64)
        offsets = np.r_[0, np.cumsum(lengths)].astype(np.int32)
        repeated = np.repeat(np.arange(len(self.rows)), self.counts)
        return pa.ListArray.from_arrays(pa.array(offsets), self.values.take(pa.array(repeated)),
                                        mask=pa.array(missing | (lengths == 0)))


@dataclass(frozen=True)
class _WeightedBag:
    """The weighted percentile's ``[x, weight]`` pairs over every key row, flat: each
    pair (x and weight as :func:`float_keys`) with its key row and positive net count,
    sorted by key row, x and weight."""

    rows: np.ndarray
    values: np.ndarray
    weights: np.ndarray
    counts: np.ndarray

    @classmethod
    def read(cls, column: pa.ChunkedArray) -> _WeightedBag:
        """From the state's list column (one multiset per key row)."""
        lists = column.combine_chunks()
        flat = pc.list_flatten(lists)
        return cls(pc.list_parent_indices(lists).to_numpy().astype(np.int64),
                   *(flat.field(name).to_numpy(zero_copy_only=False).astype(np.int64)
                     for name in ("v", "w", "c")))

    def merge(self, at: np.ndarray, partial: pa.ChunkedArray) -> _WeightedBag:
        """With each partial row's signed pairs (``list<struct<v: [x, weight], s>>``, NULL
        for a row that carries no weight) added to key row ``at[row]``; pairs whose count
        reaches 0 leave."""
        new_rows, added, signs = _signed_entries(at, partial)
        pairs = [float_keys(as_numbers(pa.chunked_array([pc.list_element(added, j)]), 0)
                            .astype(np.float64)) for j in (0, 1)]
        rows = np.concatenate([self.rows, new_rows])
        values = np.concatenate([self.values, pairs[0]])
        weights = np.concatenate([self.weights, pairs[1]])
        counts = np.concatenate([self.counts, signs])
        if not len(rows):
            return self
        order = np.lexsort((weights, values, rows))
        rows, values, weights = rows[order], values[order], weights[order]
        starts = np.flatnonzero(np.r_[True, (rows[1:] != rows[:-1])
                                      | (values[1:] != values[:-1])
                                      | (weights[1:] != weights[:-1])])
        net = np.add.reduceat(counts[order], starts)
        kept = starts[net > 0]
        return _WeightedBag(rows[kept], values[kept], weights[kept], net[net > 0])

    def percentiles(self, size: int, fraction: float) -> tuple[np.ndarray, np.ndarray]:
        """Each of ``size`` key rows' weighted percentile_cont(``fraction``): each pair as
        many times as its count, as the per-key path lists them; and whether it has none."""
        repeated = np.repeat(np.arange(len(self.rows)), self.counts)
        bounds = np.r_[0, np.cumsum(np.bincount(self.rows[repeated], minlength=size))]
        return window_percentiles(floats_of_keys(self.values[repeated]),
                                  np.ones(len(repeated), bool),
                                  np.arange(len(repeated), dtype=np.int64), bounds, fraction,
                                  weights=floats_of_keys(self.weights[repeated]))

    def column(self, size: int) -> pa.Array:
        """As the state's list column over ``size`` key rows."""
        return _entries_column(self.rows, self.counts, size,
                               v=pa.array(self.values, pa.int64()),
                               w=pa.array(self.weights, pa.int64()))
