"""Runs one window-aggregate operator for one epoch.

The input rows are placed by their key-group range's task, then native Spark
computes the pane partials (:meth:`WindowOperatorRunner.partials`) in the same
partitions;
windows of the aggregates :func:`spate.engine.operators.window_columns.supported`
takes (and in TUMBLE and HOP an aggregate UDF's rows) then run in columns
(:mod:`spate.engine.runtime.window_columns` for TUMBLE and HOP,
:mod:`spate.engine.runtime.session_columns` for SESSION).  This module runs the
others — e.g. aggregates of nested values — and state an
earlier version kept per key: it merges the partials
into the operator's state, key group by key group, fires the windows the
watermark closed, and stages what changed for the epoch.

State layout in the store (per key group):

* operator ``<id>``: one record per key — a :class:`SlidingKeyState`, or for
  SESSION the key's open sessions;
* operator ``<id>/panes``: the pane partials of TUMBLE/HOP, one entry per
  ``(*key, chunk)`` holding up to :data:`PANES_PER_CHUNK` consecutive panes.

* operator ``<id>/timers``: per key group, one entry ``()`` holding the
  earliest window end buffered in the group, so a task reads a group's keys
  only when the epoch touches them or a window of the group is due.

The merge runs in Spark tasks, one per key-group range (:mod:`.tasks`).
A group whose timer is due is read whole (every buffered key may fire); in
any other group only the keys with new rows (and their pane chunks) are read,
in one batch, so a cold task pays for what its epoch touches.  Reads go
through the statestore's process-local cache, so this module keeps no copy of
the state between epochs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spate.engine.operators.aggregates import AGGREGATES, make_aggregate
from spate.engine.operators.session import SessionWindow
from spate.engine.operators.window import Fired, Partial, SlidingKeyState, SlidingWindow
from spate.engine.planner.plan import EVENT_TIME, WindowAggregate
from spate.engine.runtime import values
from spate.engine.runtime.group_entries import GroupEntries
from spate.engine.runtime.output import fired_table, output_schema
from spate.engine.runtime.partials import ArrowPartials
from spate.engine.runtime.session_columns import SessionColumnsRange, session_columnar
from spate.engine.runtime.steps import EpochContext, OperatorStep, StepOutput
from spate.engine.runtime.tasks import (
    KEY_GROUP,
    ROUTING_COLUMNS,
    RangeWork,
    TaskEpoch,
    TaskStats,
    arrow_schema_to_spark,
    spark_schema_to_arrow,
)
from spate.engine.runtime.window_columns import WindowColumnsRange, columnar
from spate.statestore import CachedPipelineState, EpochWriter, PipelineState, UserKey
from spate.statestore.encoding import decode, encode

#: Consecutive panes of a key kept in one state entry.
PANES_PER_CHUNK = 64
#: Later than any window end: a group with nothing buffered.
_NEVER = 2**63
#: (key, pane start or event time, pane partial)
PaneRow = tuple[tuple[Any, ...], int, Partial]
FiredRow = tuple[tuple[Any, ...], Fired]


class _KeyPanes:
    """The panes of one key, as :class:`spate.engine.operators.window.Panes`.

    Panes are stored in chunks of :data:`PANES_PER_CHUNK` consecutive slides,
    one state entry ``(*key, chunk)`` each holding ``{pane start: partial}``, so
    the store sees about one write per chunk and epoch rather than one per pane.
    """

    def __init__(self, entries: GroupEntries, key: tuple[Any, ...], chunk_us: int) -> None:
        self.entries = entries
        self.key = key
        self.chunk_us = chunk_us

    def _entry(self, pane: int) -> UserKey:
        return (*self.key, pane // self.chunk_us)

    def get(self, pane: int) -> Partial | None:
        chunk = self.entries.get(self._entry(pane))
        return None if chunk is None else chunk.get(pane)

    def put(self, pane: int, partial: Partial) -> None:
        entry = self._entry(pane)
        chunk = self.entries.get(entry)
        chunk = {} if chunk is None else chunk
        chunk[pane] = partial
        self.entries.put(entry, chunk)

    def delete(self, pane: int) -> None:
        entry = self._entry(pane)
        chunk = self.entries.get(entry)
        if chunk is None or pane not in chunk:
            return
        del chunk[pane]
        if chunk:
            self.entries.put(entry, chunk)
        else:
            self.entries.delete(entry)


class WindowOperatorRunner:
    """One windowed aggregate of a pipeline: its native SQL, and one key-group range's
    merge and firing for one epoch."""

    def __init__(self, spec: WindowAggregate, num_key_groups: int) -> None:
        self.spec = spec
        self.num_key_groups = num_key_groups
        self.aggregates = [make_aggregate(a.function, a.fraction) for a in spec.aggregates]
        window = spec.window
        self.session = window.kind == "session"
        self.sliding = SlidingWindow(window.width_us, window.slide_us, self.aggregates)
        self.sessions = SessionWindow(window.gap_us, self.aggregates)
        self.records_name = spec.operator_id
        self.panes_name = f"{spec.operator_id}/panes"
        self.timers_name = f"{spec.operator_id}/timers"
        self.chunk_us = PANES_PER_CHUNK * max(window.slide_us, 1)
        #: the pre-aggregation's expressions (:meth:`partials`), built on first use
        self._partial_columns: list[Column] | None = None

    # -- SQL --------------------------------------------------------------------

    def pane_rows_sql(self, source_sql: str) -> str:
        """The operator's input rows with their pane and key group (rows without an
        event time belong to no window)."""
        keys = [f"`{k}`" for k in self.spec.key_columns]
        micros = f"unix_micros(`{EVENT_TIME}`)"
        slide = self.spec.window.slide_us
        pane = micros if self.session else f"({micros} - pmod({micros}, {slide}))"
        hashed = f"xxhash64({', '.join(keys)})" if keys else "0"
        return (f"SELECT *, {pane} AS `__pane`, "
                f"CAST(pmod({hashed}, {self.num_key_groups}) AS INT) AS `{KEY_GROUP}` "
                f"FROM ({source_sql}) WHERE `{EVENT_TIME}` IS NOT NULL")

    def partials(self, rows: DataFrame, placed_by: tuple[str, ...] = ()) -> DataFrame:
        """Native pre-aggregation of :meth:`pane_rows_sql`'s rows into pane partials,
        grouped by the columns ``placed_by`` too (what placed the rows in their
        partitions, so that the aggregate keeps that placement)."""
        if self._partial_columns is None:
            # Built once: parsing each aggregate's partial expressions every epoch cost
            # JVM calls per aggregate (most of the step's driver time with 35 of them).
            parts = [F.count(F.lit(1)).alias("__rows")]
            for i, call in enumerate(self.spec.aggregates):
                for j, template in enumerate(AGGREGATES[call.function].pane_sql()):
                    parts.append(F.expr(template.format(a=f"`{call.argument}`"))
                                 .alias(f"p{i}_{j}"))
            self._partial_columns = parts
        groups = [*self.spec.key_columns, "__pane", KEY_GROUP, *placed_by]
        return rows.groupBy(*(F.col(f"`{g}`") for g in groups)).agg(*self._partial_columns)

    # -- one range of one epoch ---------------------------------------------------

    def process(self, partials: pa.Table, state: CachedPipelineState, writer: EpochWriter,
                epoch: TaskEpoch, stats: TaskStats) -> list[FiredRow]:
        """Merge one range's partials, fire closed windows, stage changed state."""
        rows_by_group = self._rows_by_group(partials)
        timers = state.read_range(self.timers_name, writer.key_groups,
                                  epoch=epoch.previous_epoch)
        fired: list[FiredRow] = []
        for group in writer.key_groups:
            stored = timers[group].get(())
            next_fire = _NEVER if stored is None else decode(stored)
            new_rows = rows_by_group.get(group, [])
            due = next_fire <= epoch.watermark_after
            if new_rows or due:
                earliest = self._process_group(group, new_rows, due, next_fire, state, writer,
                                               epoch, fired, stats)
                if earliest != next_fire:
                    if earliest == _NEVER:
                        writer.delete(self.timers_name, group, ())
                    else:
                        writer.put(self.timers_name, group, (), encode(earliest))
        # Windows in time order; keys within a window as they came (a stable sort,
        # which costs far less than ordering arbitrary key values).
        fired.sort(key=lambda item: (item[1].end_us, item[1].start_us))
        return fired

    def _rows_by_group(self, partials: pa.Table) -> dict[int, list[PaneRow]]:
        key_count = len(self.spec.key_columns)
        keys = [values.to_python(partials.column(i)) for i in range(key_count)]
        panes = partials.column("__pane").to_pylist()
        groups = partials.column(KEY_GROUP).to_pylist()
        rows = partials.column("__rows").to_pylist()
        columns = [AGGREGATES[call.function].pane_partials(ArrowPartials(partials, i))
                   for i, call in enumerate(self.spec.aggregates)]
        by_group: dict[int, list[PaneRow]] = defaultdict(list)
        for index, group in enumerate(groups):
            key = tuple(column[index] for column in keys)
            partial = [rows[index], *(column[index] for column in columns)]
            by_group[group].append((key, panes[index], partial))
        return by_group

    def _process_group(self, group: int, new_rows: list[PaneRow], due: bool, next_fire: int,
                       state: PipelineState, writer: EpochWriter, epoch: TaskEpoch,
                       fired: list[FiredRow], stats: TaskStats) -> int:
        """Merge and fire one group; returns its earliest buffered window end."""
        previous = epoch.previous_epoch
        watermarks = (epoch.watermark_before, epoch.watermark_after)
        if due:  # every buffered key may fire: the group is read whole
            records = GroupEntries.whole(state, self.records_name, group, previous)
            panes = None if self.session else GroupEntries.whole(
                state, self.panes_name, group, previous)
        else:  # only the keys with new rows are read
            records = GroupEntries.keyed(state, self.records_name, group, previous,
                                         (key for key, _, _ in new_rows))
            panes = None if self.session else GroupEntries.keyed(
                state, self.panes_name, group, previous,
                ((*key, pane // self.chunk_us) for key, pane, _ in new_rows))
        states: dict[tuple[Any, ...], Any] = {}
        touched: set[tuple[Any, ...]] = set()
        # A key's session partials go in event-time order: which of them are late
        # then does not depend on the order Spark's aggregate gave them in.
        ordered = sorted(new_rows, key=lambda row: row[1]) if self.session else new_rows
        for key, pane, partial in ordered:
            touched.add(key)
            key_state = self._state(records, states, key)
            if self.session:
                accepted = self.sessions.add(key_state, pane, partial, watermarks[0])
            else:
                accepted = not self.sliding.is_late(pane, watermarks[0])
                if accepted:
                    assert panes is not None
                    key_panes = _KeyPanes(panes, key, self.chunk_us)
                    self.sliding.add_pane(key_state, key_panes, pane, partial, watermarks[0])
            if not accepted:
                stats.rows_late += partial[0]
        earliest = next_fire
        if due:
            for key in list(records.keys()):
                self._state(records, states, key)
            earliest = _NEVER
        for key, key_state in states.items():
            if self._next_end(key_state) <= watermarks[1]:
                touched.add(key)
                fired.extend((key, f) for f in self._fire(key, key_state, panes, watermarks[1]))
            earliest = min(earliest, self._next_end(key_state))
        for key in touched:
            records.put(key, self._stored(states[key]))
        records.flush(writer, self.records_name, group)
        if panes is not None:
            panes.flush(writer, self.panes_name, group)
        return earliest

    def _fire(self, key: tuple[Any, ...], state: Any, panes: GroupEntries | None,
              watermark: int) -> list[Fired]:
        if self.session:
            return self.sessions.fire(state, watermark)
        assert panes is not None
        return self.sliding.fire(state, _KeyPanes(panes, key, self.chunk_us), watermark)

    def _state(self, records: GroupEntries, states: dict[tuple[Any, ...], Any],
               key: tuple[Any, ...]) -> Any:
        """The decoded state of ``key`` for this epoch (a new one if absent)."""
        state = states.get(key)
        if state is None:
            stored = records.get(key)
            if self.session:
                state = stored if stored is not None else []
            elif stored is not None:
                state = SlidingKeyState.from_stored(stored)
            else:
                state = self.sliding.new_state()
            states[key] = state
        return state

    def _next_end(self, state: Any) -> int:
        if self.session:
            return min((s[1] for s in state), default=_NEVER)
        return _NEVER if state.next_end is None else state.next_end

    def _stored(self, state: Any) -> Any:
        """What to store for a key; None deletes a key that holds nothing."""
        if self.session:
            return state or None
        return None if state.empty else state.to_stored()


@dataclass(frozen=True)
class _WindowRange:
    """A window operator's work on one key-group range, run in a Spark task."""

    spec: WindowAggregate
    num_key_groups: int
    schema: pa.Schema

    def __call__(self, partials: pa.Table, state: CachedPipelineState, writer: EpochWriter,
                 epoch: TaskEpoch, stats: TaskStats) -> pa.Table:
        runner = WindowOperatorRunner(self.spec, self.num_key_groups)
        fired = runner.process(partials, state, writer, epoch, stats)
        stats.rows_in = int(pc.sum(partials.column("__rows")).as_py() or 0)
        return fired_table(self.schema, len(self.spec.key_columns), fired)


class WindowStep(OperatorStep):
    """A window aggregate in a query: native partials, then the merge into state and the
    firing in one Spark task per key-group range."""

    def __init__(self, spec: WindowAggregate, state: PipelineState, num_key_groups: int) -> None:
        self.spec = spec
        self.state = state  # tasks open the pipeline's state themselves
        self.num_key_groups = num_key_groups
        self.runner = WindowOperatorRunner(spec, num_key_groups)
        self._columnar: bool | None = None

    def run(self, epoch: EpochContext) -> StepOutput:
        # Rows go to their key-group range's task before they are aggregated: the
        # aggregate keeps that placement, so the epoch shuffles them once.
        rows = epoch.spark.sql(self.runner.pane_rows_sql(self.spec.input_sql))
        partials = self.runner.partials(epoch.route(rows), ROUTING_COLUMNS)
        partial_schema = spark_schema_to_arrow(partials.drop(*ROUTING_COLUMNS).schema)
        schema = output_schema(self.spec, partial_schema)
        if self._columnar is None:
            # Decided once a run.  Windows buffered per key by an earlier version stay
            # on that path until they drain; the next run then takes the columnar one.
            fits = (session_columnar if self.runner.session else columnar)(
                self.spec, partial_schema)
            self._columnar = fits and not self._keyed_state()
        work: RangeWork = _WindowRange(self.spec, self.num_key_groups, schema)
        if self._columnar:
            work = (SessionColumnsRange(self.spec, schema) if self.runner.session
                    else WindowColumnsRange(self.spec, schema))
        frame, stats = epoch.run_ranges(partials, work, arrow_schema_to_spark(schema),
                                        self.spec.operator_id)
        return StepOutput(frame, inputs=(stats,))

    def _keyed_state(self) -> bool:
        """Whether the operator holds state in the per-key layout."""
        entries = self.state.scan(self.runner.records_name, range(self.num_key_groups))
        return next(iter(entries), None) is not None
