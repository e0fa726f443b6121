"""Turns to start: the jobs of one warm application start a few at a time.

Starting a streaming query spawns Spark's Python workers for its data sources,
and Spark gives each 10 s to connect back to the JVM (not configurable).  When a
tenant starts many pipelines at once, their applications start every query at
once, the workers queue for the CPU, and some miss those 10 s: the query fails
with "Python worker failed to connect back".  So a hosted job waits for its
turn before it starts its query, and gives the turn back after its first
committed epoch (its workers are up by then), when it ends, or after
``max_wait_s``, whichever comes first — a slow job delays the next by at most
that.  A waiting job keeps publishing heartbeats (its control runs).
"""

from __future__ import annotations

import threading


class StartTurns:
    """At most ``at_once`` jobs starting at a time."""

    def __init__(self, at_once: int = 2, max_wait_s: float = 20.0) -> None:
        self._slots = threading.BoundedSemaphore(at_once)
        self.max_wait_s = max_wait_s

    def take(self) -> Turn:
        """Wait for a turn; the caller gives it back with :meth:`Turn.done`."""
        self._slots.acquire()
        return Turn(self._slots, self.max_wait_s)


class Turn:
    """One job's turn: given back once, by :meth:`done` or by its timer."""

    def __init__(self, slots: threading.BoundedSemaphore, max_wait_s: float) -> None:
        self._slots = slots
        self._lock = threading.Lock()
        self._returned = False
        self._timer = threading.Timer(max_wait_s, self.done)
        self._timer.daemon = True
        self._timer.start()

    def done(self) -> None:
        with self._lock:
            if self._returned:
                return
            self._returned = True
        self._timer.cancel()
        self._slots.release()
