"""Runs a TUMBLE/HOP window aggregate on one key-group range for one epoch, in columns.

The columnar counterpart of :mod:`spate.engine.runtime.window` for the
aggregates :func:`spate.engine.operators.window_columns.supported` computes
(count, sum, avg, min, max (of text and bytes too), the variances and the (y, x)
aggregates, distinct counts, first and last values, bit_and, bit_or and bit_xor,
array_agg, median and percentile_cont, and the argument rows of aggregate UDFs): one pass
of Arrow and NumPy over the range's panes, with no Python statement per row,
key or fired window.

State layout in the store (per key group):

* operator ``<id>/pane_columns``: the group's pane partials as Arrow IPC
  tables, one entry ``(chunk, epoch)`` per epoch that added panes to a chunk
  of :data:`PANES_PER_CHUNK` slides.  Entries are written once and never
  read back to be changed: an epoch that fires nothing in a group only adds
  an entry (a cold task reads nothing of it).  A (key, pane) split over
  several entries is merged when read.  A chunk's entries are deleted
  together once every window of the panes they hold has fired, and folded
  into one entry when a chunk collects more than :data:`ENTRIES_PER_CHUNK`.
* operator ``<id>/pane_timers``: per key group, one entry ``()`` holding the
  end of the earliest window still to fire in the group.

A group whose timer is due by the epoch's watermark (or whose new rows are)
is read whole; every due group of the range is then fired at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.engine.operators.aggregates import AGGREGATES
from spate.engine.operators.aggregates.moments import (
    MOMENT_COLUMNS,
    columns_result,
    combined_columns,
)
from spate.engine.operators.decimal_columns import as_output, decimal_sums, doubles
from spate.engine.operators.window_columns import (
    BITS,
    BITWISE,
    COUNTS,
    DISTINCTS,
    EXTREMES,
    JOINED,
    MOMENTS,
    SUMS,
    TIMED,
    UDAF_ROWS,
    FiredWindows,
    by_place,
    fired_windows,
    key_ids,
    pair_ranks,
    ranked,
    ranked_extremes,
    supported,
    value_ids,
    window_bits,
    window_distinct,
    window_extremes,
    window_merges,
    window_percentiles,
    window_positions,
    window_sums,
    window_timed,
)
from spate.engine.planner.plan import WindowAggregate
from spate.engine.runtime.output import TIMESTAMP, WINDOW_TYPE
from spate.engine.runtime.tasks import KEY_GROUP, TaskEpoch, TaskStats
from spate.engine.runtime.values import from_ipc, to_ipc
from spate.statestore import CachedPipelineState, EpochWriter, UserKey
from spate.statestore.encoding import decode, encode

#: Consecutive slides whose panes share state entries.
PANES_PER_CHUNK = 64
#: Entries of one chunk beyond which a firing epoch folds them into one.
ENTRIES_PER_CHUNK = 8
#: Later than any window end: a group with nothing buffered.
_NEVER = 2**63 - 1
PANE = "__pane"
ROWS = "__rows"
_PANE_ID = "__pane_id"
#: The aggregates whose pane partials combine other than by sum, min or max.
_COMBINED = MOMENTS | DISTINCTS | TIMED | BITS | JOINED


def columnar(spec: WindowAggregate, partial_schema: pa.Schema) -> bool:
    """Whether ``spec`` runs here: a TUMBLE or HOP of columnar aggregates only."""
    if spec.window.kind == "session":
        return False
    if any(pa.types.is_nested(partial_schema.field(k).type) for k in spec.key_columns):
        return False  # grouped by value in Arrow, which takes plain keys only
    return all(supported(call.function, partial_schema.field(f"p{i}_0").type)
               for i, call in enumerate(spec.aggregates))


@dataclass(frozen=True)
class WindowColumnsRange:
    """A window operator's work on one key-group range, run in a Spark task (picklable)."""

    spec: WindowAggregate
    #: the output table's schema (:func:`spate.engine.runtime.output.output_schema`)
    schema: pa.Schema

    @property
    def panes_name(self) -> str:
        return f"{self.spec.operator_id}/pane_columns"

    @property
    def timers_name(self) -> str:
        return f"{self.spec.operator_id}/pane_timers"

    def __call__(self, partials: pa.Table, state: CachedPipelineState, writer: EpochWriter,
                 epoch: TaskEpoch, stats: TaskStats) -> pa.Table:
        slide, width = self.spec.window.slide_us, self.spec.window.width_us
        chunk_us = PANES_PER_CHUNK * slide
        rows = partials.column(ROWS).to_numpy()
        stats.rows_in = int(rows.sum())
        late = partials.column(PANE).to_numpy() + width <= epoch.watermark_before
        if late.any():
            stats.rows_late += int(rows[late].sum())
            partials = partials.filter(pa.array(~late))
        new_by_group = _split_by_group(partials, chunk_us)

        timers = state.read_range(self.timers_name, writer.key_groups,
                                  epoch=epoch.previous_epoch)
        open_before = _first_open_end(epoch.watermark_before, slide)
        due: list[int] = []
        for group in writer.key_groups:
            stored = timers[group].get(())
            held = _NEVER if stored is None else decode(stored)
            new = new_by_group.get(group, {})
            earliest = min([held, *(max(int(pc.min(t.column(PANE)).as_py()) + slide,
                                        open_before) for t in new.values())])
            if earliest <= epoch.watermark_after:
                due.append(group)
                continue
            for chunk, table in new.items():
                writer.put(self.panes_name, group, (chunk, epoch.number), to_ipc(table))
            if earliest != held:
                writer.put(self.timers_name, group, (), encode(earliest))
        if not due:
            return self._empty()

        stored_entries = {group: state.read_group(self.panes_name, group,
                                                  epoch=epoch.previous_epoch)
                          for group in due}
        tables = [from_ipc(raw) for group in due for raw in stored_entries[group].values()]
        tables += [t for group in due for t in new_by_group.get(group, {}).values()]
        panes = self._merged(tables, partials.schema)
        output = self._fire(panes, epoch)
        self._keep(panes, due, stored_entries, new_by_group, writer, epoch)
        return output

    # -- merging and firing ---------------------------------------------------------

    def _merged(self, tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
        """One row per (key, pane), sorted by key then pane."""
        keys = list(self.spec.key_columns)
        table = pa.concat_tables([t if t.schema.equals(schema) else
                                  t.select(schema.names).cast(schema) for t in tables])
        table = table.sort_by([*((k, "ascending") for k in keys), (PANE, "ascending")])
        panes = _pane_ids(table, keys)
        if table.num_rows == 0 or int(panes[-1]) + 1 == table.num_rows:
            return table  # every (key, pane) once: nothing to merge
        # A pane split over entries (filled over several epochs): its parts combined.
        firsts = np.flatnonzero(np.diff(panes, prepend=-1))
        merged = table.take(pa.array(firsts))
        aggregations = [(ROWS, "sum")]
        for i, call in enumerate(self.spec.aggregates):
            if call.function in _COMBINED:
                continue
            for j in range(len(AGGREGATES[call.function].pane_sql())):
                merge = call.function if call.function in EXTREMES and j == 0 else "sum"
                aggregations.append((f"p{i}_{j}", merge))
        grouped = table.append_column(_PANE_ID, pa.array(panes)) \
            .group_by([_PANE_ID], use_threads=False).aggregate(aggregations).sort_by(_PANE_ID)
        for column, how in aggregations:
            values = grouped.column(f"{column}_{how}")
            merged = merged.set_column(merged.schema.get_field_index(column),
                                       pa.field(column, values.type), values)
        for i, call in enumerate(self.spec.aggregates):
            for name, values in _combined(call.function, i, table, panes, firsts):
                merged = merged.set_column(merged.schema.get_field_index(name),
                                           pa.field(name, values.type), values)
        return merged

    def _fire(self, panes: pa.Table, epoch: TaskEpoch) -> pa.Table:
        slide = self.spec.window.slide_us
        per_window = self.spec.window.width_us // slide
        keys = key_ids(panes, list(self.spec.key_columns))
        slots = panes.column(PANE).to_numpy() // slide
        first_end = _first_open_end(epoch.watermark_before, slide) // slide
        last_end = epoch.watermark_after // slide
        fired = fired_windows(keys, slots, per_window, first_end, last_end)
        return self._output(panes, fired, keys, slots)

    def _output(self, panes: pa.Table, fired: FiredWindows, keys: np.ndarray,
                slots: np.ndarray) -> pa.Table:
        """The fired windows' rows (``keys``, ``slots``: each pane's key number and slot)."""
        schema = self.schema
        slide = self.spec.window.slide_us
        key_count = len(self.spec.key_columns)
        taken = panes.select(list(self.spec.key_columns)).take(pa.array(fired.key_rows))
        columns: list[pa.Array | pa.ChunkedArray] = [
            taken.column(i).cast(schema.field(i).type) for i in range(key_count)]
        ends = fired.end_slots * slide
        starts = ends - self.spec.window.width_us
        columns.append(pa.StructArray.from_arrays(
            [timestamps(starts), timestamps(ends)], fields=list(WINDOW_TYPE)))
        for i, call in enumerate(self.spec.aggregates):
            kind = schema.field(key_count + 1 + i).type
            if call.function in DISTINCTS:
                columns.append(pa.array(window_distinct(
                    keys, slots, panes.column(f"p{i}_0"),
                    self.spec.window.width_us // slide, fired), kind))
                continue
            if call.function in JOINED:
                columns.append(bag_results(call.function, call.fraction,
                                           panes.column(f"p{i}_0"), fired, kind))
                continue
            columns.append(_aggregate(call.function, panes, i, fired, kind))
        columns.append(timestamps(ends - 1))
        return pa.Table.from_arrays(columns, schema=schema)

    def _empty(self) -> pa.Table:
        return self.schema.empty_table()

    # -- what the state keeps -------------------------------------------------------

    def _keep(self, panes: pa.Table, due: list[int],
              stored: Mapping[int, Mapping[UserKey, bytes]],
              new_by_group: Mapping[int, Mapping[int, pa.Table]], writer: EpochWriter,
              epoch: TaskEpoch) -> None:
        """Stage the due groups' new panes, drop chunks whose windows all fired, fold
        crowded ones, and set each group's timer."""
        slide, width = self.spec.window.slide_us, self.spec.window.width_us
        chunk_us = PANES_PER_CHUNK * slide
        watermark = epoch.watermark_after
        pane_starts = panes.column(PANE).to_numpy()
        groups = panes.column(KEY_GROUP).to_numpy()
        chunks = pane_starts // chunk_us
        live = pane_starts + width > watermark
        earliest = _min_by_group(groups[live], pane_starts[live])
        open_after = _first_open_end(watermark, slide)
        holding = set(zip(groups[live].tolist(), chunks[live].tolist(), strict=True))
        for group in due:
            entries: dict[int, list[UserKey]] = defaultdict(list)
            for key in stored[group]:
                entries[int(key[0])].append(key)
            new = new_by_group.get(group, {})
            for chunk in set(entries) | set(new):
                old = entries.get(chunk, [])
                if (group, chunk) not in holding:
                    # Every window of the chunk's panes has fired.
                    for key in old:
                        writer.delete(self.panes_name, group, key)
                elif len(old) + (chunk in new) > ENTRIES_PER_CHUNK:
                    mask = (groups == group) & (chunks == chunk) & live
                    writer.put(self.panes_name, group, (chunk, epoch.number),
                               to_ipc(panes.filter(pa.array(mask))))
                    for key in old:
                        if tuple(key) != (chunk, epoch.number):
                            writer.delete(self.panes_name, group, key)
                elif chunk in new:
                    writer.put(self.panes_name, group, (chunk, epoch.number),
                               to_ipc(new[chunk]))
            if group in earliest:
                writer.put(self.timers_name, group, (),
                           encode(max(earliest[group] + slide, open_after)))
            else:
                writer.delete(self.timers_name, group, ())


def _aggregate(function: str, panes: pa.Table, index: int, fired: FiredWindows,
               kind: pa.DataType) -> pa.Array:
    """One aggregate's value per fired window, as the output column ``kind``."""
    if function in MOMENTS:
        merged = window_merges(moment_columns(panes, index, function), fired, combined_columns)
        return columns_result(function, merged, np.ones(len(fired), bool)).cast(kind)
    if function in TIMED:
        pairs = panes.column(f"p{index}_0")
        rows, present = window_timed(pairs, fired, function == "last_value")
        values = pc.struct_field(pairs.take(pa.array(rows)), "v")
        return as_output(pc.if_else(pa.array(present), values,
                                    pa.nulls(len(present), values.type)), kind)
    first = panes.column(f"p{index}_0")
    if function in BITS:
        counted = window_sums(as_numbers(panes.column(f"p{index}_1"), 0), fired)
        values = window_bits(as_numbers(first, BITWISE[function][1]), fired, function)
        return pa.array(values, mask=counted == 0).cast(kind)
    if function in COUNTS:
        return pa.array(window_sums(as_numbers(first, 0), fired), kind)
    if function in SUMS:
        counted = window_sums(as_numbers(panes.column(f"p{index}_1"), 0), fired)
        totals = _sums(first, fired)
        if function == "avg":
            totals = totals / np.maximum(counted, 1)
        return pa.array(totals, mask=counted == 0).cast(kind)
    largest = function == "max"
    if by_place(first.type):  # text, bytes
        return ranked_extremes(first, lambda places: window_extremes(places, fired, largest),
                               largest).cast(kind)
    valid = window_sums(first.is_valid().to_numpy(zero_copy_only=False).astype(np.int64),
                        fired)
    numbers = as_numbers(first, worst(first.type, largest))
    extremes = window_extremes(numbers, fired, largest)
    return from_numbers(extremes, valid == 0, first.type, kind)


def _sums(partials: pa.ChunkedArray, fired: FiredWindows) -> np.ndarray:
    """Per fired window, the sum of its panes' ``partials`` as doubles: of decimals, the
    exact sum rounded once."""
    if pa.types.is_decimal(partials.type):
        exact = decimal_sums(partials, lambda words: window_sums(words, fired),
                             np.zeros(len(fired), bool), pa.float64())
        totals: np.ndarray = exact.to_numpy(zero_copy_only=False)
        return totals
    return window_sums(as_numbers(partials, 0), fired)


def _pane_ids(table: pa.Table, key_columns: list[str]) -> np.ndarray:
    """Per row of ``table`` (sorted by key, then pane), the number of its (key, pane)."""
    keys = key_ids(table, key_columns)
    starts = table.column(PANE).to_numpy()
    changed = np.ones(len(keys), bool)
    changed[1:] = (keys[1:] != keys[:-1]) | (starts[1:] != starts[:-1])
    return np.cumsum(changed, dtype=np.int64) - 1


def _combined(function: str, index: int, table: pa.Table, panes: np.ndarray,
              firsts: np.ndarray) -> list[tuple[str, pa.Array]]:
    """Aggregate ``index``'s partial columns combined per (key, pane) (``panes``: each
    row's number; ``firsts``: each one's first row), where they are not sums, minima or
    maxima: (co-)moments, sets of values, first or last ``(time, value)`` pairs, the
    values of bit_and, bit_or and bit_xor, lists of values."""
    if function in MOMENTS:
        moments = _merge_moments(moment_columns(table, index, function), panes, firsts)
        return [(f"p{index}_{j}", pa.array(values)) for j, values in enumerate(moments)]
    name = f"p{index}_0"
    if function in DISTINCTS:
        return [(name, united_sets(table.column(name), panes, len(firsts)))]
    if function in TIMED:
        return [(name, picked_pairs(table.column(name), firsts, function == "last_value"))]
    if function in BITS:
        return merged_bits(function, index, table, firsts)
    if function in JOINED:
        return [(name, joined_lists(table.column(name), firsts))]
    return []


def _lengths(lists: pa.Array) -> np.ndarray:
    """Each list's length (a NULL list's 0)."""
    lengths: np.ndarray = pc.fill_null(pc.list_value_length(lists), 0).to_numpy() \
        .astype(np.int64)
    return lengths


def joined_lists(lists: pa.ChunkedArray, firsts: np.ndarray) -> pa.Array:
    """Per run of rows starting at ``firsts``, its rows' lists one after another."""
    flat = lists.combine_chunks()
    offsets = np.concatenate([np.zeros(1, np.int64),
                              np.cumsum(np.add.reduceat(_lengths(flat), firsts))])
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pc.list_flatten(flat),
                                    type=lists.type)


def bag_results(function: str, fraction: float | None, lists: pa.ChunkedArray,
                fired: FiredWindows, kind: pa.DataType) -> pa.Array:
    """array_agg, median or percentile_cont (``fraction``; also weighted) per fired window,
    over its panes' ``lists`` of ``struct<v>`` (NULL values kept; the percentiles skip
    them); or an aggregate UDF's rows (``udaf_rows``: ``lists`` of rows), its panes'
    rows in time order."""
    flat = lists.combine_chunks()
    offsets = np.concatenate([np.zeros(1, np.int64), np.cumsum(_lengths(flat))])
    positions, bounds = window_positions(offsets, fired)
    if function in UDAF_ROWS:
        return pa.ListArray.from_arrays(pa.array(bounds, pa.int32()),
                                        pc.list_flatten(flat).take(pa.array(positions))
                                        ).cast(kind)
    values = pc.struct_field(pc.list_flatten(flat), "v")
    empty = pa.array(np.diff(bounds) == 0)
    if function == "array_agg":
        return pa.ListArray.from_arrays(pa.array(bounds, pa.int32()),
                                        values.take(pa.array(positions)),
                                        mask=empty).cast(kind)
    valid = values.is_valid().to_numpy(zero_copy_only=False)
    fraction = 0.5 if fraction is None else fraction
    if function == "percentile_cont_weighted":  # values: [x, weight]
        result, missing = window_percentiles(
            as_numbers(pc.list_element(values, 0), 0), valid, positions, bounds, fraction,
            weights=as_numbers(pc.list_element(values, 1), 0))
    else:
        result, missing = window_percentiles(as_numbers(values, 0), valid, positions, bounds,
                                             fraction)
    return pa.array(result, mask=missing).cast(kind)


def merged_bits(function: str, index: int, table: pa.Table,
                firsts: np.ndarray) -> list[tuple[str, pa.Array]]:
    """Bitwise aggregate ``index``'s partials (its value, NULL without values, and
    their count) combined per run of ``table``'s rows starting at ``firsts``."""
    operation, identity = BITWISE[function]
    value_name, count_name = f"p{index}_0", f"p{index}_1"
    counts = np.add.reduceat(as_numbers(table.column(count_name), 0), firsts)
    values = operation.reduceat(as_numbers(table.column(value_name), identity), firsts)
    return [(value_name, pa.array(values, mask=counts == 0)
             .cast(table.schema.field(value_name).type)),
            (count_name, pa.array(counts).cast(table.schema.field(count_name).type))]


def picked_pairs(pairs: pa.ChunkedArray, firsts: np.ndarray, latest: bool) -> pa.Array:
    """Per run of rows starting at ``firsts``, its earliest (``latest``: latest)
    ``(time, value)`` pair."""
    ranks, valid = pair_ranks(pairs)
    pick = (np.maximum if latest else np.minimum).reduceat(ranked(ranks, valid, latest), firsts)
    rows = np.zeros(len(ranks), dtype=np.int64)
    rows[ranks] = np.arange(len(ranks))
    chosen = pairs.take(pa.array(rows[np.clip(pick, 0, len(ranks) - 1)]))
    none = pa.array((pick < 0) | (pick >= len(ranks)))
    return pc.if_else(none, pa.nulls(len(none), pairs.type), chosen).combine_chunks()


def united_sets(sets: pa.ChunkedArray, panes: np.ndarray, count: int) -> pa.Array:
    """Per (key, pane) (``panes``: each row's number, ``count`` of them), the union of
    its rows' sets of values."""
    rows, ids, values = value_ids(sets)
    owners = panes[rows]
    order = np.lexsort((ids, owners))
    owners, ids = owners[order], ids[order]
    first = np.ones(len(ids), dtype=bool)
    first[1:] = (owners[1:] != owners[:-1]) | (ids[1:] != ids[:-1])
    offsets = np.concatenate([[0], np.cumsum(np.bincount(owners[first], minlength=count))])
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()),
                                    values.take(pa.array(order[first])), type=sets.type)


def moment_columns(panes: pa.Table, index: int, function: str) -> list[np.ndarray]:
    """Aggregate ``index``'s pane partials, (co-)moments, as NumPy columns."""
    width = MOMENT_COLUMNS[str(AGGREGATES[function].columnar)]
    columns = [as_numbers(panes.column(f"p{index}_{j}"), 0) for j in range(width)]
    return [columns[0].astype(np.int64), *columns[1:]]


def _merge_moments(moments: list[np.ndarray], panes: np.ndarray,
                   firsts: np.ndarray) -> list[np.ndarray]:
    """Per (key, pane) (``panes``: each row's, sorted; ``firsts``: each one's first row),
    its rows' moments combined, in row order: one vector combine per row of the most
    split pane."""
    rank = np.arange(len(panes)) - firsts[panes]
    merged = [column[firsts] for column in moments]
    for depth in range(1, int(rank.max()) + 1):
        rows = np.flatnonzero(rank == depth)
        at = panes[rows]
        combined = combined_columns([column[at] for column in merged],
                                    [column[rows] for column in moments])
        for column, values in zip(merged, combined, strict=True):
            column[at] = values
    return merged


def as_numbers(column: pa.ChunkedArray, fill: float | int) -> np.ndarray:
    """``column`` (NULLs as ``fill``) as a NumPy array of int64 (integers, times,
    booleans) or float64 (floats, decimals)."""
    kind = column.type
    if pa.types.is_decimal(kind):
        column = doubles(column)
    elif pa.types.is_floating(kind):
        column = column.cast(pa.float64())
    elif pa.types.is_timestamp(kind):
        column = column.cast(pa.timestamp("us", tz=kind.tz)).cast(pa.int64())
    elif pa.types.is_date32(kind):
        column = column.cast(pa.int32()).cast(pa.int64())
    else:
        column = column.cast(pa.int64())
    numbers: np.ndarray = column.fill_null(fill).to_numpy()
    return numbers


def worst(kind: pa.DataType, largest: bool) -> float | int:
    """The value every other beats: what a NULL partial counts as in a min or max."""
    if pa.types.is_decimal(kind) or pa.types.is_floating(kind):
        return -np.inf if largest else np.inf
    info = np.iinfo(np.int64)
    return int(info.min) if largest else int(info.max)


def from_numbers(numbers: np.ndarray, nulls: np.ndarray, partial: pa.DataType,
                 kind: pa.DataType) -> pa.Array:
    """What :func:`as_numbers` made of a ``partial`` column, back as ``kind``."""
    array = pa.array(numbers, mask=nulls)
    if pa.types.is_timestamp(partial):
        return array.cast(pa.timestamp("us", tz=partial.tz)).cast(kind)
    if pa.types.is_date32(partial):
        return array.cast(pa.int32()).cast(kind)
    if pa.types.is_boolean(partial):
        return pc.not_equal(array, 0).cast(kind)
    return array.cast(kind)


def timestamps(micros: np.ndarray) -> pa.Array:
    return pa.array(micros, pa.int64()).cast(TIMESTAMP)


def _first_open_end(watermark: int, slide: int) -> int:
    """The end of the first window not yet fired at ``watermark``."""
    return (watermark // slide + 1) * slide


def _split_by_group(table: pa.Table, chunk_us: int) -> dict[int, dict[int, pa.Table]]:
    """``table``'s rows by key group, then by chunk of panes."""
    if table.num_rows == 0:
        return {}
    groups = table.column(KEY_GROUP).to_numpy().astype(np.int64)
    chunks = table.column(PANE).to_numpy() // chunk_us
    order = np.lexsort((chunks, groups))
    ordered = table.take(pa.array(order))
    groups, chunks = groups[order], chunks[order]
    bounds = np.flatnonzero((groups[1:] != groups[:-1]) | (chunks[1:] != chunks[:-1])) + 1
    starts = np.concatenate([[0], bounds])
    stops = np.concatenate([bounds, [len(order)]])
    split: dict[int, dict[int, pa.Table]] = defaultdict(dict)
    for start, stop in zip(starts.tolist(), stops.tolist(), strict=True):
        split[int(groups[start])][int(chunks[start])] = ordered.slice(start, stop - start)
    return split


def _min_by_group(groups: np.ndarray, values: np.ndarray) -> dict[int, int]:
    """The least of ``values`` per group."""
    if len(groups) == 0:
        return {}
    order = np.lexsort((values, groups))
    groups, values = groups[order], values[order]
    firsts = np.concatenate([[0], np.flatnonzero(groups[1:] != groups[:-1]) + 1])
    return dict(zip(groups[firsts].tolist(), values[firsts].tolist(), strict=True))

