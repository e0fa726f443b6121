"""A tenant's pipelines, their immutable SQL versions and their desired state.

Desired state (run or stop, and how; restarts; parallelism; cluster) is only recorded
here; the scheduler makes it true and records jobs, which this repository
reads to show a pipeline's current run and to refuse deleting a running one.
Every write that admits something — a new pipeline, new SQL, a new job — is
checked against the tenant's plan first (:class:`~spate.api.repositories.quotas.
QuotaRepository`), in the transaction that writes it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session, lazyload

from spate.api.http.errors import BadRequestError, ConflictError, NotFoundError
from spate.api.ids import new_id
from spate.api.models import (
    DeletedPipeline,
    Job,
    Pipeline,
    PipelineVersion,
    utc_now,
)
from spate.api.planning.sql import PlannedSource
from spate.api.quotas import Demand, new_pipeline, new_sources, pipeline_change
from spate.api.repositories.base import TenantRepository, page, transaction
from spate.api.repositories.quotas import QuotaRepository
from spate.scheduler.store import DESIRED_RUNNING, DESIRED_STOPPED, TERMINAL_STATES

#: Settings compared by PUT: an existing pipeline must match them to be returned.
_SPEC_FIELDS = ("description", "parallelism", "checkpoint_interval_ms", "autoscale_min",
                "autoscale_max")


@dataclass(frozen=True)
class PipelineFilter:
    """Which pipelines a listing returns."""

    name_prefix: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


def sql_sha256(sql: str) -> str:
    return hashlib.sha256(sql.encode("utf-8")).hexdigest()


def setting_columns(settings: dict[str, Any], pipeline: Pipeline | None = None
                    ) -> dict[str, Any]:
    """The API's settings as the pipeline's columns: ``autoscale`` (a range, or None: off)
    as its bounds, and the parallelism kept within them. A parallelism set through the
    API is nobody's autoscale decision; one outside the pipeline's range is a 400."""
    columns = dict(settings)
    if "autoscale" in columns:
        autoscale = columns.pop("autoscale")
        columns["autoscale_min"] = None if autoscale is None else autoscale.min
        columns["autoscale_max"] = None if autoscale is None else autoscale.max
    low = columns.get("autoscale_min", pipeline.autoscale_min if pipeline else None)
    high = columns.get("autoscale_max", pipeline.autoscale_max if pipeline else None)
    parallelism = columns.get("parallelism", pipeline.parallelism if pipeline else 1)
    if low is not None and high is not None and not low <= parallelism <= high:
        if "parallelism" in settings:
            raise BadRequestError(
                f"parallelism {parallelism} is outside the pipeline's autoscale range "
                f"{low}–{high}; change the range, or turn autoscaling off (autoscale: null)")
        columns["parallelism"] = min(max(parallelism, low), high)
    if "parallelism" in columns or "autoscale_min" in columns:
        columns["autoscale_reason"] = None
        columns["autoscaled_at"] = None
    return columns


def desired_state_changes(stop: str) -> dict[str, Any]:
    """The pipeline columns a ``stop`` control sets: ``none`` runs, the rest stop that way."""
    if stop == "none":
        return {"desired_state": DESIRED_RUNNING, "stop_mode": None}
    return {"desired_state": DESIRED_STOPPED, "stop_mode": stop}


class PipelineRepository(TenantRepository):
    """The pipelines of one tenant; ``quotas`` admits what their writes ask for."""

    def __init__(self, session: Session, tenant_id: str, quotas: QuotaRepository) -> None:
        super().__init__(session, tenant_id)
        self.quotas = quotas

    def create(self, name: str, sql: str, settings: dict[str, Any],
               created_by_key_id: str | None, sources: Sequence[PlannedSource]) -> Pipeline:
        """A new pipeline at version 1 (``sources``: what its planned SQL reads); an
        existing name is a 409, a pipeline the plan has no room for a 403."""
        if self._find(name) is not None:
            raise ConflictError(f"a pipeline named '{name}' already exists; choose another "
                                "name, or delete it first")
        now = utc_now()
        pipeline = Pipeline(id=new_id(), name=name, current_version=1, created_at=now,
                            updated_at=now, **setting_columns(settings))
        pipeline.versions.append(self._version(pipeline, 1, sql, created_by_key_id))
        self.quotas.admit(new_pipeline(pipeline.parallelism,
                                       pipeline.desired_state == DESIRED_RUNNING, sources))
        self._admit_range(pipeline.autoscale_max)
        with transaction(self.session, f"a pipeline named '{name}' was created concurrently"):
            self.session.add(pipeline)
        return self.get(name)

    def create_or_get(self, name: str, sql: str, settings: dict[str, Any],
                      created_by_key_id: str | None,
                      sources: Sequence[PlannedSource]) -> tuple[Pipeline, bool]:
        """The pipeline ``name`` as given, creating it if absent: (pipeline, created).

        An existing pipeline with other SQL or settings is a 409 naming the
        differences, so a retried PUT is harmless and a conflicting one is loud.
        """
        existing = self._find(name)
        if existing is None:
            try:
                return self.create(name, sql, settings, created_by_key_id, sources), True
            except ConflictError:
                existing = self.get(name)  # created by a concurrent PUT
        wanted = setting_columns(settings)
        differences = [field for field in _SPEC_FIELDS
                       if getattr(existing, field) != wanted.get(field)]
        if existing.current.sql_sha256 != sql_sha256(sql):
            differences.insert(0, "sql")
        if differences:
            raise ConflictError(
                f"pipeline '{name}' exists with a different {', '.join(differences)}; "
                f"add a version or PATCH it instead",
                details=[{"field": field} for field in differences],
            )
        return existing, False

    def list_pipelines(self, where: PipelineFilter, after: str | None,
             limit: int) -> tuple[list[Pipeline], str | None]:
        statement = select(Pipeline)
        if where.name_prefix:
            escaped = where.name_prefix.replace("\\", "\\\\").replace("%", "\\%")
            escaped = escaped.replace("_", "\\_")
            statement = statement.where(Pipeline.name.like(f"{escaped}%", escape="\\"))
        if where.created_after is not None:
            statement = statement.where(Pipeline.created_at > where.created_after)
        if where.created_before is not None:
            statement = statement.where(Pipeline.created_at < where.created_before)
        return page(self.session, statement, Pipeline.id, after, limit)

    def get(self, name: str) -> Pipeline:
        pipeline = self._find(name)
        if pipeline is None:
            raise NotFoundError(f"pipeline '{name}' not found")
        return pipeline

    def update(self, name: str, changes: dict[str, Any]) -> Pipeline:
        """Set settings and desired-state columns (see :func:`desired_state_changes`);
        a start or a higher parallelism is admitted by the plan first."""
        pipeline = self.get(name)
        changes = setting_columns(changes, pipeline)
        self._admit(pipeline, running=changes.get("desired_state", pipeline.desired_state)
                    == DESIRED_RUNNING,
                    parallelism=changes.get("parallelism", pipeline.parallelism))
        if changes.get("autoscale_max") is not None:
            self._admit_range(changes["autoscale_max"])
        with transaction(self.session, f"pipeline '{name}' changed concurrently; retry"):
            for field, value in changes.items():
                setattr(pipeline, field, value)
            if changes:
                pipeline.updated_at = utc_now()
        return pipeline

    def restart(self, name: str, with_state: bool) -> Pipeline:
        """Ask for a new job (the running one, if any, is replaced); the pipeline runs."""
        pipeline = self.get(name)
        self._admit(pipeline, running=True, parallelism=pipeline.parallelism,
                    replaces_job=True)
        with transaction(self.session, f"pipeline '{name}' changed concurrently; retry"):
            pipeline.restart_generation += 1
            pipeline.restart_with_state = with_state
            pipeline.desired_state = DESIRED_RUNNING
            pipeline.stop_mode = None
            pipeline.updated_at = utc_now()
        return pipeline

    def move(self, name: str, cluster: str) -> Pipeline:
        """Record that the pipeline runs on ``cluster`` from now on; the pipeline runs.

        The scheduler stops a job running elsewhere after an epoch commits and
        starts one on ``cluster``, as it does for a rescale; a stopped pipeline,
        or one whose last job ended elsewhere, starts there.
        """
        pipeline = self.get(name)
        self._admit(pipeline, running=True, parallelism=pipeline.parallelism,
                    replaces_job=cluster != pipeline.cluster)
        with transaction(self.session, f"pipeline '{name}' changed concurrently; retry"):
            pipeline.cluster = cluster
            pipeline.desired_state = DESIRED_RUNNING
            pipeline.stop_mode = None
            pipeline.updated_at = utc_now()
        return pipeline

    def delete(self, name: str, *, forced: bool = False) -> None:
        """Delete a pipeline with no active job; one with an active job is a 409.

        The pipeline row is locked (on PostgreSQL) before jobs are checked, so a
        job the scheduler inserts concurrently waits for this delete (and then
        fails its foreign key) instead of being deleted with the pipeline while
        its process runs.
        """
        pipeline = self.session.scalars(
            select(Pipeline).where(Pipeline.name == name).options(lazyload(Pipeline.current))
            .with_for_update(of=Pipeline)).one_or_none()
        if pipeline is None:
            self.session.rollback()
            raise NotFoundError(f"pipeline '{name}' not found")
        job = self._active_job(pipeline.id)
        if job is not None:
            self.session.rollback()
            raise ConflictError(_still_running(name, job, forced),
                                details=[{"job_id": job.id, "state": job.state}])
        with transaction(self.session, f"pipeline '{name}' changed concurrently; retry"):
            # Its usage stays for the bill, which names it as it was named.
            self.session.merge(DeletedPipeline(tenant_id=pipeline.tenant_id,
                                               pipeline_id=pipeline.id, name=pipeline.name))
            self.session.delete(pipeline)

    def wait_until_inactive(self, name: str, timeout_s: float, poll_s: float = 0.2) -> None:
        """Return once the pipeline has no active job, or after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            pipeline = self.get(name)
            active = self._active_job(pipeline.id) is not None
            self.session.rollback()  # end the read, so the next one sees new commits
            if not active or time.monotonic() >= deadline:
                return
            time.sleep(poll_s)

    def latest_runs(self, pipelines: Iterable[Pipeline]) -> dict[str, Job]:
        """Each pipeline's latest run job (ids grow with creation), by pipeline id."""
        ids = [p.id for p in pipelines]
        if not ids:
            return {}
        newest = (select(func.max(Job.id)).where(Job.pipeline_id.in_(ids), Job.kind == "run")
                  .group_by(Job.pipeline_id))
        jobs = self.session.scalars(select(Job).where(Job.id.in_(newest)))
        return {job.pipeline_id: job for job in jobs if job.pipeline_id is not None}

    def latest_run(self, pipeline: Pipeline) -> Job | None:
        return self.latest_runs([pipeline]).get(pipeline.id)

    def _active_job(self, pipeline_id: str) -> Job | None:
        return self.session.scalars(select(Job).where(
            Job.pipeline_id == pipeline_id, Job.state.not_in(TERMINAL_STATES),
        ).order_by(Job.id.desc()).limit(1)).first()

    def add_version(self, name: str, sql: str, created_by_key_id: str | None,
                    sources: Sequence[PlannedSource]) -> tuple[PipelineVersion, bool]:
        """Make ``sql`` current as a new version: (version, created); ``sources``, what
        it reads, are admitted by the plan first.

        SQL identical to the current version adds nothing and returns it.
        """
        pipeline = self.get(name)
        if pipeline.current.sql_sha256 == sql_sha256(sql):
            return pipeline.current, False
        self.quotas.admit(new_sources(sources))
        number = pipeline.current_version + 1
        version = self._version(pipeline, number, sql, created_by_key_id)
        with transaction(self.session, f"pipeline '{name}' got a new version concurrently; "
                                       "retry"):
            self.session.add(version)
            pipeline.current_version = number
            pipeline.updated_at = version.created_at
        return version, True

    def state_version(self, name: str) -> PipelineVersion | None:
        """The version whose job wrote the pipeline's state: the one its latest run
        ran (None: it never ran, so it has no state)."""
        job = self.latest_run(self.get(name))
        if job is None or job.pipeline_version is None:
            return None
        return self.get_version(name, job.pipeline_version)

    def list_versions(self, name: str, after: str | None,
                      limit: int) -> tuple[list[PipelineVersion], str | None]:
        pipeline = self.get(name)
        statement = select(PipelineVersion).where(PipelineVersion.pipeline_id == pipeline.id)
        return page(self.session, statement, PipelineVersion.id, after, limit)

    def get_version(self, name: str, number: int) -> PipelineVersion:
        pipeline = self.get(name)
        version = self.session.scalars(select(PipelineVersion).where(
            PipelineVersion.pipeline_id == pipeline.id, PipelineVersion.version == number,
        )).one_or_none()
        if version is None:
            raise NotFoundError(f"pipeline '{name}' has no version {number}")
        return version

    def _admit(self, pipeline: Pipeline, *, running: bool, parallelism: int,
               replaces_job: bool = False) -> None:
        """Admit the pipeline's new desired state; a new job's sources are those of its
        current SQL, planned again (its connection tables may have changed)."""
        demand: Demand = pipeline_change(pipeline.desired_state == DESIRED_RUNNING,
                                         pipeline.parallelism, running, parallelism,
                                         replaces_job)
        if demand.new_job:
            demand = replace(demand, sources=self.quotas.sources_of(pipeline.current.sql))
        self.quotas.admit(demand)

    def _admit_range(self, autoscale_max: int | None) -> None:
        """An autoscale range reaches no higher than the plan lets one pipeline run."""
        if autoscale_max is not None:
            self.quotas.admit(Demand(parallelism=autoscale_max))

    def _find(self, name: str) -> Pipeline | None:
        return self.session.scalars(select(Pipeline).where(Pipeline.name == name)).one_or_none()

    def _version(self, pipeline: Pipeline, number: int, sql: str,
                 created_by_key_id: str | None) -> PipelineVersion:
        return PipelineVersion(id=new_id(), tenant_id=self.tenant_id, pipeline_id=pipeline.id,
                               version=number, sql=sql, sql_sha256=sql_sha256(sql),
                               created_at=utc_now(), created_by_key_id=created_by_key_id)


def _still_running(name: str, job: Job, forced: bool) -> str:
    if forced:
        return (f"pipeline '{name}' was asked to stop (force) but its job {job.id} is still "
                f"{job.shown_state}; retry the delete in a few seconds")
    return (f"pipeline '{name}' is running (job {job.id} is {job.shown_state}): stop it first "
            "and delete it once the job has stopped, or delete it with force to kill the job")
