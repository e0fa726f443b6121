"""Folding the events a job published on its channel into rows to record.

Pure: a list of event dicts in, an :class:`~spate.scheduler.store.EventBatch` out.
Every event is a sign of life, so the newest one's time is the heartbeat;
``epoch`` events become checkpoints and the job's latest metrics (with rates
per second computed from the epoch's duration); ``error`` events become
error rows; the last ``status`` event decides the job's state.

An event names the attempt that published it. A killed attempt may still
publish after the scheduler started the next one (its end, once it notices the
kill): its epochs and errors are recorded, since they happened, but its status
and its heartbeat are not the current attempt's and are skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from spate.scheduler.store import (
    FAILED,
    FINISHED,
    IDLE,
    RUNNING,
    STOPPED,
    CheckpointRecord,
    ErrorRecord,
    EventBatch,
    StatusChange,
)

log = logging.getLogger(__name__)

#: A ``status`` event's ``state`` and the job state it means.
STATUS_STATES = {"running": RUNNING, "stopped": STOPPED, "finished": FINISHED, "failed": FAILED,
                 "idle": IDLE}

#: Epoch figures copied into the job's metrics as they are.
_EPOCH_FIGURES = ("epoch", "duration_ms", "rows_in", "rows_out", "rows_late", "rows_dropped",
                  "watermark_us", "state_bytes", "state_held_bytes", "busy_ratio", "operators",
                  "committed_at_ms", "backlog")


def fold_events(events: Iterable[dict[str, Any]], attempt: int | None = None) -> EventBatch:
    """The rows and changes ``events`` (oldest first) amount to, for the job's current
    ``attempt`` (None: every event is taken as the current attempt's)."""
    checkpoints: list[CheckpointRecord] = []
    errors: list[ErrorRecord] = []
    heartbeat: datetime | None = None
    metrics: dict[str, Any] | None = None
    status: StatusChange | None = None
    for event in events:
        at = _event_time(event)
        kind = event.get("type")
        current = not _earlier_attempt(event, attempt)
        if current:
            heartbeat = at if heartbeat is None or at > heartbeat else heartbeat
        if kind == "epoch":
            record = _checkpoint(event, at)
            if record is not None:
                checkpoints.append(record)
                metrics = epoch_metrics(event) if current else metrics
        elif kind == "error":
            errors.append(_error(event, at))
        elif kind == "status" and current:
            state = STATUS_STATES.get(str(event.get("state")))
            if state is None:
                log.warning("ignoring a status event with unknown state %r", event.get("state"))
                continue
            wake_ms = event.get("wake_at_ms")
            status = StatusChange(state=state, message=str(event.get("message") or ""),
                                  wake_at=_from_ms(wake_ms)
                                  if isinstance(wake_ms, int | float) else None)
    return EventBatch(checkpoints=checkpoints, errors=errors, heartbeat_at=heartbeat,
                      metrics=metrics, status=status)


def _earlier_attempt(event: dict[str, Any], attempt: int | None) -> bool:
    """Whether ``event`` was published by an attempt before ``attempt`` (an event
    without one is from a job that did not say: taken as current)."""
    published_by = event.get("attempt")
    return (attempt is not None and isinstance(published_by, int)
            and published_by < attempt)


def _error(event: dict[str, Any], at: datetime) -> ErrorRecord:
    return ErrorRecord(at=at, message=str(event.get("message") or "error"),
                       detail=str(event.get("detail") or ""))


def epoch_metrics(event: dict[str, Any]) -> dict[str, Any]:
    """An epoch event's figures plus its input and output rates in rows per second."""
    metrics = {name: event[name] for name in _EPOCH_FIGURES if name in event}
    seconds = _int(event.get("duration_ms")) / 1000
    for name in ("rows_in", "rows_out"):
        metrics[f"{name}_per_s"] = round(_int(event.get(name)) / seconds, 3) if seconds else 0.0
    return metrics


def _checkpoint(event: dict[str, Any], at: datetime) -> CheckpointRecord | None:
    try:
        epoch = int(event["epoch"])
    except (KeyError, TypeError, ValueError):
        log.warning("ignoring an epoch event without an epoch number")
        return None
    committed_ms = event.get("committed_at_ms")
    committed_at = _from_ms(committed_ms) if isinstance(committed_ms, int | float) else at
    return CheckpointRecord(epoch=epoch, committed_at=committed_at,
                            duration_ms=_int(event.get("duration_ms")),
                            state_bytes=_int(event.get("state_bytes")),
                            rows_in=_int(event.get("rows_in")),
                            rows_out=_int(event.get("rows_out")),
                            bytes_in=_int(event.get("bytes_in")),
                            bytes_out=_int(event.get("bytes_out")))


def _event_time(event: dict[str, Any]) -> datetime:
    at_ms = event.get("at_ms")
    return _from_ms(at_ms) if isinstance(at_ms, int | float) else datetime.now(UTC)


def _from_ms(millis: float) -> datetime:
    return datetime.fromtimestamp(millis / 1000, UTC)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0
