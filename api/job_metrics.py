"""Reading a job's latest epoch figures (``Job.metrics``) defensively.

The scheduler stores the job process's latest ``epoch`` event in
``Job.metrics``::

    {"epoch": 12, "rows_in": 800, "rows_out": 20, "duration_ms": 950,
     "watermark_us": 1763856000000000, "busy_ratio": 0.4, "state_bytes": 5120,
     "cache_hits": 16, "cache_misses": 0, "remote_bytes": 0,
     "rows_in_per_s": 820.5, "rows_out_per_s": 20.5,
     "operators": [{"operator": "source:bids", "kind": "source", "rows_out": 800,
                    "rows_out_per_s": 790.2}, ...]}

``rows_in``/``rows_out`` are the epoch's own counts. The rates are per second
of wall time; when the scheduler did not store them they are taken as the
epoch's rows over its duration. An operator's rates and busy ratio are the
job's over its last minute (``spate.engine.job.events``). Any key may be
missing or of the wrong type (an older or newer job process): it then reads
as null, never as an error.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from spate.scheduler.store import IDLE, TERMINAL_STATES

if TYPE_CHECKING:
    from spate.api.models import Job

#: Watermarks outside this range (µs since 1970) are sentinels (+∞ at the end of
#: a bounded input, −∞ before the first row), not times a lag can be measured from.
_MAX_SANE_WATERMARK_US = 253_402_300_799_000_000  # 9999-12-31
_RATE_KEYS = {"in": "rows_in_per_s", "out": "rows_out_per_s"}


@dataclass(frozen=True)
class OperatorFigures:
    """One operator's rows in the latest epoch, and its rates and busy ratio over the
    last minute."""

    operator: str
    kind: str | None
    rows_in: int | None
    rows_out: int | None
    rows_in_per_s: float | None = None
    rows_out_per_s: float | None = None
    busy_ratio: float | None = None


@dataclass(frozen=True)
class EpochFigures:
    """The latest epoch's figures of one job; every field may be unknown (None)."""

    epoch: int | None = None
    rows_in: int | None = None
    rows_out: int | None = None
    rows_in_per_s: float | None = None
    rows_out_per_s: float | None = None
    duration_ms: int | None = None
    watermark_us: int | None = None
    busy_ratio: float | None = None
    state_bytes: int | None = None
    cache_hits: int | None = None
    cache_misses: int | None = None
    remote_bytes: int | None = None
    operators: tuple[OperatorFigures, ...] = ()

    def watermark_lag_s(self, now: datetime) -> float | None:
        """Seconds from the watermark to ``now`` (0 when the watermark is ahead)."""
        if self.watermark_us is None or not 0 <= self.watermark_us <= _MAX_SANE_WATERMARK_US:
            return None
        now_us = int(now.timestamp() * 1_000_000)
        return max(0, now_us - self.watermark_us) / 1_000_000


def parse_epoch_figures(metrics: Any) -> EpochFigures:
    """The figures in ``metrics`` (``Job.metrics``); anything unreadable is None."""
    if not isinstance(metrics, dict):
        return EpochFigures()
    rows_in, rows_out = _integer(metrics.get("rows_in")), _integer(metrics.get("rows_out"))
    duration_ms = _integer(metrics.get("duration_ms"))
    return EpochFigures(
        epoch=_integer(metrics.get("epoch")),
        rows_in=rows_in,
        rows_out=rows_out,
        rows_in_per_s=_rate(metrics, "in", rows_in, duration_ms),
        rows_out_per_s=_rate(metrics, "out", rows_out, duration_ms),
        duration_ms=duration_ms,
        watermark_us=_integer(metrics.get("watermark_us")),
        busy_ratio=_number(metrics.get("busy_ratio")),
        state_bytes=_integer(metrics.get("state_bytes")),
        cache_hits=_integer(metrics.get("cache_hits")),
        cache_misses=_integer(metrics.get("cache_misses")),
        remote_bytes=_integer(metrics.get("remote_bytes")),
        operators=_operators(metrics.get("operators")),
    )


def live(job: Job, figure: float | None) -> float | None:
    """A rate or busy ratio as it is now: an idle job's is 0 (it reads and writes nothing,
    whatever its last epoch did), an ended job has none (its last epoch's is history)."""
    if job.shown_state == IDLE:
        return 0.0
    return None if job.shown_state in TERMINAL_STATES else figure


def _operators(value: Any) -> tuple[OperatorFigures, ...]:
    if not isinstance(value, list):
        return ()
    operators = []
    for item in value:
        if not isinstance(item, dict) or not isinstance(item.get("operator"), str):
            continue
        kind = item.get("kind")
        operators.append(OperatorFigures(
            operator=item["operator"], kind=kind if isinstance(kind, str) else None,
            rows_in=_integer(item.get("rows_in")), rows_out=_integer(item.get("rows_out")),
            rows_in_per_s=_number(item.get("rows_in_per_s")),
            rows_out_per_s=_number(item.get("rows_out_per_s")),
            busy_ratio=_number(item.get("busy_ratio"))))
    return tuple(operators)


def _rate(metrics: dict[str, Any], direction: str, rows: int | None,
          duration_ms: int | None) -> float | None:
    rate = _number(metrics.get(_RATE_KEYS[direction]))
    if rate is not None:
        return rate
    if rows is None or not duration_ms or duration_ms <= 0:
        return None
    return rows * 1000 / duration_ms


def _number(value: Any) -> float | None:
    # bool is an int to Python, but never a figure.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _integer(value: Any) -> int | None:
    number = _number(value)
    if number is None or abs(number) > 2**63 - 1:
        return None
    return int(number)
