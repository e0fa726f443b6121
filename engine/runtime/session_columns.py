"""Runs a SESSION window aggregate on one key-group range for one epoch, in columns.

The columnar counterpart of the per-key sessions of :mod:`spate.engine.runtime.window`
for the aggregates :func:`session_columnar` accepts (count, sum and avg of
integers, floats and decimals; min and max of those, times, dates, booleans, text
and bytes; the
variances and the (y, x) aggregates; distinct counts; first and last values;
bit_and, bit_or and bit_xor; array_agg, median and percentile_cont; an aggregate
UDF's rows): one pass of Arrow and NumPy over the range's open sessions and new
partials, with no Python statement per row, key or session.

Native Spark pre-aggregates the rows per key and exact event time ``t``; each
such partial is a one-row session ``[t, t + gap)``.  Per epoch:

* **Late partials.** A new partial is late (dropped, counted) when its own
  session ends at or before the watermark the epoch started with and no open
  session of its key starts at or before that end: it could join nothing still
  open.
  (A key's new partials are taken in event-time order, as the per-key path
  takes them; a late one cannot be rescued by a later one of the same epoch.)
* **Merging.** The open sessions and the accepted partials, sorted by key and
  start, are swept once: ``+1`` at each start, ``-1`` at each end (starts first
  where an end meets a start, as touching sessions merge); a start met with
  nothing open begins a session.  Every interval thus gets its merged
  session's number, and the sessions' partials are segment sums (count, sum;
  of decimals exact, :mod:`~spate.engine.operators.decimal_columns`),
  segment extremes (min, max; NaN as Spark orders it), segment combines of
  moments (variances, (y, x) aggregates), unions of value sets (distinct counts)
  and the least or greatest ranked ``(time, value)`` pair (first and last values)
  over contiguous rows.
* **Firing.** Sessions that end at or before the epoch's watermark fire, in
  time order (end, then start); the others are kept.

State layout in the store (per key group):

* operator ``<id>/session_columns``: one entry ``()`` holding the group's open
  sessions as an Arrow IPC table (keys, key group, start, end, rows, partials);
  rewritten whole when the group changes.
* operator ``<id>/session_timers``: one entry ``()`` holding the earliest end
  of the group's open sessions, so a task reads a group only when the epoch
  brings it rows or one of its sessions is due.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spate.engine.operators.aggregates import AGGREGATES
from spate.engine.operators.aggregates.moments import columns_result, combined_columns
from spate.engine.operators.decimal_columns import as_output, decimal_sums
from spate.engine.operators.window_columns import (
    BITS,
    DISTINCTS,
    EXTREMES,
    JOINED,
    MOMENTS,
    TIMED,
    FiredWindows,
    by_place,
    key_ids,
    ranked_extremes,
    supported,
    window_extremes,
    window_merges,
)
from spate.engine.planner.plan import WindowAggregate
from spate.engine.runtime.output import WINDOW_TYPE
from spate.engine.runtime.tasks import KEY_GROUP, TaskEpoch, TaskStats
from spate.engine.runtime.values import from_ipc, to_ipc
from spate.engine.runtime.window_columns import (
    as_numbers,
    bag_results,
    from_numbers,
    joined_lists,
    merged_bits,
    moment_columns,
    picked_pairs,
    timestamps,
    united_sets,
    worst,
)
from spate.statestore import CachedPipelineState, EpochWriter
from spate.statestore.encoding import decode, encode

PANE = "__pane"
ROWS = "__rows"
#: A stored session's bounds (µs of event time): ``[start, end)``.
START, END = "__start", "__end"
#: Later than any session's end: a group with nothing open.
_NEVER = 2**63 - 1


def session_columnar(spec: WindowAggregate, partial_schema: pa.Schema) -> bool:
    """Whether the SESSION window ``spec`` runs here: plain keys, and aggregates this
    module merges."""
    if any(pa.types.is_nested(partial_schema.field(k).type) for k in spec.key_columns):
        return False
    for i, call in enumerate(spec.aggregates):
        kind = partial_schema.field(f"p{i}_0").type
        if not supported(call.function, kind):
            return False
    return True


@dataclass(frozen=True)
class SessionColumnsRange:
    """A session window's work on one key-group range, run in a Spark task (picklable)."""

    spec: WindowAggregate
    #: the output table's schema (:func:`spate.engine.runtime.output.output_schema`)
    schema: pa.Schema

    @property
    def sessions_name(self) -> str:
        return f"{self.spec.operator_id}/session_columns"

    @property
    def timers_name(self) -> str:
        return f"{self.spec.operator_id}/session_timers"

    def __call__(self, partials: pa.Table, state: CachedPipelineState, writer: EpochWriter,
                 epoch: TaskEpoch, stats: TaskStats) -> pa.Table:
        stats.rows_in = int(pc.sum(partials.column(ROWS)).as_py() or 0)
        timers = state.read_range(self.timers_name, writer.key_groups,
                                  epoch=epoch.previous_epoch)
        new_groups = set(np.unique(partials.column(KEY_GROUP).to_numpy()).tolist())
        touched = []
        for group in writer.key_groups:
            stored = timers[group].get(())
            due = stored is not None and decode(stored) <= epoch.watermark_after
            if due or group in new_groups:
                touched.append(group)
        if not touched:
            return self.schema.empty_table()
        stored_tables = []
        for group in touched:
            raw = state.read_group(self.sessions_name, group,
                                   epoch=epoch.previous_epoch).get(())
            if raw is not None:
                stored_tables.append(from_ipc(raw))
        layout = self._layout(partials.schema)
        opened = partials.rename_columns([START if n == PANE else n for n in partials.column_names])
        opened = opened.append_column(END, pc.add(opened.column(START), self.spec.window.gap_us))
        intervals = pa.concat_tables(
            [t.select(layout.names).cast(layout) for t in [*stored_tables, opened]])
        is_new = np.zeros(intervals.num_rows, dtype=bool)
        is_new[intervals.num_rows - opened.num_rows:] = True
        intervals, keys = self._without_late(intervals, is_new, epoch, stats)
        sessions = self._merged(intervals, keys)
        ends = sessions.column(END).to_numpy()
        fires = ends <= epoch.watermark_after
        self._keep(sessions.filter(pa.array(~fires)), touched, writer)
        return self._output(sessions.filter(pa.array(fires)))

    def _layout(self, partials: pa.Schema) -> pa.Schema:
        """What an interval (a stored session or a new partial) holds, in this order."""
        keys = [partials.field(k) for k in self.spec.key_columns]
        partial_fields = [partials.field(name) for name in self._partial_names()]
        return pa.schema([*keys, pa.field(KEY_GROUP, pa.int32()), pa.field(START, pa.int64()),
                          pa.field(END, pa.int64()), pa.field(ROWS, pa.int64()),
                          *partial_fields])

    def _partial_names(self) -> list[str]:
        """The partial columns, ``p<aggregate>_<part>``, in order."""
        return [f"p{i}_{j}" for i, call in enumerate(self.spec.aggregates)
                for j in range(len(AGGREGATES[call.function].pane_sql()))]

    # -- late partials, merging -----------------------------------------------------

    def _without_late(self, intervals: pa.Table, is_new: np.ndarray, epoch: TaskEpoch,
                      stats: TaskStats) -> tuple[pa.Table, np.ndarray]:
        """``intervals`` sorted by key then start, the late new partials dropped, and
        each remaining row's key number (:func:`key_ids`)."""
        order = pc.sort_indices(intervals, [*((k, "ascending") for k in self.spec.key_columns),
                                            (START, "ascending")])
        intervals, is_new = intervals.take(order), is_new[order.to_numpy()]
        keys = key_ids(intervals, list(self.spec.key_columns))
        starts = intervals.column(START).to_numpy()
        ends = intervals.column(END).to_numpy()
        # Per key, the earliest start of its open sessions (none: never).
        stored_starts = np.where(is_new, _NEVER, starts)
        firsts = np.flatnonzero(np.diff(keys, prepend=-1))
        earliest = np.minimum.reduceat(stored_starts, firsts)[keys] if len(keys) else starts
        late = is_new & (ends <= epoch.watermark_before) & (ends < earliest)
        if not late.any():
            return intervals, keys
        stats.rows_late += int(intervals.column(ROWS).to_numpy()[late].sum())
        keep = ~late
        return intervals.filter(pa.array(keep)), keys[keep]

    def _merged(self, intervals: pa.Table, keys: np.ndarray) -> pa.Table:
        """One row per session: overlapping intervals of a key (``keys``: each row's key
        number, rows sorted by key then start) merged."""
        count = intervals.num_rows
        if count == 0:
            return intervals
        starts = intervals.column(START).to_numpy()
        ends = intervals.column(END).to_numpy()
        # The sweep: a start sorts before an end at the same instant (touching
        # sessions merge); a start with nothing open begins a session.
        positions = np.concatenate([starts, ends])
        is_start = np.concatenate([np.ones(count, dtype=bool), np.zeros(count, dtype=bool)])
        owners = np.concatenate([keys, keys])
        order = np.lexsort((~is_start, positions, owners))
        steps = np.where(is_start[order], 1, -1)
        open_before = np.cumsum(steps) - steps
        begins = is_start[order] & (open_before == 0)
        session_of_event = np.cumsum(begins) - 1
        session = np.empty(count, dtype=np.int64)
        session[order[is_start[order]]] = session_of_event[is_start[order]]
        # Rows are sorted by key and start, so each session's intervals are contiguous.
        first = np.flatnonzero(np.diff(session, prepend=-1))
        stop = np.append(first[1:], count)
        segments = FiredWindows(key_rows=first, end_slots=first, first=first, stop=stop)
        columns: dict[str, pa.Array | pa.ChunkedArray] = {
            name: intervals.column(name).take(pa.array(first))
            for name in (*self.spec.key_columns, KEY_GROUP)}
        columns[START] = pa.array(np.minimum.reduceat(starts, first))
        columns[END] = pa.array(np.maximum.reduceat(ends, first))
        columns[ROWS] = pa.array(np.add.reduceat(intervals.column(ROWS).to_numpy(), first))
        for name in self._partial_names():
            i, j = (int(n) for n in name[1:].split("_"))
            function = self.spec.aggregates[i].function
            if function in MOMENTS:
                if j == 0:
                    moments = window_merges(moment_columns(intervals, i, function), segments,
                                            combined_columns)
                columns[name] = pa.array(moments[j])
                continue
            if function in BITS:
                if j == 0:
                    bits = dict(merged_bits(function, i, intervals, first))
                columns[name] = bits[name]
                continue
            if function in DISTINCTS:
                columns[name] = united_sets(intervals.column(name), session, len(first))
                continue
            if function in JOINED:  # the parts in start order
                columns[name] = joined_lists(intervals.column(name), first)
                continue
            if function in TIMED:
                columns[name] = picked_pairs(intervals.column(name), first,
                                             function == "last_value")
                continue
            columns[name] = _merge_partials(intervals.column(name), segments,
                                            function in EXTREMES and j == 0, function == "max")
        return pa.table(columns).cast(intervals.schema)

    # -- what fires, what is kept ---------------------------------------------------

    def _output(self, fired: pa.Table) -> pa.Table:
        schema = self.schema
        if fired.num_rows == 0:
            return schema.empty_table()
        order = pc.sort_indices(fired, [(END, "ascending"), (START, "ascending")])
        fired = fired.take(order)
        key_count = len(self.spec.key_columns)
        columns: list[pa.Array | pa.ChunkedArray] = [
            fired.column(k).cast(schema.field(i).type)
            for i, k in enumerate(self.spec.key_columns)]
        starts, ends = fired.column(START).to_numpy(), fired.column(END).to_numpy()
        columns.append(pa.StructArray.from_arrays(
            [timestamps(starts), timestamps(ends)], fields=list(WINDOW_TYPE)))
        for i, call in enumerate(self.spec.aggregates):
            kind = schema.field(key_count + 1 + i).type
            first = fired.column(f"p{i}_0")
            if call.function in MOMENTS:
                moments = moment_columns(fired, i, call.function)
                exists = np.ones(fired.num_rows, bool)
                columns.append(columns_result(call.function, moments, exists).cast(kind))
            elif call.function in DISTINCTS:
                columns.append(pc.list_value_length(first).cast(kind))
            elif call.function in JOINED:  # a window of one row
                rows = np.arange(fired.num_rows, dtype=np.int64)
                columns.append(bag_results(call.function, call.fraction, first,
                                           FiredWindows(rows, rows, rows, rows + 1), kind))
            elif call.function in TIMED:
                values = pc.struct_field(first, "v")
                present = first.is_valid()
                columns.append(as_output(pc.if_else(present, values,
                                                    pa.nulls(len(present), values.type)), kind))
            elif call.function == "avg":
                counted = as_numbers(fired.column(f"p{i}_1"), 0)
                totals = as_numbers(first, 0) / np.maximum(counted, 1)
                columns.append(pa.array(totals, mask=counted == 0).cast(kind))
            else:  # count, sum, min, max
                columns.append(as_output(first, kind))
        columns.append(timestamps(ends - 1))
        return pa.Table.from_arrays(columns, schema=schema)

    def _keep(self, kept: pa.Table, touched: list[int], writer: EpochWriter) -> None:
        """Write each touched group's open sessions and timer (or delete them)."""
        groups = kept.column(KEY_GROUP).to_numpy()
        ends = kept.column(END).to_numpy()
        for group in touched:
            mine = groups == group
            if not mine.any():
                writer.delete(self.sessions_name, group, ())
                writer.delete(self.timers_name, group, ())
                continue
            writer.put(self.sessions_name, group, (), to_ipc(kept.filter(pa.array(mine))))
            writer.put(self.timers_name, group, (), encode(int(ends[mine].min())))


def _merge_partials(column: pa.ChunkedArray, segments: FiredWindows, extreme: bool,
                    largest: bool) -> pa.Array:
    """Per segment of rows, the merged partial: the sum (NULL where every row's is), or
    the least or greatest; of decimals exactly."""
    valid = np.add.reduceat(column.is_valid().to_numpy(zero_copy_only=False).astype(np.int64),
                            segments.first)
    exact = pa.types.is_decimal(column.type)
    if extreme and (exact or by_place(column.type)):  # decimals, text, bytes: by their order
        return ranked_extremes(column, lambda places: window_extremes(places, segments, largest),
                               largest)
    if exact:
        return decimal_sums(column, lambda words: np.add.reduceat(words, segments.first),
                            valid == 0, column.type)
    if extreme:
        numbers = as_numbers(column, worst(column.type, largest))
        merged = window_extremes(numbers, segments, largest)
    else:
        merged = np.add.reduceat(as_numbers(column, 0), segments.first)
    return from_numbers(merged, valid == 0, column.type, column.type)
