"""The events a job publishes on its channel, built from what the runner reports.

An ``epoch`` event, one per committed epoch::

    {"type": "epoch", "epoch": 7, "committed_at_ms": 1763856000123,
     "duration_ms": 412, "rows_in": 800, "rows_out": 20, "rows_late": 0,
     "rows_dropped": 0, "watermark_us": 1763855999000000, "state_bytes": 5120,
     "cache_hits": 16, "cache_misses": 0, "remote_bytes": 0, "bytes_in": 52000,
     "bytes_out": 1400, "state_held_bytes": 2400000, "busy_ratio": 0.41,
     "finished": false,
     "operators": [{"operator": "source:bids", "kind": "source", "rows_out": 800},
                   {"operator": "per_auction", "kind": "window",
                    "rows_in": 800, "rows_out": 20, "rows_late": 0},
                   {"operator": "sink:per_auction", "kind": "sink", "rows_in": 20}]}

- ``watermark_us`` is null before any watermark; after a bounded input ended
  it is the end-of-time sentinel (``2**62``) and ``finished`` is true.
- ``state_bytes``: bytes of state values the epoch's writers staged in the
  state store (deletions count 0).
- ``cache_hits``, ``cache_misses``, ``remote_bytes``: the state reads of the
  epoch's tasks — served by their process caches, or read from the store
  (a read is a key group or, for point reads, a key), and the bytes those
  store reads returned.  A warm job reads nothing remote; the first epoch
  after a move or rescale shows what it cost.
- ``busy_ratio``: a micro-batch engine's backpressure signal — the epoch's
  duration divided by the wall time between the end of the previous epoch
  of this run and the end of this one (for the first epoch, since the
  streaming query started).  Each trigger cycle is one epoch plus the wait
  for the next one, so this is the share of the last cycle spent working:
  near 1 the job is saturated (epochs run back to back and input queues up),
  near 0 it mostly waits for input or for the trigger interval.  Measuring
  from one epoch's end to the next (rather than from start to start) keeps
  the figure at most 1 and about the epoch it describes.
- ``backlog``: the rows the sources hold past the epoch's end, as last measured
  (every few seconds, by the sources that can tell: :mod:`spate.engine.runtime.backlog`);
  null when none can.  The autoscaler scales up on it.
- ``operators``: per source, query and sink, the rows counted by the runner
  and, where it can be told apart, ``busy_s``, the time its own work took
  (:class:`spate.engine.runtime.reports.OperatorReport`); and each one's
  figures over the last minute of this run (:data:`RECENT_S`), steadier than
  one epoch's (a window operator writes only when a window closes):
  ``rows_in_per_s`` and ``rows_out_per_s``, its rows over that wall time, and
  ``busy_ratio``, the share of that time its ``busy_s`` took.  A job-wide
  ``busy_ratio`` near 1 with every operator's low means the time goes to
  Spark's fixed cost per epoch, not to any operator.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from spate.engine.runtime.reports import EpochReport
from spate.engine.runtime.watermarks import NO_WATERMARK


def status_event(state: str, message: str | None = None,
                 wake_at_ms: int | None = None) -> dict[str, Any]:
    """``running``, ``stopped``, ``finished``, ``failed`` (with a one-line message) or
    ``idle`` (with ``wake_at_ms``: when its input is due, wall clock)."""
    event: dict[str, Any] = {"type": "status", "state": state}
    if message:
        event["message"] = message
    if wake_at_ms is not None:
        event["wake_at_ms"] = wake_at_ms
    return event


def error_event(message: str, detail: str) -> dict[str, Any]:
    """A failure: ``message`` for the tenant, ``detail`` (a traceback) for operators."""
    return {"type": "error", "message": message, "detail": detail}


def heartbeat_event() -> dict[str, Any]:
    return {"type": "heartbeat"}


def rows_event(epoch: int, sink: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Preview rows one sink received in one epoch."""
    return {"type": "rows", "epoch": epoch, "sink": sink, "rows": rows}


#: Operators' rates and busy ratios are over this much of the run's latest wall time.
RECENT_S = 60.0


class EpochEvents:
    """Turns the runner's epoch reports into ``epoch`` events, timing the gaps between them."""

    def __init__(self) -> None:
        self._previous_end_s: float | None = None
        #: when this run's first cycle began (its query's start, else its first epoch's)
        self._run_started_s: float | None = None
        #: (end, operators' figures) of the epochs of the last RECENT_S, oldest first
        self._recent: deque[tuple[float, list[dict[str, Any]]]] = deque()

    def query_started(self) -> None:
        """The first epoch's cycle is measured from here."""
        self._previous_end_s = time.monotonic()
        self._run_started_s = self._previous_end_s

    def event(self, report: EpochReport) -> dict[str, Any]:
        ended_s = report.started_s + report.duration_s
        return {
            "type": "epoch",
            "epoch": report.epoch,
            "committed_at_ms": report.committed_at_ms,
            "duration_ms": round(report.duration_s * 1000),
            "rows_in": report.rows_in,
            "rows_out": report.rows_out,
            "rows_late": report.rows_late,
            "rows_dropped": report.rows_dropped,
            "watermark_us": None if report.watermark_us <= NO_WATERMARK else report.watermark_us,
            "state_bytes": report.state_bytes,
            "cache_hits": report.cache_hits,
            "cache_misses": report.cache_misses,
            "remote_bytes": report.remote_bytes,
            "bytes_in": report.bytes_in,
            "bytes_out": report.bytes_out,
            "state_held_bytes": report.state_held_bytes,
            "busy_ratio": self._busy_ratio(report.duration_s, ended_s),
            "backlog": report.backlog,
            "finished": report.finished,
            "operators": self._recent_figures(
                [operator.to_dict() for operator in report.operators], report.started_s, ended_s),
        }

    def _recent_figures(self, operators: list[dict[str, Any]], started_s: float,
                        ended_s: float) -> list[dict[str, Any]]:
        """``operators`` with each one's rates and busy ratio over the last RECENT_S."""
        if self._run_started_s is None:
            self._run_started_s = started_s
        self._recent.append((ended_s, operators))
        while self._recent and self._recent[0][0] <= ended_s - RECENT_S:
            self._recent.popleft()
        span_s = ended_s - max(ended_s - RECENT_S, self._run_started_s)
        if span_s <= 0:
            return operators
        totals: dict[str, dict[str, float]] = {}
        for _ended, figures in self._recent:
            for figure in figures:
                summed = totals.setdefault(figure["operator"], {})
                for name in ("rows_in", "rows_out", "busy_s"):
                    if name in figure:
                        summed[name] = summed.get(name, 0.0) + figure[name]
        with_rates = []
        for figure in operators:
            summed = totals[figure["operator"]]
            recent = {f"{name}_per_s": round(summed[name] / span_s, 3)
                      for name in ("rows_in", "rows_out") if name in figure}
            if "busy_s" in figure:
                recent["busy_ratio"] = round(min(1.0, summed["busy_s"] / span_s), 4)
            with_rates.append({**figure, **recent})
        return with_rates

    def _busy_ratio(self, duration_s: float, ended_s: float) -> float:
        previous = self._previous_end_s
        self._previous_end_s = ended_s
        if previous is None:
            return 1.0
        cycle_s = ended_s - previous
        if cycle_s <= 0:
            return 1.0
        return round(min(1.0, duration_s / cycle_s), 4)
