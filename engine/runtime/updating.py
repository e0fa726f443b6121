"""Runs an updating aggregate (:class:`~spate.engine.planner.updating.UpdatingAggregate`)
epoch by epoch.

1. Native Spark pre-aggregates the epoch's input per group key into signed
   partials (:meth:`UpdatingAggregateStep.partial_sql`): a withdrawn input row
   counts -1, so retractions flow through; each key gets its ``_spate_key``
   (the key as JSON) and key group.
2. Per key group, the partials are merged into the keys' states
   (:mod:`spate.engine.operators.updating`) and the keys join the group's *pending*
   set.
3. A group whose last flush is at least the flush interval old (or every
   group, once all input ended) flushes: each pending key emits its change
   since its last flush as updating rows (old output withdrawn, new added).
4. Keys whose latest row is ``updating_ttl`` of event time behind the
   watermark are forgotten, their output withdrawn (a key first seen this
   epoch is kept until the next).

Steps 2–4 run in columns (:mod:`spate.engine.runtime.updating_columns`) for
count, sum and avg of numbers, and min and max (of numbers, times, dates and
booleans) over append-only input, grouped by plain keys; this module runs the
others key by key.

State, per key group: operator ``<id>`` holds one :class:`KeyState` per key
(user key: ``(_spate_key,)``); operator ``<id>/flush`` one entry ``()``:
``[last flush (ms), pending keys, a lower bound of the keys' latest event
times]``.

The flush clock is the commit time of the previous epoch, read from the store:
a replayed epoch sees the same clock and state, so it flushes the same keys
and produces the same output.  The first epoch has no clock: it flushes only
with a zero interval (or at the end of input), and the next one flushes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from spate.engine.operators.aggregates import AGGREGATES, make_accumulator
from spate.engine.operators.aggregates.base import plain_type
from spate.engine.operators.updating import Change, KeyState, expire, flush, flush_due, merge
from spate.engine.planner.plan import EVENT_TIME, RETRACT, ROW_KEY, UpdatingAggregate
from spate.engine.runtime import values
from spate.engine.runtime.group_entries import GroupEntries
from spate.engine.runtime.partials import ArrowPartials
from spate.engine.runtime.steps import EpochContext, OperatorStep, StepOutput
from spate.engine.runtime.tasks import (
    RangeWork,
    TaskEpoch,
    TaskStats,
    arrow_schema_to_spark,
    spark_schema_to_arrow,
)
from spate.engine.runtime.updating_columns import UpdatingColumnsRange, columnar
from spate.engine.runtime.watermarks import END_OF_TIME
from spate.statestore import CachedPipelineState, EpochWriter, PipelineState

TIMESTAMP = pa.timestamp("us", tz="UTC")
_NEVER = 2**63


@dataclass
class _KeyRow:
    """One key's signed partial of this epoch."""

    row_key: str
    key: list[Any]
    partial: list[Any]
    seen_us: int | None


@dataclass
class _Changes:
    """The rows the operator emits this epoch, in order."""

    rows: list[tuple[str, list[Any], list[Any], bool, int | None]] = field(default_factory=list)

    def add(self, row_key: str, state: KeyState, change: Change) -> None:
        if change.retract is not None:
            self.rows.append((row_key, state.key, change.retract, True, state.seen_us))
        if change.insert is not None:
            self.rows.append((row_key, state.key, change.insert, False, state.seen_us))


class UpdatingAggregateStep(OperatorStep):
    """A GROUP BY without a window in a query: native signed partials, then the merge,
    flush and expiry in one Spark task per key-group range."""

    def __init__(self, spec: UpdatingAggregate, state: PipelineState,
                 num_key_groups: int) -> None:
        self.spec = spec
        self.state = state
        self.num_key_groups = num_key_groups
        self.operator = UpdatingAggregateOperator(spec, num_key_groups)
        self._clock: tuple[int | None, int] = (None, 0)
        self._columnar: bool | None = None

    def partial_sql(self) -> str:
        return self.operator.partial_sql()

    def run(self, epoch: EpochContext) -> StepOutput:
        partials = epoch.spark.sql(self.operator.partial_sql())
        arrow = spark_schema_to_arrow(partials.schema)
        output = self.operator.output_schema(arrow)
        if self._columnar is None:
            # Decided once a run.  Keys stored one by one by an earlier version keep
            # that path: their state does not move to columns.
            self._columnar = columnar(self.spec, arrow) and not self._keyed_state()
        work: RangeWork = (UpdatingColumnsRange(self.spec, arrow, output) if self._columnar
                           else _UpdatingRange(self.operator, arrow))
        frame, stats = epoch.run_ranges(partials, work, arrow_schema_to_spark(output),
                                        self.spec.operator_id, clock_ms=self._clock_ms(epoch))
        return StepOutput(frame, inputs=(stats,))

    def _keyed_state(self) -> bool:
        """Whether the operator holds state in the per-key layout."""
        entries = self.state.scan(self.operator.records_name, range(self.num_key_groups))
        return next(iter(entries), None) is not None

    def _clock_ms(self, epoch: EpochContext) -> int | None:
        """The commit time of the previous epoch (None before the first commit)."""
        previous = epoch.previous_epoch
        if previous is None:
            return None
        if epoch.update_flush_interval_ms <= 0:
            return 0
        if self._clock[0] != previous:
            metadata = self.state.epoch_metadata(previous)
            self._clock = (previous, int(metadata.get("committed_at_ms", 0)))
        return self._clock[1]


