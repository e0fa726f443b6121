"""Runs one window-aggregate operator for one epoch.

Native Spark computes the pane partials (:meth:`WindowOperatorRunner.partial_sql`);
this module merges them into the operator's state, key group by key group,
fires the windows the watermark closed, and stages what changed for the epoch.

State layout in the store (per key group):

* operator ``<id>``: one record per key — a :class:`SlidingKeyState`, or for
  SESSION the key's open sessions;
* operator ``<id>/panes``: the pane partials of TUMBLE/HOP, one entry per
  ``(*key, chunk)`` holding up to :data:`PANES_PER_CHUNK` consecutive panes.

Reads go through ``PipelineState.read_group``, which the statestore serves
from its bounded per-process cache when warm, so this module keeps no copy of
the state between epochs — only the earliest window end per key group, to
skip groups with nothing to do.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from spate.engine.operators.aggregates import BAGS, COMOMENTS, MOMENTS, bit_counts, make_aggregate
from spate.engine.operators.session import SessionWindow
from spate.engine.operators.window import Fired, Partial, SlidingKeyState, SlidingWindow
from spate.engine.planner.plan import EVENT_TIME, WindowAggregate
from spate.engine.runtime import values
from spate.engine.runtime.group_entries import GroupEntries
from spate.engine.runtime.output import fired_table, output_schema
from spate.engine.runtime.partials import PARTIAL_SQL
from spate.engine.runtime.sources import expand_views
from spate.engine.runtime.steps import EpochContext, OperatorStep, StepOutput
from spate.statestore import EpochWriter, PipelineState, UserKey

#: Consecutive panes of a key kept in one state entry.
PANES_PER_CHUNK = 64
#: Later than any window end: a group with nothing buffered.
_NEVER = 2**63
#: (key, pane start or event time, pane partial)
PaneRow = tuple[tuple[Any, ...], int, Partial]
FiredRow = tuple[tuple[Any, ...], Fired]


@dataclass
class OperatorStats:
    rows_late: int = 0


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
    """One windowed aggregate of a pipeline, across epochs."""

    def __init__(self, spec: WindowAggregate, state: PipelineState,
                 num_key_groups: int) -> None:
        self.spec = spec
        self.state = state
        self.num_key_groups = num_key_groups
        self.aggregates = [make_aggregate(a.function, a.fraction) for a in spec.aggregates]
        window = spec.window
        self.session = window.kind == "session"
        self.sliding = SlidingWindow(window.width_us, window.slide_us, self.aggregates)
        self.sessions = SessionWindow(window.gap_us, self.aggregates)
        self.records_name = spec.operator_id
        self.panes_name = f"{spec.operator_id}/panes"
        self.chunk_us = PANES_PER_CHUNK * max(window.slide_us, 1)
        #: key group -> earliest window end it holds, as committed; absent: not known
        self._next_fire: dict[int, int] = {}

    # -- SQL --------------------------------------------------------------------

    def partial_sql(self, source_sql: str) -> str:
        """Native pre-aggregation of the operator's input into pane partials."""
        keys = [f"`{k}`" for k in self.spec.key_columns]
        micros = f"unix_micros(`{EVENT_TIME}`)"
        slide = self.spec.window.slide_us
        pane = micros if self.session else f"({micros} - pmod({micros}, {slide}))"
        parts = ["count(1) AS `__rows`"]
        for i, call in enumerate(self.spec.aggregates):
            for j, template in enumerate(PARTIAL_SQL[call.function]):
                parts.append(f"{template.format(a=f'`{call.argument}`')} AS `p{i}_{j}`")
        hashed = f"xxhash64({', '.join(keys)})" if keys else "0"
        selected = [*keys, f"{pane} AS `__pane`",
                    f"CAST(pmod({hashed}, {self.num_key_groups}) AS INT) AS `__kg`", *parts]
        return (f"SELECT {', '.join(selected)} FROM ({source_sql}) "
                f"WHERE `{EVENT_TIME}` IS NOT NULL GROUP BY {', '.join([*keys, '`__pane`'])}")

    # -- one epoch ----------------------------------------------------------------

    def process(self, partials: pa.Table, writers: list[EpochWriter], previous_epoch: int | None,
                watermark_before: int, watermark_after: int,
                ) -> tuple[list[FiredRow], OperatorStats]:
        """Merge partials, fire closed windows, stage changed state into ``writers``."""
        stats = OperatorStats()
        rows_by_group = self._rows_by_group(partials)
        fired: list[FiredRow] = []
        for writer in writers:
            for group in writer.key_groups:
                new_rows = rows_by_group.get(group, [])
                due = self._next_fire.get(group, -_NEVER) <= watermark_after
                if new_rows or due:
                    self._process_group(group, new_rows, due, writer, previous_epoch,
                                        (watermark_before, watermark_after), fired, stats)
        fired.sort(key=lambda item: (item[1].end_us, item[1].start_us, repr(item[0])))
        return fired, stats

    def _rows_by_group(self, partials: pa.Table) -> dict[int, list[PaneRow]]:
        key_count = len(self.spec.key_columns)
        keys = [values.to_python(partials.column(i)) for i in range(key_count)]
        panes = partials.column("__pane").to_pylist()
        groups = partials.column("__kg").to_pylist()
        rows = partials.column("__rows").to_pylist()
        columns = []
        for i, call in enumerate(self.spec.aggregates):
            column = partials.column(f"p{i}_0")
            first = (_struct_rows(column) if call.function == "udaf_rows"
                     else values.to_python(column))
            more = [values.to_python(partials.column(f"p{i}_{j}"))
                    for j in range(1, len(PARTIAL_SQL[call.function]))]
            columns.append(_partial_column(call.function, first, more))
        by_group: dict[int, list[PaneRow]] = defaultdict(list)
        for index, group in enumerate(groups):
            key = tuple(column[index] for column in keys)
            partial = [rows[index], *(column[index] for column in columns)]
            by_group[group].append((key, panes[index], partial))
        return by_group

    def _process_group(self, group: int, new_rows: list[PaneRow], due: bool,
                       writer: EpochWriter, previous_epoch: int | None,
                       watermarks: tuple[int, int], fired: list[FiredRow],
                       stats: OperatorStats) -> None:
        records = GroupEntries(self.state.read_group(self.records_name, group,
                                                 epoch=previous_epoch))
        panes = None if self.session else GroupEntries(
            self.state.read_group(self.panes_name, group, epoch=previous_epoch))
        states: dict[tuple[Any, ...], Any] = {}
        touched: set[tuple[Any, ...]] = set()
        for key, pane, partial in new_rows:
            touched.add(key)
            state = self._state(records, states, key)
            if self.session:
                accepted = self.sessions.add(state, pane, partial, watermarks[0])
            else:
                accepted = not self.sliding.is_late(pane, watermarks[0])
                if accepted:
                    assert panes is not None
                    key_panes = _KeyPanes(panes, key, self.chunk_us)
                    self.sliding.add_pane(state, key_panes, pane, partial, watermarks[0])
            if not accepted:
                stats.rows_late += partial[0]
        earliest = self._next_fire.get(group, _NEVER)
        if due:
            for key in list(records.keys()):
                self._state(records, states, key)
            earliest = _NEVER
        for key, state in states.items():
            if self._next_end(state) <= watermarks[1]:
                touched.add(key)
                fired.extend((key, f) for f in self._fire(key, state, panes, watermarks[1]))
            earliest = min(earliest, self._next_end(state))
        for key in touched:
            records.put(key, self._stored(states[key]))
        records.flush(writer, self.records_name, group)
        if panes is not None:
            panes.flush(writer, self.panes_name, group)
        self._next_fire[group] = earliest

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


