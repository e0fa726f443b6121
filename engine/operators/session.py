"""SESSION windows for one key: rows at most ``gap`` apart share a session.

Native Spark pre-aggregates rows by key and exact event time; each such
partial is a one-row session ``[t, t + gap)`` that merges with every session
it overlaps or touches (a row exactly ``gap`` after the last one still joins,
as in Spark's ``session_window`` and Flink), so out-of-order rows can bridge
two sessions.  A session fires
when the watermark reaches its end (last row + gap).
"""

from __future__ import annotations

from typing import Any

from spate.engine.operators.aggregates import Aggregate
from spate.engine.operators.window import Fired, Partial

#: A stored session: [start_us, end_us, row count, partial 0, partial 1, ...]
Session = list[Any]


class SessionWindow:
    """Session windows with a fixed gap, for any number of aggregates."""

    def __init__(self, gap_us: int, aggregates: list[Aggregate]) -> None:
        self.gap = gap_us
        self.aggregates = aggregates

    def add(self, sessions: list[Session], timestamp: int, partial: Partial,
            watermark: int) -> bool:
        """Merge a row partial into the key's sessions; False if it is late (dropped)."""
        merged: Session = [timestamp, timestamp + self.gap, *partial]
        keep: list[Session] = []
        for session in sessions:
            if session[0] <= merged[1] and merged[0] <= session[1]:
                merged = self._combine(merged, session)
            else:
                keep.append(session)
        if merged[1] <= watermark:
            return False  # its session already closed and was emitted
        keep.append(merged)
        keep.sort(key=lambda s: s[0])
        sessions[:] = keep
        return True

    def fire(self, sessions: list[Session], watermark: int) -> list[Fired]:
        """Emit and forget the sessions whose end is at or before ``watermark``."""
        fired = [s for s in sessions if s[1] <= watermark]
        sessions[:] = [s for s in sessions if s[1] > watermark]
        return [Fired(s[0], s[1], self._results(s)) for s in fired]

    def _combine(self, a: Session, b: Session) -> Session:
        combined = [min(a[0], b[0]), max(a[1], b[1]), a[2] + b[2]]
        for i, aggregate in enumerate(self.aggregates, start=3):
            combined.append(aggregate.merge(a[i], b[i]))
        return combined

    def _results(self, session: Session) -> list[Any]:
        values = []
        for i, aggregate in enumerate(self.aggregates, start=3):
            acc = aggregate.add(aggregate.initialize(), session[i])
            values.append(aggregate.result(acc))
        return values
