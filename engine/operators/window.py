"""Incremental TUMBLE/HOP aggregation for one key, for the aggregates kept as Python
values (distinct counts, variances, first/last values, bags, bit operations,
aggregate UDFs); count, sum, avg, min and max fire in columns instead
(:mod:`spate.engine.operators.window_columns`).

Rows arrive pre-aggregated by native Spark into *panes* of the slide.  Each
pane partial is its own state entry (:class:`Panes`), and the key keeps a small
:class:`SlidingKeyState`: the end of the next window to fire, a running
accumulator over the panes of that window that have already *entered*, and
the starts of the panes still *pending* (at or after the window's last pane).

Firing window ``[end - width, end)`` adds the entering pane, emits, then
removes the leaving pane and deletes its entry: O(1) per window for
invertible aggregates (count, sum, avg, count distinct) and amortised O(1) for
min/max through a monotonic deque.  No step touches every pane of a window,
so the cost per row does not grow with width/slide.

A pane that lands inside the running window (rows behind the watermark whose
later windows are still open) is merged into the accumulator directly; only
min/max then rebuild their deque from the window's panes (a rare path).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any, Protocol

from spate.engine.operators.aggregates import Aggregate
from spate.engine.operators.aggregates.extremes import Extreme

#: A pane partial: [row count, partial of aggregate 0, partial of aggregate 1, ...]
Partial = list[Any]


@dataclass
class Fired:
    """One window result for a key."""

    start_us: int
    end_us: int
    values: list[Any]


class Panes(Protocol):
    """The pane entries of one key (backed by the operator's state)."""

    def get(self, pane: int) -> Partial | None: ...

    def put(self, pane: int, partial: Partial) -> None: ...

    def delete(self, pane: int) -> None: ...


@dataclass
class SlidingKeyState:
    """The stored per-key record of a TUMBLE/HOP operator (panes live apart)."""

    #: end of the next window to fire; None when the key holds nothing
    next_end: int | None = None
    running_rows: int = 0
    #: per aggregate: its accumulator (invertible ones) or None
    running: list[Any] = field(default_factory=list)
    #: per non-invertible aggregate: [[pane_start, value], ...], best value first
    deques: list[list[list[Any]]] = field(default_factory=list)
    #: sorted starts of panes at or after ``next_end - slide`` (not yet entered)
    pending: list[int] = field(default_factory=list)

    def to_stored(self) -> list[Any]:
        return [self.next_end, self.running_rows, self.running, self.deques, self.pending]

    @classmethod
    def from_stored(cls, stored: list[Any]) -> SlidingKeyState:
        next_end, running_rows, running, deques, pending = stored
        return cls(next_end, running_rows, list(running), [list(d) for d in deques],
                   list(pending))

    @property
    def empty(self) -> bool:
        return self.next_end is None


class SlidingWindow:
    """TUMBLE (slide == width) or HOP over panes, for any number of aggregates."""

    def __init__(self, width_us: int, slide_us: int, aggregates: list[Aggregate]) -> None:
        self.width = width_us
        self.slide = slide_us
        self.aggregates = aggregates

    def new_state(self) -> SlidingKeyState:
        return SlidingKeyState(running=self._empty_running(), deques=self._empty_deques())

    def _empty_running(self) -> list[Any]:
        return [a.initialize() if a.invertible else None for a in self.aggregates]

    def _empty_deques(self) -> list[list[list[Any]]]:
        return [[] for a in self.aggregates if not a.invertible]

    def first_open_end(self, watermark: int) -> int:
        """The end of the first window not yet fired at ``watermark``."""
        return (watermark // self.slide + 1) * self.slide

    def is_late(self, pane: int, watermark: int) -> bool:
        """A pane whose every window already fired."""
        return pane + self.width <= watermark

    def add_pane(self, state: SlidingKeyState, panes: Panes, pane: int, partial: Partial,
                 watermark: int) -> None:
        """Merge a pane partial (not late) into the key's state and pane entries."""
        existing = panes.get(pane)
        merged = partial if existing is None else self._merge(existing, partial)
        panes.put(pane, merged)
        first_end = max(pane + self.slide, self.first_open_end(watermark))
        if state.next_end is None or first_end < state.next_end:
            # A new key, or a pane before the point an idle key skipped ahead to;
            # either way nothing has entered the running window yet.
            state.next_end = first_end
        if pane >= state.next_end - self.slide:
            if existing is None:
                bisect.insort(state.pending, pane)
            return
        # Behind the watermark, but later windows of the pane are still open.
        if existing is not None:
            self._remove(state, pane, existing)
        self._add(state, pane, merged)
        if any(not a.invertible for a in self.aggregates):
            self._rebuild_deques(state, panes)

    def fire(self, state: SlidingKeyState, panes: Panes, watermark: int) -> list[Fired]:
        """Emit every window of the key ending at or before ``watermark``."""
        fired: list[Fired] = []
        while state.next_end is not None and state.next_end <= watermark:
            end = state.next_end
            entering = end - self.slide
            if state.pending and state.pending[0] == entering:
                state.pending.pop(0)
                partial = panes.get(entering)
                if partial is not None:
                    self._add(state, entering, partial)
            elif state.running_rows == 0:
                # Nothing in this window: jump to the next pane, or forget the key.
                state.next_end = state.pending[0] + self.slide if state.pending else None
                continue
            fired.append(Fired(end - self.width, end, self._results(state)))
            leaving = end - self.width
            partial = panes.get(leaving)
            if partial is not None:
                self._remove(state, leaving, partial)
                panes.delete(leaving)
            state.next_end = end + self.slide
        return fired

    def _merge(self, partial: Partial, more: Partial) -> Partial:
        merged = [partial[0] + more[0]]
        for i, aggregate in enumerate(self.aggregates, start=1):
            merged.append(aggregate.merge(partial[i], more[i]))
        return merged

    def _add(self, state: SlidingKeyState, pane: int, partial: Partial) -> None:
        state.running_rows += partial[0]
        slot = 0
        for i, aggregate in enumerate(self.aggregates):
            if aggregate.invertible:
                state.running[i] = aggregate.add(state.running[i], partial[i + 1])
            else:
                _push(state.deques[slot], pane, partial[i + 1], aggregate)
                slot += 1

    def _remove(self, state: SlidingKeyState, pane: int, partial: Partial) -> None:
        state.running_rows -= partial[0]
        if state.running_rows == 0:
            # Start afresh: no drift from subtracting floating-point sums.
            state.running = self._empty_running()
            state.deques = self._empty_deques()
            return
        slot = 0
        for i, aggregate in enumerate(self.aggregates):
            if aggregate.invertible:
                state.running[i] = aggregate.remove(state.running[i], partial[i + 1])
            else:
                deque = state.deques[slot]
                while deque and deque[0][0] <= pane:
                    deque.pop(0)
                slot += 1

    def _results(self, state: SlidingKeyState) -> list[Any]:
        values = []
        slot = 0
        for i, aggregate in enumerate(self.aggregates):
            if aggregate.invertible:
                values.append(aggregate.result(state.running[i]))
            else:
                deque = state.deques[slot]
                values.append(aggregate.result(deque[0][1]) if deque else None)
                slot += 1
        return values

    def _rebuild_deques(self, state: SlidingKeyState, panes: Panes) -> None:
        """Recompute min/max deques from the entered panes (rare path)."""
        assert state.next_end is not None
        state.deques = self._empty_deques()
        extremes = [a for a in self.aggregates if not a.invertible]
        positions = [i for i, a in enumerate(self.aggregates) if not a.invertible]
        for pane in range(state.next_end - self.width, state.next_end - self.slide,
                          self.slide):
            partial = panes.get(pane)
            if partial is None:
                continue
            for slot, (i, aggregate) in enumerate(zip(positions, extremes, strict=True)):
                _push(state.deques[slot], pane, partial[i + 1], aggregate)


def _push(deque: list[list[Any]], pane: int, value: Any, aggregate: Aggregate) -> None:
    """Append to a monotonic deque: drop entries the new value dominates."""
    if value is None:
        return
    assert isinstance(aggregate, Extreme)
    while deque and not aggregate.better(deque[-1][1], value):
        deque.pop()
    deque.append([pane, value])