def _partial_column(function: str, first: list[Any], more: list[list[Any]]) -> list[Any]:
    """Per-row pane partials of one aggregate, in the shape its Aggregate expects."""
    if function in ("sum", "avg", "bit_xor"):
        return [[0 if s is None else s, c] for s, c in zip(first, more[0], strict=True)]
    if function in MOMENTS or function in COMOMENTS:
        return [[n, *(v or 0.0 for v in rest)] for n, *rest in zip(first, *more, strict=True)]
    if function in BAGS:
        return [[item["v"] for item in bag or []] for bag in first]
    if function in ("first_value", "last_value"):
        return [None if pair is None else [pair["t"], pair["v"]] for pair in first]
    if function in ("bit_and", "bit_or"):
        return [bit_counts((v, 1) for v in bag or [] if v is not None) for bag in first]
    if function == "count_distinct":
        return [sorted(v or [], key=repr) for v in first]
    return first


def _struct_rows(column: pa.ChunkedArray) -> list[list[list[Any]]]:
    """Per pane, its rows of STRUCT values as lists of plain values."""
    lists = column.combine_chunks()
    flat = pc.list_flatten(lists)
    fields = [values.to_python(flat.field(i)) for i in range(flat.type.num_fields)]
    rows = [list(row) for row in zip(*fields, strict=True)]
    result: list[list[list[Any]]] = []
    start = 0
    for length in pc.list_value_length(lists).fill_null(0).to_pylist():
        result.append(rows[start:start + length])
        start += length
    return result


class WindowStep(OperatorStep):
    """A window aggregate in a query: native partials, state merge, fired windows."""

    def __init__(self, spec: WindowAggregate, state: PipelineState, num_key_groups: int) -> None:
        self.spec = spec
        self.runner = WindowOperatorRunner(spec, state, num_key_groups)

    def run(self, epoch: EpochContext) -> StepOutput:
        partial_sql = self.runner.partial_sql(self.spec.input_sql)
        partials = expand_views(epoch.spark.sql(partial_sql)).toArrow()
        fired, stats = self.runner.process(partials, epoch.writers, epoch.previous_epoch,
                                           epoch.watermark_before, epoch.watermark_after())
        schema = output_schema(self.spec, partials.schema)
        table = fired_table(schema, len(self.spec.key_columns), fired)
        rows_in = pc.sum(partials.column("__rows")).as_py() or 0
        return StepOutput(epoch.spark.createDataFrame(table), rows=len(fired),
                          rows_in=int(rows_in), rows_late=stats.rows_late)