@dataclass(frozen=True)
class _UpdatingRange:
    """An updating aggregate's work on one key-group range, run in a Spark task."""

    operator: UpdatingAggregateOperator
    partial_schema: pa.Schema

    def __call__(self, partials: pa.Table, state: CachedPipelineState, writer: EpochWriter,
                 epoch: TaskEpoch, stats: TaskStats) -> pa.Table:
        by_group = self.operator.rows_by_group(partials)
        changes = _Changes()
        for group in writer.key_groups:
            self.operator.process_group(group, by_group.get(group, []), state, writer, epoch,
                                        changes)
        stats.rows_in = int(pc.sum(partials.column("__count")).as_py() or 0)
        return self.operator.output(self.partial_schema, changes)


class UpdatingAggregateOperator:
    """An updating aggregate's native SQL and its per-key-group logic."""

    def __init__(self, spec: UpdatingAggregate, num_key_groups: int) -> None:
        self.spec = spec
        self.num_key_groups = num_key_groups
        self.accumulators = [make_accumulator(a.function, spec.updating_input, a.fraction)
                             for a in spec.aggregates]
        self.records_name = spec.operator_id
        self.flush_name = f"{spec.operator_id}/flush"

    # -- SQL --------------------------------------------------------------------------

    def partial_sql(self) -> str:
        """Native pre-aggregation of the epoch's input into signed partials per key."""
        keys = [f"`{k}`" for k in self.spec.key_columns]
        sign = f"CASE WHEN `{RETRACT}` THEN -1 ELSE 1 END" if self.spec.updating_input else "1"
        parts = ["count(1) AS `__count`", f"sum({sign}) AS `__rows`",
                 f"max(`{EVENT_TIME}`) AS `__seen`"]
        for i, call in enumerate(self.spec.aggregates):
            function = AGGREGATES[call.function]
            parts.extend(f"{sql} AS `p{i}_{j}`" for j, sql in enumerate(
                function.signed_sql(f"`{call.argument}`", sign, self.spec.updating_input)))
        fields = ", ".join(f"'{k}', `{k}`" for k in self.spec.key_columns)
        row_key = f"to_json(named_struct({fields}))" if keys else "'{}'"
        grouped = (f"SELECT {row_key} AS `__key`, {', '.join([*keys, *parts])} "
                   f"FROM ({self.spec.input_sql}) "
                   f"{'GROUP BY ' + ', '.join(keys) if keys else ''} HAVING count(1) > 0")
        return (f"SELECT *, CAST(pmod(xxhash64(`__key`), {self.num_key_groups}) AS INT) "
                f"AS `__kg` FROM ({grouped})")

    # -- one key group of one epoch ----------------------------------------------------

    def rows_by_group(self, partials: pa.Table) -> dict[int, list[_KeyRow]]:
        keys = [values.to_python(partials.column(k)) for k in self.spec.key_columns]
        columns = [partials.column("__rows").to_pylist()]
        columns += [AGGREGATES[call.function].signed_partials(ArrowPartials(partials, i),
                                                              self.spec.updating_input)
                    for i, call in enumerate(self.spec.aggregates)]
        seen = values.to_python(partials.column("__seen"))
        by_group: dict[int, list[_KeyRow]] = defaultdict(list)
        for index, (row_key, group) in enumerate(zip(partials.column("__key").to_pylist(),
                                                     partials.column("__kg").to_pylist(),
                                                     strict=True)):
            by_group[group].append(_KeyRow(row_key, [column[index] for column in keys],
                                           [column[index] for column in columns], seen[index]))
        return by_group

    def process_group(self, group: int, rows: list[_KeyRow], store: PipelineState,
                      writer: EpochWriter, epoch: TaskEpoch, changes: _Changes) -> None:
        clock_ms, watermark = epoch.clock_ms, epoch.watermark_after
        finishing = watermark >= END_OF_TIME
        meta = GroupEntries.whole(store, self.flush_name, group, epoch.previous_epoch)
        stored_meta = meta.get(())
        last_flush, pending_keys, oldest = stored_meta or [None, [], _NEVER]
        pending = set(pending_keys)
        due = bool(pending or rows) and (finishing or flush_due(
            last_flush, clock_ms, epoch.flush_interval_ms))
        horizon = watermark - self.spec.ttl_us
        expiring = not finishing and oldest <= horizon
        if not rows and not due and not expiring:
            return
        # Expiry walks every key; otherwise only the keys with rows or a pending flush
        # are read.
        records = (GroupEntries.whole(store, self.records_name, group, epoch.previous_epoch)
                   if expiring else GroupEntries.keyed(
                       store, self.records_name, group, epoch.previous_epoch,
                       [(k,) for k in sorted({*pending, *(row.row_key for row in rows)})]))
        states: dict[str, KeyState] = {}
        for row in rows:
            state = self._state(records, states, row.row_key, row.key)
            merge(state, row.partial, row.seen_us, self.accumulators)
            pending.add(row.row_key)
            if state.seen_us is not None:
                oldest = min(oldest, state.seen_us)
        if expiring:
            oldest = self._expire(records, states, pending, horizon, changes)
        if due:
            for row_key in sorted(pending):
                state = self._state(records, states, row_key, None)
                change, keep = flush(state, self.accumulators)
                changes.add(row_key, state, change)
                if not keep:
                    del states[row_key]
                    records.delete((row_key,))
            pending, last_flush = set(), clock_ms
        for row_key, state in states.items():
            records.put((row_key,), state.to_stored())
        records.flush(writer, self.records_name, group)
        new_meta = [last_flush, sorted(pending), oldest]
        if new_meta != stored_meta:
            meta.put((), new_meta)
            meta.flush(writer, self.flush_name, group)

    def _state(self, records: GroupEntries, states: dict[str, KeyState], row_key: str,
               key: list[Any] | None) -> KeyState:
        """The key's state for this epoch (a new one for a key without state)."""
        state = states.get(row_key)
        if state is None:
            stored = records.get((row_key,))
            if stored is not None:
                state = KeyState.from_stored(stored)
            else:
                assert key is not None, "a pending key has state"
                state = KeyState.new(key, self.accumulators)
            states[row_key] = state
        return state

    def _expire(self, records: GroupEntries, states: dict[str, KeyState], pending: set[str],
                horizon: int, changes: _Changes) -> int:
        """Forget keys last seen at or before ``horizon``; return the new oldest."""
        oldest = _NEVER
        for user_key in list(records.keys()):
            row_key = user_key[0]
            state = states.get(row_key)
            if state is None:
                stored = records.get(user_key)
                if stored is None:
                    continue  # deleted earlier this epoch
                state = KeyState.from_stored(stored)
            if state.seen_us is None:
                continue
            if state.seen_us > horizon:
                oldest = min(oldest, state.seen_us)
                continue
            changes.add(row_key, state, expire(state))
            states.pop(row_key, None)
            records.delete(user_key)
            pending.discard(row_key)
        for state in states.values():  # keys first seen this epoch are not stored yet
            if state.seen_us is not None:
                oldest = min(oldest, state.seen_us)
        return oldest

    # -- output -----------------------------------------------------------------------

    def output_schema(self, partial_schema: pa.Schema) -> pa.Schema:
        """Keys ``k<i>``, aggregates ``agg<i>``, then RETRACT, ROW_KEY and event time."""
        fields = [pa.field(k, plain_type(partial_schema.field(k).type))
                  for k in self.spec.key_columns]
        fields += [pa.field(call.output, AGGREGATES[call.function].updating_type(
                       partial_schema.field(f"p{i}_0").type, self.spec.updating_input))
                   for i, call in enumerate(self.spec.aggregates)]
        fields += [pa.field(RETRACT, pa.bool_()), pa.field(ROW_KEY, pa.string()),
                   pa.field(EVENT_TIME, TIMESTAMP)]
        return pa.schema(fields)

    def output(self, partial_schema: pa.Schema, changes: _Changes) -> pa.Table:
        """The changed rows, as :meth:`output_schema` says."""
        schema = self.output_schema(partial_schema)
        fields = list(schema)[:-3]
        rows = changes.rows
        columns = [values.from_python([r[1][i] for r in rows], f.type)
                   for i, f in enumerate(fields[:len(self.spec.key_columns)])]
        columns += [values.from_python([r[2][j] for r in rows], f.type)
                    for j, f in enumerate(fields[len(self.spec.key_columns):])]
        columns += [pa.array([r[3] for r in rows], pa.bool_()),
                    pa.array([r[0] for r in rows], pa.string()),
                    values.from_python([r[4] for r in rows], TIMESTAMP)]
        return pa.Table.from_arrays(columns, schema=schema)
