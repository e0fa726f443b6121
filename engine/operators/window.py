"""Incremental TUMBLE/HOP aggregation for one key.

Rows arrive pre-aggregated by native Spark into *panes* of the slide.  A key
keeps its panes plus a running accumulator over the panes of the next window
to fire, except its newest pane.  Firing window ``[end - width, end)`` adds
the entering pane, emits, and removes the leaving pane: O(1) per window for
invertible aggregates, amortised O(1) for min/max through a monotonic deque.
So the cost per row never grows with width/slide.

Only out-of-the-ordinary input (a late pane landing inside the running
window, or before a key's skipped-ahead position) rebuilds the accumulator
from the stored panes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.operators.aggregates import Aggregate, Extreme

#: A pane partial: [row count, partial of aggregate 0, partial of aggregate 1, ...]
Partial = list[Any]


@dataclass
class Fired:
    """One window result for a key."""

    start_us: int
    end_us: int
    values: list[Any]


@dataclass
class SlidingKeyState:
    """The stored state of one key of a TUMBLE/HOP operator."""

    panes: dict[int, Partial] = field(default_factory=dict)
    next_end: int | None = None
    running_rows: int = 0
    running: list[Any] = field(default_factory=list)
    # per non-invertible aggregate: [[pane_start, value], ...] best-first monotonic
    deques: list[list[list[Any]]] = field(default_factory=list)

    def to_stored(self) -> list[Any]:
        panes = [[start, *partial] for start, partial in self.panes.items()]
        return [panes, self.next_end, self.running_rows, self.running, self.deques]

    @classmethod
    def from_stored(cls, stored: list[Any]) -> SlidingKeyState:
        panes, next_end, running_rows, running, deques = stored
        return cls({p[0]: list(p[1:]) for p in panes}, next_end, running_rows, running, deques)

    @property
    def empty(self) -> bool:
        return not self.panes and self.running_rows == 0


class SlidingWindow:
    """TUMBLE (slide == width) or HOP over panes, for any number of aggregates."""

    def __init__(self, width_us: int, slide_us: int, aggregates: list[Aggregate]) -> None:
        self.width = width_us
        self.slide = slide_us
        self.aggregates = aggregates

    def new_state(self) -> SlidingKeyState:
        return SlidingKeyState(running=self._empty_running(),
                               deques=[[] for a in self.aggregates if not a.invertible])

    def _empty_running(self) -> list[Any]:
        return [a.initialize() if a.invertible else None for a in self.aggregates]

    def first_open_end(self, watermark: int) -> int:
        """The end of the first window not yet fired at ``watermark``."""
        return (watermark // self.slide + 1) * self.slide

    def is_late(self, pane: int, watermark: int) -> bool:
        """A pane whose every window already fired."""
        return pane + self.width <= watermark

    def add_pane(self, state: SlidingKeyState, pane: int, partial: Partial,
                 watermark: int) -> None:
        """Merge a new pane partial into the key's state (the pane is not late)."""
        existing = state.panes.get(pane)
        state.panes[pane] = partial if existing is None else self._merge(existing, partial)
        first_end = max(pane + self.slide, self.first_open_end(watermark))
        if state.next_end is None or first_end < state.next_end:
            # a new key, or a pane before the point the key skipped ahead to
            state.next_end = first_end
            self._rebuild(state)
        elif pane < state.next_end - self.slide:
            self._rebuild(state)  # a late pane inside the running window

    def fire(self, state: SlidingKeyState, watermark: int) -> list[Fired]:
        """Emit every window of the key ending at or before ``watermark``."""
        fired: list[Fired] = []
        while state.next_end is not None and state.next_end <= watermark:
            end = state.next_end
            entering = state.panes.get(end - self.slide)
            if state.running_rows == 0 and entering is None:
                later = [p for p in state.panes if p >= end - self.slide]
                if not later:
                    state.next_end = None
                    break
                state.next_end = min(later) + self.slide
                continue
            if entering is not None:
                self._add(state, end - self.slide, entering)
            fired.append(Fired(end - self.width, end, self._results(state)))
            leaving = state.panes.pop(end - self.width, None)
            if leaving is not None:
                self._remove(state, end - self.width, leaving)
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
                values.append(deque[0][1] if deque else None)
                slot += 1
        return values

    def _rebuild(self, state: SlidingKeyState) -> None:
        """Recompute the running accumulator from stored panes (rare path)."""
        assert state.next_end is not None
        state.running = self._empty_running()
        state.running_rows = 0
        state.deques = [[] for a in self.aggregates if not a.invertible]
        low, high = state.next_end - self.width, state.next_end - self.slide
        for pane in sorted(p for p in state.panes if low <= p < high):
            self._add(state, pane, state.panes[pane])
        for pane in [p for p in state.panes if p < low]:
            del state.panes[pane]


def _push(deque: list[list[Any]], pane: int, value: Any, aggregate: Aggregate) -> None:
    """Append to a monotonic deque: drop entries the new value dominates."""
    if value is None:
        return
    assert isinstance(aggregate, Extreme)
    while deque and not aggregate.better(deque[-1][1], value):
        deque.pop()
    deque.append([pane, value])
