"""Autoscaling: the parallelism a running pipeline should have, from what its run measures.

A pipeline with an ``autoscale`` range (min and max parallelism, within its tenant's
plan) has its parallelism decided here on every reconcile, from its running job's
latest epoch figures (:mod:`spate.engine.job.events`):

- ``backlog``: rows its sources hold that it has not read yet, where the sources can
  tell (Kafka: the topic's end offsets past the committed ones); and
  ``rows_in_per_s``, how fast it reads them;
- ``busy_ratio``: the share of wall time its epochs take (near 1: it cannot keep up).

A run without an epoch for :data:`QUIET_AFTER_S` had no input (an epoch runs only when
its sources have rows): it is idle, with nothing to read.

Up, when the backlog would take longer than :data:`DRAIN_TARGET_S` to read at the
current rate, or the run is busy :data:`UP_BUSY` of the time: to the parallelism that
would bring the busy ratio to :data:`TARGET_BUSY`, at least one more, at most double.
Down, when the backlog is read (or there is none) and the run is busy less than
:data:`DOWN_BUSY` of the time: to the parallelism that would bring it to
:data:`TARGET_BUSY`. Between the two thresholds nothing changes, so a load at
either threshold does not flap, and no decision comes within a cooldown of the previous
one (:data:`COOLDOWN_S` unless configured), nor before a new run has worked
:data:`SETTLE_S` (its first epochs are a start, not a load). A pipeline outside its
range is brought back into it.

The decision carries its reason in words; the scheduler records it as an event of
the pipeline's run and rescales through the usual path (a new job at the new
parallelism, state moved by key group, exactly once).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

#: The busy ratio a decision aims for.
TARGET_BUSY = 0.6
#: At or above this busy ratio, a run is short of parallelism.
UP_BUSY = 0.85
#: Below this busy ratio (with nothing left to read), a run has parallelism to spare.
DOWN_BUSY = 0.3
#: A backlog that would take longer than this to read at the current rate asks for more.
DRAIN_TARGET_S = 20.0
#: Rows of backlog below which a source counts as caught up.
CAUGHT_UP_ROWS = 1_000
#: The least time between two decisions for one pipeline, by default
#: (``SchedulerConfig.autoscale_cooldown_s``).
COOLDOWN_S = 60.0
#: How long a new run works before its figures are a load.
SETTLE_S = 10.0
#: A run that committed no epoch for this long had no input: it is idle, not busy (an
#: epoch runs only when its sources have rows, so its last figures would stay).
QUIET_AFTER_S = 15.0


@dataclass(frozen=True)
class AutoscaleRange:
    """A pipeline's autoscale setting: the parallelism it may take."""

    min: int
    max: int


@dataclass(frozen=True)
class Load:
    """What a running job measured in its latest epoch (None: not known)."""

    busy_ratio: float | None
    rows_in_per_s: float | None
    backlog: int | None

    @classmethod
    def of(cls, metrics: Any, now: datetime) -> Load:
        """From a job's stored epoch event at ``now``; anything unreadable is unknown, and
        a run with no epoch for :data:`QUIET_AFTER_S` is idle with nothing to read."""
        metrics = metrics if isinstance(metrics, dict) else {}
        committed_ms = metrics.get("committed_at_ms")
        if isinstance(committed_ms, int) and not isinstance(committed_ms, bool) \
                and now.timestamp() * 1000 - committed_ms > QUIET_AFTER_S * 1000:
            return cls(busy_ratio=0.0, rows_in_per_s=0.0, backlog=0)

        def number(key: str) -> float | None:
            value = metrics.get(key)
            ok = isinstance(value, int | float) and not isinstance(value, bool)
            return float(value) if ok and math.isfinite(value) and value >= 0 else None

        backlog = number("backlog")
        return cls(number("busy_ratio"), number("rows_in_per_s"),
                   None if backlog is None else int(backlog))


@dataclass(frozen=True)
class Rescale:
    """Run the pipeline at ``parallelism``, for ``reason``."""

    parallelism: int
    reason: str


def decide_scale(setting: AutoscaleRange, parallelism: int, load: Load, *,
                 running_since: datetime | None, last_change: datetime | None,
                 now: datetime, cooldown_s: float = COOLDOWN_S) -> Rescale | None:
    """The rescale the pipeline needs now, or None; none within ``cooldown_s`` of the
    last."""
    if parallelism < setting.min:
        return Rescale(setting.min, f"autoscale: below its minimum of {setting.min}")
    if parallelism > setting.max:
        return Rescale(setting.max, f"autoscale: above its maximum of {setting.max}")
    if last_change is not None and now - last_change < timedelta(seconds=cooldown_s):
        return None
    if running_since is None or now - running_since < timedelta(seconds=SETTLE_S):
        return None
    up = _reason_up(load)
    if up is not None:
        wanted = max(parallelism + 1, _fitted(parallelism, load.busy_ratio))
        target = min(setting.max, wanted, parallelism * 2)
        if target > parallelism:
            return Rescale(target, f"autoscale: {parallelism} → {target}: {up}")
        return None
    if _caught_up(load) and load.busy_ratio is not None and load.busy_ratio < DOWN_BUSY:
        target = max(setting.min, min(parallelism - 1, _fitted(parallelism, load.busy_ratio)))
        if target < parallelism:
            return Rescale(target, f"autoscale: {parallelism} → {target}: busy "
                                   f"{load.busy_ratio:.0%} of the time with nothing left "
                                   "to read")
    return None


def _reason_up(load: Load) -> str | None:
    """Why the run needs more parallelism, or None."""
    if load.backlog is not None and load.backlog >= CAUGHT_UP_ROWS:
        rate = load.rows_in_per_s or 0.0
        drain_s = math.inf if rate <= 0 else load.backlog / rate
        if drain_s > DRAIN_TARGET_S:
            at = "nothing read yet" if rate <= 0 else f"{drain_s:,.0f} s at {rate:,.0f} rows/s"
            return f"{load.backlog:,} rows behind ({at})"
    if load.busy_ratio is not None and load.busy_ratio >= UP_BUSY:
        return f"busy {load.busy_ratio:.0%} of the time"
    return None


def _caught_up(load: Load) -> bool:
    return load.backlog is None or load.backlog < CAUGHT_UP_ROWS


def _fitted(parallelism: int, busy_ratio: float | None) -> int:
    """The parallelism at which ``busy_ratio`` would be :data:`TARGET_BUSY`."""
    if busy_ratio is None:
        return parallelism
    return max(1, math.ceil(parallelism * busy_ratio / TARGET_BUSY))
