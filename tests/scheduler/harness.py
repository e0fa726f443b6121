"""A running scheduler for the end-to-end tests, and helpers to drive and watch it."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from celery import Celery
from sqlalchemy import select, update

from spate.api.db import Database
from spate.api.models import (
    Job,
    JobCheckpoint,
    JobError,
    JobEvent,
    Pipeline,
    PipelineVersion,
    Tenant,
)
from spate.api.repositories.control import SqlControlStore
from spate.scheduler.client import SchedulerClient
from spate.scheduler.embedded import EmbeddedWorker
from spate.scheduler.service import Scheduler
from spate.scheduler.store import JobView
from tests.engine.connectors.generators.nexmark_reference import event_kinds

#: Event times are fixed, so windows and counts do not depend on when a test runs.
NEXMARK_BASE_TIME_MS = 1_700_000_000_000


def windowed_bids_sql(out: str, event_rate: int, runtime_s: int, batch: int) -> str:
    """Bids per second of a bounded Nexmark stream into a JSON-lines file (``out`` is
    relative to the tenant's storage root: :meth:`Harness.output` finds it)."""
    return f"""
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{event_rate}',
    runtime = '{runtime_s}', max_events_per_batch = '{batch}',
    'nexmark.base_time_ms' = '{NEXMARK_BASE_TIME_MS}');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
    type = 'sink');
INSERT INTO out SELECT w.end AS window_end, n
FROM (SELECT TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n
      FROM nexmark WHERE bid IS NOT NULL GROUP BY w);
"""


def expected_bids(event_rate: int, runtime_s: int) -> int:
    """How many bids that stream holds (the generator is deterministic)."""
    _, _, bids = event_kinds(np.arange(event_rate * runtime_s, dtype=np.int64))
    return int(bids.sum())


def new_pipeline(database: Database, sql: str = "SELECT 1", tenant_id: str | None = None,
                 **settings: Any) -> Pipeline:
    """A pipeline at version 1 (desired state as given, default running) of a new tenant,
    or of ``tenant_id``."""
    with database.sessions() as session, session.begin():
        name = "p" if tenant_id is None else f"p-{secrets.token_hex(4)}"
        if tenant_id is None:
            tenant = Tenant(name=f"t-{secrets.token_hex(6)}")
            session.add(tenant)
            session.flush()
            tenant_id = tenant.id
        pipeline = Pipeline(tenant_id=tenant_id, name=name, **settings)
        session.add(pipeline)
        session.flush()
        session.add(PipelineVersion(
            tenant_id=tenant_id, pipeline_id=pipeline.id, version=1, sql=sql,
            sql_sha256=hashlib.sha256(sql.encode()).hexdigest()))
        return pipeline


@dataclass
class Harness:
    database: Database
    store: SqlControlStore
    scheduler: Scheduler
    app: Celery
    client: SchedulerClient
    worker: EmbeddedWorker

    def add_pipeline(self, sql: str, parallelism: int = 1, tenant_id: str | None = None,
                     **settings: Any) -> str:
        """A new pipeline that wants to run (of a new tenant, or of ``tenant_id``), and the
        API's poke about it."""
        pipeline_id = new_pipeline(self.database, sql, tenant_id, parallelism=parallelism,
                                   **settings).id
        self.client.pipeline_changed(pipeline_id)
        return pipeline_id

    def tenant_of(self, pipeline_id: str) -> str:
        with self.database.sessions() as session:
            pipeline = session.get(Pipeline, pipeline_id)
            assert pipeline is not None
            return pipeline.tenant_id

    def output(self, pipeline_id: str, name: str) -> Path:
        """Where a file the pipeline's SQL names ``name`` is: in its tenant's storage root."""
        with self.database.sessions() as session:
            pipeline = session.get(Pipeline, pipeline_id)
            assert pipeline is not None
            tenant_id = pipeline.tenant_id
        return self.scheduler.workspace.tenants.space(tenant_id).storage_root / name

    def change_pipeline(self, pipeline_id: str, **values: Any) -> None:
        """Set desired-state columns, as the API does, and poke the scheduler."""
        with self.database.sessions() as session, session.begin():
            session.execute(update(Pipeline).where(Pipeline.id == pipeline_id).values(**values))
        self.client.pipeline_changed(pipeline_id)

    def jobs(self, pipeline_id: str) -> list[Job]:
        with self.database.sessions() as session:
            return list(session.scalars(select(Job).where(Job.pipeline_id == pipeline_id)
                                        .order_by(Job.id)))

    def job(self, job_id: str) -> Job:
        with self.database.sessions() as session:
            job = session.get(Job, job_id)
            assert job is not None
            return job

    def history(self, job_id: str) -> list[tuple[str, str]]:
        with self.database.sessions() as session:
            return [(e.state, e.message) for e in session.scalars(
                select(JobEvent).where(JobEvent.job_id == job_id)
                .order_by(JobEvent.at, JobEvent.id))]

    def errors(self, job_id: str) -> list[str]:
        with self.database.sessions() as session:
            return list(session.scalars(select(JobError.message).where(
                JobError.job_id == job_id).order_by(JobError.at)))

    def checkpoints(self, job_id: str) -> list[int]:
        with self.database.sessions() as session:
            return list(session.scalars(select(JobCheckpoint.epoch).where(
                JobCheckpoint.job_id == job_id).order_by(JobCheckpoint.epoch)))

    def wait_for(self, what: str, check: Callable[[], Any], timeout_s: float = 120.0) -> Any:
        """Poll ``check`` until it returns something truthy; fail naming ``what``."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            result = check()
            if result:
                return result
            time.sleep(0.25)
        raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}; "
                             f"jobs: {self.describe()}")

    def wait_for_job(self, pipeline_id: str, states: tuple[str, ...], index: int = -1,
                     timeout_s: float = 120.0) -> Job:
        def check() -> Job | None:
            jobs = self.jobs(pipeline_id)
            if jobs and len(jobs) > (index if index >= 0 else -index - 1):
                job = jobs[index]
                return job if job.state in states else None
            return None
        return self.wait_for(f"pipeline {pipeline_id}'s job in {states}", check, timeout_s)

    def view(self, job_id: str) -> JobView:
        view = self.store.job(job_id)
        assert view is not None
        return view

    def handles(self) -> list[dict[str, Any]]:
        with self.database.sessions() as session:
            return [job.handle for job in session.scalars(select(Job)) if job.handle]

    def describe(self) -> str:
        with self.database.sessions() as session:
            return "; ".join(f"{j.id} {j.state} attempt={j.attempt} {j.failure_message or ''}"
                             for j in session.scalars(select(Job)))


def impulse_sql(out: str, event_rate: int = 50) -> str:
    """An unbounded counter stream into a JSON-lines file (relative to the storage root)."""
    return f"""
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '{event_rate}');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
    type = 'sink');
INSERT INTO out SELECT counter, subtask_index FROM ticks;
"""


def written_lines(path: Path) -> list[str]:
    """The whole lines of a file a running pipeline appends to: a line the sink is still
    writing (no newline yet) is left for the next read, as a tailing reader would."""
    if not path.exists():
        return []
    text = path.read_text()
    return text[:text.rfind("\n") + 1].splitlines()


def channel_events(job_dir: Path) -> list[dict[str, Any]]:
    """The events a job with a file channel published, oldest first."""
    path = job_dir / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]
