"""Rate-adaptive epochs: how long a pipeline waits before its next epoch.

Spark runs a query's micro-batches back to back unless it is given a fixed
trigger interval.  Each epoch has a fixed cost — Spark's planning and scheduling
of its jobs, the sources' offsets, the state commit — of some 100–150 ms of CPU
whether it reads one row or thousands.  A pipeline reading 10 rows/s back to back
pays it several times a second for a row or two each time: about one core.

So a pipeline without a fixed interval paces itself, as Spark's Kafka source does
with ``minOffsetsPerTrigger`` and ``maxTriggerDelay``, but from the rate its input
arrives at rather than by asking its sources over and over: an epoch that read at
least ``min_rows`` rows is followed at once by the next; after a smaller one the
pipeline waits until, at the rate the input came at, ``min_rows`` rows will have
arrived, and never longer than ``max_delay_s``.  A busy pipeline (1,000 rows/s and
up) keeps running back to back at its lowest latency; a trickle is read every
``max_delay_s``.  Epochs that read nothing (a source with no new offsets does not
start one) leave the rate unknown and are not followed by a wait.
"""

from __future__ import annotations

from dataclasses import dataclass

from spate.engine.defaults import DEFAULT_EPOCH_MIN_ROWS


@dataclass(frozen=True)
class Pacing:
    #: An epoch that read this many rows is followed by the next at once.
    min_rows: int
    #: The longest wait between epochs (seconds).
    max_delay_s: float


def pacing_for(max_delay_ms: int) -> Pacing | None:
    """Spate's pacing with waits of at most ``max_delay_ms``; None for 0 (no waits)."""
    return Pacing(DEFAULT_EPOCH_MIN_ROWS, max_delay_ms / 1000) if max_delay_ms > 0 else None


class EpochPacer:
    """Says, after each epoch, how long to wait before the next."""

    def __init__(self, pacing: Pacing, started_s: float) -> None:
        self.pacing = pacing
        #: when the previous epoch started (``time.monotonic()``): this epoch's input
        #: is what arrived between then and its own start
        self._previous_start_s = started_s

    def wait_after(self, rows_in: int, started_s: float, duration_s: float) -> float:
        """Seconds to wait after an epoch that started at ``started_s`` (monotonic),
        read ``rows_in`` rows and took ``duration_s``."""
        gathered_s = started_s - self._previous_start_s
        self._previous_start_s = started_s
        if rows_in == 0 or rows_in >= self.pacing.min_rows or gathered_s <= 0:
            return 0.0
        rows_per_s = rows_in / gathered_s
        wait = self.pacing.min_rows / rows_per_s - duration_s
        return max(0.0, min(wait, self.pacing.max_delay_s))
