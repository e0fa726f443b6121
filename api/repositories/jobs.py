"""A tenant's jobs: runs of its pipelines and previews, with their state history,
checkpoints and errors.

The scheduler writes these rows; the API reads them, creates preview jobs (each
admitted by the tenant's plan first) and asks a preview to stop.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Select, select
from sqlalchemy.orm import Session

from spate.api.http.errors import NotFoundError
from spate.api.ids import new_id
from spate.api.models import (
    Job,
    JobCheckpoint,
    JobError,
    JobEvent,
    Pipeline,
    utc_now,
)
from spate.api.planning.sql import PlannedSource
from spate.api.quotas import new_preview
from spate.api.repositories.base import TenantRepository, page, transaction
from spate.api.repositories.quotas import QuotaRepository
from spate.scheduler.store import TERMINAL_STATES


@dataclass(frozen=True)
class JobFilter:
    """Which jobs a listing returns."""

    pipeline_name: str | None = None
    state: str | None = None
    kind: str | None = None


class JobRepository(TenantRepository):
    """The jobs of one tenant; ``quotas`` admits previews (without it, the repository
    reads jobs and stops them, and creates none)."""

    def __init__(self, session: Session, tenant_id: str,
                 quotas: QuotaRepository | None = None) -> None:
        super().__init__(session, tenant_id)
        self.quotas = quotas

    def list_jobs(self, where: JobFilter, after: str | None,
                  limit: int) -> tuple[list[Job], str | None]:
        statement = select(Job)
        if where.pipeline_name is not None:
            statement = statement.join(Pipeline, Pipeline.id == Job.pipeline_id).where(
                Pipeline.name == where.pipeline_name)
        if where.state is not None:
            statement = statement.where(Job.state == where.state)
        if where.kind is not None:
            statement = statement.where(Job.kind == where.kind)
        return page(self.session, statement, Job.id, after, limit)

    def get(self, job_id: str) -> Job:
        job = self.session.scalars(select(Job).where(Job.id == job_id)).one_or_none()
        if job is None:
            raise NotFoundError(f"job '{job_id}' not found")
        return job

    def pipeline_names(self, jobs: Iterable[Job]) -> dict[str, str]:
        """The names of the jobs' pipelines, by pipeline id."""
        ids = {job.pipeline_id for job in jobs if job.pipeline_id is not None}
        if not ids:
            return {}
        rows = self.session.execute(select(Pipeline.id, Pipeline.name).where(
            Pipeline.id.in_(ids)))
        return {pipeline_id: name for pipeline_id, name in rows}

    def events(self, job_id: str, after: str | None,
               limit: int) -> tuple[list[JobEvent], str | None]:
        return self._children(JobEvent, job_id, after, limit)

    def checkpoints(self, job_id: str, after: str | None,
                    limit: int) -> tuple[list[JobCheckpoint], str | None]:
        return self._children(JobCheckpoint, job_id, after, limit)

    def errors(self, job_id: str, after: str | None,
               limit: int) -> tuple[list[JobError], str | None]:
        return self._children(JobError, job_id, after, limit)

    def create_preview(self, sql: str, parallelism: int, backend: str,
                       sources: Sequence[PlannedSource]) -> Job:
        """A preview job in state ``created``, for the scheduler to start, once the plan
        admits it (``sources``: what its planned SQL reads); refused: 429 while live
        previews stand in the way, else 403."""
        if self.quotas is None:
            raise RuntimeError("creating a preview needs the tenant's quotas")
        self.quotas.admit(new_preview(parallelism, sources))
        now = utc_now()
        job = Job(id=new_id(), kind="preview", sql=sql, state="created",
                  parallelism=parallelism, restart_generation=0, backend=backend, attempt=0,
                  created_at=now, updated_at=now)
        with transaction(self.session, "a job with this id exists; retry"):
            self.session.add(job)
        return job

    def request_stop(self, job_id: str, mode: str) -> Job:
        """Ask a job to stop (``mode``); a job already asked or ended is left as it is."""
        job = self.get(job_id)
        if job.stop_mode is None and job.state not in TERMINAL_STATES:
            with transaction(self.session, f"job '{job_id}' changed concurrently; retry"):
                job.stop_mode = mode
                job.updated_at = utc_now()
        return job

    def _children(self, model: Any, job_id: str, after: str | None,
                  limit: int) -> tuple[list[Any], str | None]:
        self.get(job_id)  # another tenant's (or no) job is a 404, not an empty page
        statement: Select[Any] = select(model).where(model.job_id == job_id)
        return page(self.session, statement, model.id, after, limit)
