"""Views of pipelines and jobs for the pure scheduler tests."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from spate.scheduler.store import JobView, PipelineView

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def pipeline(**changes: Any) -> PipelineView:
    base = PipelineView(id="p1", tenant_id="t1", desired_state="running", stop_mode=None,
                        restart_generation=0, restart_with_state=True, parallelism=1,
                        checkpoint_interval_ms=None, current_version=1)
    return replace(base, **changes)


def job(job_id: str = "j1", **changes: Any) -> JobView:
    base = JobView(id=job_id, tenant_id="t1", pipeline_id="p1", kind="run", state="running",
                   parallelism=1, checkpoint_interval_ms=None, restart_generation=0,
                   stop_mode=None, backend="local", handle={"pid": 1}, channel_url=None,
                   channel_cursor=None, attempt=0, next_attempt_at=None, heartbeat_at=NOW,
                   last_epoch=None, created_at=NOW, updated_at=NOW, sql="SELECT 1",
                   state_since=NOW)
    return replace(base, **changes)
