"""Runs one window-aggregate operator for one epoch.

Native Spark computes the pane partials (``partial_sql``); this module merges
them into the operator's state, key group by key group, fires the windows
the watermark closed, and stages the changed keys for the epoch.  Decoded
key-group state stays in memory tagged by the epoch it reflects, so a warm
operator reads nothing remote; a cold or moved one fills from the store.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from engine.operators.aggregates import make_aggregate
from engine.operators.session import SessionWindow
from engine.operators.window import Fired, SlidingKeyState, SlidingWindow
from engine.planner.plan import EVENT_TIME, WindowAggregate
from engine.runtime import values
from statestore import PipelineState, StateCache, read_key_group
from statestore.base.store import EpochWriter
from statestore.encoding import decode, encode

_PARTIAL_SQL = {
    "count_star": ["count(1)"],
    "count": ["count({a})"],
    "count_distinct": ["collect_set({a})"],
    "sum": ["sum({a})", "count({a})"],
    "avg": ["sum({a})", "count({a})"],
    "min": ["min({a})"],
    "max": ["max({a})"],
}


@dataclass
class OperatorStats:
    rows_late: int = 0
    keys_touched: int = 0
    windows_fired: int = 0


class WindowOperatorRunner:
    """One windowed aggregate of a pipeline, across epochs."""

    def __init__(self, spec: WindowAggregate, state: PipelineState, cache: StateCache,
                 num_key_groups: int) -> None:
        self.spec = spec
        self.state = state
        self.cache = cache
        self.num_key_groups = num_key_groups
        self.aggregates = [make_aggregate(a.function) for a in spec.aggregates]
        window = spec.window
        self.session = window.kind == "session"
        self.sliding = SlidingWindow(window.width_us, window.slide_us, self.aggregates)
        self.sessions = SessionWindow(window.gap_us, self.aggregates)
        # key group -> (epoch the contents reflect, {user key: decoded state})
        self._groups: dict[int, tuple[int | None, dict[tuple[Any, ...], Any]]] = {}
        self._next_fire: dict[int, int] = {}

    # -- SQL --------------------------------------------------------------------

    def partial_sql(self, source_sql: str) -> str:
        """Native pre-aggregation of the operator's input into pane partials."""
        keys = list(self.spec.key_columns)
        micros = f"unix_micros(`{EVENT_TIME}`)"
        slide = self.spec.window.slide_us
        pane = micros if self.session else f"({micros} - pmod({micros}, {slide}))"
        parts = ["count(1) AS `__rows`"]
        for i, call in enumerate(self.spec.aggregates):
            for j, template in enumerate(_PARTIAL_SQL[call.function]):
                parts.append(f"{template.format(a=f'`{call.argument}`')} AS `p{i}_{j}`")
        key_list = ", ".join(f"`{k}`" for k in keys)
        hashed = f"xxhash64({key_list})" if keys else "0"
        group_by = ", ".join([*(f"`{k}`" for k in keys), "`__pane`"])
        return (f"SELECT {key_list + ', ' if keys else ''}{pane} AS `__pane`, "
                f"pmod({hashed}, {self.num_key_groups}) AS `__kg`, {', '.join(parts)} "
                f"FROM ({source_sql}) WHERE `{EVENT_TIME}` IS NOT NULL GROUP BY {group_by}")

    # -- one epoch ----------------------------------------------------------------

    def process(self, partials: pa.Table, writers: list[EpochWriter], previous_epoch: int | None,
                epoch: int, watermark_before: int, watermark_after: int,
                ) -> tuple[list[tuple[tuple[Any, ...], Fired]], OperatorStats]:
        """Merge partials, fire closed windows, stage changed keys into ``writers``."""
        stats = OperatorStats()
        rows_by_group = self._rows_by_group(partials)
        fired: list[tuple[tuple[Any, ...], Fired]] = []
        for writer in writers:
            for group in writer.key_groups:
                new_rows = rows_by_group.get(group)
                next_fire = self._next_fire.get(group)
                warm = self._groups.get(group, (None, None))[0] == previous_epoch \
                    and group in self._groups
                if not new_rows and warm and (next_fire is None or next_fire > watermark_after):
                    self._groups[group] = (epoch, self._groups[group][1])
                    continue
                contents = self._load(group, previous_epoch)
                self._groups[group] = (epoch, contents)
                changed = self._apply(contents, new_rows or [], watermark_before,
                                      watermark_after, fired, stats)
                for key in changed:
                    value = contents.get(key)
                    if value is None:
                        writer.delete(self.spec.operator_id, group, key)
                    else:
                        writer.put(self.spec.operator_id, group, key, encode(self._store(value)))
                self._next_fire[group] = self._earliest_fire(contents)
        fired.sort(key=lambda item: (item[1].end_us, item[1].start_us, repr(item[0])))
        stats.windows_fired = len(fired)
        return fired, stats

    def _rows_by_group(self, partials: pa.Table) -> dict[int, list[tuple[Any, ...]]]:
        columns = [values.to_python(partials.column(name)) for name in partials.column_names]
        names = partials.column_names
        key_count = len(self.spec.key_columns)
        pane_index, group_index = names.index("__pane"), names.index("__kg")
        rows_index = names.index("__rows")
        groups: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
        for row in zip(*columns, strict=True):
            key = tuple(row[:key_count])
            partial = [row[rows_index], *self._partials(row, names)]
            groups[row[group_index]].append((key, row[pane_index], partial))
        return groups

    def _partials(self, row: tuple[Any, ...], names: list[str]) -> list[Any]:
        result = []
        for i, call in enumerate(self.spec.aggregates):
            first = row[names.index(f"p{i}_0")]
            if call.function in ("sum", "avg"):
                count = row[names.index(f"p{i}_1")]
                result.append([first if first is not None else 0, count])
            elif call.function == "count_distinct":
                result.append(sorted(first or [], key=repr))
            else:
                result.append(first)
        return result

    def _load(self, group: int, previous_epoch: int | None) -> dict[tuple[Any, ...], Any]:
        tag, contents = self._groups.get(group, (None, None))
        if contents is not None and tag == previous_epoch:
            return contents
        stored = read_key_group(self.state, self.cache, self.spec.operator_id, group,
                                previous_epoch)
        return {tuple(key): self._restore(decode(raw)) for key, raw in stored.items()}

    def _restore(self, stored: Any) -> Any:
        return stored if self.session else SlidingKeyState.from_stored(stored)

    def _store(self, value: Any) -> Any:
        return value if self.session else value.to_stored()

    def _apply(self, contents: dict[tuple[Any, ...], Any], new_rows: list[tuple[Any, ...]],
               watermark_before: int, watermark_after: int,
               fired: list[tuple[tuple[Any, ...], Fired]], stats: OperatorStats,
               ) -> set[tuple[Any, ...]]:
        changed: set[tuple[Any, ...]] = set()
        for key, pane, partial in new_rows:
            if self.session:
                sessions = contents.get(key, [])
                if not self.sessions.add(sessions, pane, partial, watermark_before):
                    stats.rows_late += partial[0]
                    continue
                contents[key] = sessions
            else:
                if self.sliding.is_late(pane, watermark_before):
                    stats.rows_late += partial[0]
                    continue
                state = contents.get(key) or self.sliding.new_state()
                contents[key] = state
                self.sliding.add_pane(state, pane, partial, watermark_before)
            changed.add(key)
        for key, state in list(contents.items()):
            if self._earliest_fire({key: state}) > watermark_after:
                continue
            results = (self.sessions.fire(state, watermark_after) if self.session
                       else self.sliding.fire(state, watermark_after))
            fired.extend((key, f) for f in results)
            changed.add(key)
        for key in changed:
            state = contents[key]
            if (not state) if self.session else state.empty:
                del contents[key]
        stats.keys_touched += len(changed)
        return changed

    def _earliest_fire(self, contents: dict[tuple[Any, ...], Any]) -> int:
        times = []
        for state in contents.values():
            if self.session:
                times.extend(s[1] for s in state)
            elif state.next_end is not None:
                times.append(state.next_end)
        return min(times) if times else 2**63
