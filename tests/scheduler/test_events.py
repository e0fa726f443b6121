"""Folding channel events into checkpoints, errors, metrics, heartbeat and status."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from spate.engine.job.channel import open_channel
from spate.scheduler.events import fold_events


def test_epochs_become_checkpoints_and_the_latest_metrics_with_rates() -> None:
    events = [
        {"type": "status", "state": "running", "at_ms": 1_000},
        {"type": "epoch", "epoch": 0, "committed_at_ms": 2_000, "duration_ms": 500,
         "rows_in": 100, "rows_out": 10, "state_bytes": 64, "bytes_in": 900,
         "bytes_out": 80, "at_ms": 2_001},
        {"type": "heartbeat", "at_ms": 2_500},
        {"type": "epoch", "epoch": 1, "committed_at_ms": 3_000, "duration_ms": 250,
         "rows_in": 50, "rows_out": 5, "rows_late": 1, "operators": [{"id": "w"}],
         "backlog": 12_000, "at_ms": 3_001},
    ]
    batch = fold_events(events)
    assert [c.epoch for c in batch.checkpoints] == [0, 1]
    assert batch.checkpoints[0].committed_at == datetime.fromtimestamp(2, UTC)
    assert batch.checkpoints[0].state_bytes == 64
    assert (batch.checkpoints[0].bytes_in, batch.checkpoints[0].bytes_out) == (900, 80)
    assert batch.checkpoints[1].bytes_in == 0  # not reported: not measured
    assert batch.last_epoch == 1
    assert batch.metrics is not None
    assert batch.metrics["rows_in_per_s"] == 200.0 and batch.metrics["rows_out_per_s"] == 20.0
    assert batch.metrics["operators"] == [{"id": "w"}] and batch.metrics["rows_late"] == 1
    assert batch.metrics["backlog"] == 12_000  # the autoscaler's signal
    assert batch.heartbeat_at == datetime.fromtimestamp(3.001, UTC)
    assert batch.status is not None and batch.status.state == "running"


def test_the_last_status_wins_and_errors_are_kept_in_order() -> None:
    batch = fold_events([
        {"type": "status", "state": "running", "at_ms": 1},
        {"type": "error", "message": "bad row", "detail": "Traceback…", "at_ms": 2},
        {"type": "status", "state": "failed", "message": "bad row", "at_ms": 3},
    ])
    assert batch.status is not None and (batch.status.state, batch.status.message) == (
        "failed", "bad row")
    assert [(e.message, e.detail) for e in batch.errors] == [("bad row", "Traceback…")]


def test_odd_events_are_skipped_not_fatal() -> None:
    batch = fold_events([{"type": "status", "state": "dancing", "at_ms": 1},
                         {"type": "epoch", "at_ms": 2}, {"type": "rows", "rows": [], "at_ms": 3}])
    assert batch.status is None and batch.checkpoints == [] and batch.metrics is None
    assert batch.heartbeat_at == datetime.fromtimestamp(0.003, UTC)


def test_a_zero_duration_epoch_has_zero_rates() -> None:
    batch = fold_events([{"type": "epoch", "epoch": 3, "duration_ms": 0, "rows_in": 5}])
    assert batch.metrics is not None and batch.metrics["rows_in_per_s"] == 0.0


def test_a_killed_attempts_last_words_are_not_the_next_attempts() -> None:
    """Attempt 0 was killed and attempt 1 started; attempt 0 then noticed the kill and
    said it stopped. Its epoch and error happened and are kept; its status and its
    heartbeat are not attempt 1's."""
    events = [
        {"type": "heartbeat", "attempt": 1, "at_ms": 1_000},
        {"type": "epoch", "epoch": 4, "committed_at_ms": 1_500, "duration_ms": 100,
         "rows_in": 7, "attempt": 0, "at_ms": 1_500},
        {"type": "error", "message": "interrupted", "attempt": 0, "at_ms": 1_800},
        {"type": "status", "state": "stopped", "message": "stopped (immediate)",
         "attempt": 0, "at_ms": 2_000},
    ]
    batch = fold_events(events, attempt=1)
    assert batch.status is None, "attempt 0's end would end attempt 1"
    assert batch.heartbeat_at == datetime.fromtimestamp(1, UTC)
    assert [c.epoch for c in batch.checkpoints] == [4] and batch.metrics is None
    assert [e.message for e in batch.errors] == ["interrupted"]
    same = fold_events(events, attempt=0)
    assert same.status is not None and same.status.state == "stopped"
    assert fold_events(events).status is not None, "without an attempt, every event counts"


def test_a_job_channel_stamps_its_attempt(tmp_path: Path) -> None:
    job_end = open_channel(f"file://{tmp_path}", attempt=2)
    job_end.publish({"type": "heartbeat"})
    events, _ = open_channel(f"file://{tmp_path}").read(None)
    assert [event["attempt"] for event in events] == [2]
