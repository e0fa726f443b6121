"""/jobs and /pipelines/{name}/jobs: runs of pipelines (and previews), read-only.

The scheduler writes jobs, their state history, checkpoints, errors and latest
metrics; these routes read them for any role of the tenant.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from spate.api.http.deps import JobsRead, PipelinesRead
from spate.api.http.errors import ERROR_RESPONSES
from spate.api.http.pagination import DEFAULT_LIMIT, CursorQuery, LimitQuery, Page, decode_cursor
from spate.api.http.schemas.jobs import (
    JobCheckpointPublic,
    JobErrorPublic,
    JobEventPublic,
    JobMetrics,
    JobPublic,
)
from spate.api.models import Job, utc_now
from spate.api.repositories.jobs import JobFilter, JobRepository
from spate.scheduler.store import JobKind, JobState

router = APIRouter(tags=["jobs"], responses=ERROR_RESPONSES)

JobIdPath = Annotated[str, Path(max_length=64, description="the job's id")]
NamePath = Annotated[str, Path(max_length=63, description="the pipeline's name")]
StateQuery = Annotated[JobState | None, Query(description="only jobs in this state")]
KindQuery = Annotated[JobKind | None, Query(description="run or preview")]


@router.get("/jobs", response_model=Page[JobPublic])
def list_jobs(
    jobs: JobsRead,
    limit: LimitQuery = DEFAULT_LIMIT,
    cursor: CursorQuery = None,
    pipeline: Annotated[str | None, Query(max_length=63,
                                          description="only runs of this pipeline")] = None,
    state: StateQuery = None,
    kind: KindQuery = None,
) -> Page[JobPublic]:
    """The tenant's jobs, oldest first, optionally filtered."""
    where = JobFilter(pipeline_name=pipeline, state=state, kind=kind)
    return _page(jobs, *jobs.list_jobs(where, decode_cursor(cursor), limit))


@router.get("/pipelines/{name}/jobs", response_model=Page[JobPublic])
def list_pipeline_jobs(name: NamePath, pipelines: PipelinesRead, jobs: JobsRead,
                       limit: LimitQuery = DEFAULT_LIMIT, cursor: CursorQuery = None,
                       state: StateQuery = None) -> Page[JobPublic]:
    """A pipeline's runs, oldest first; the last is its current one."""
    pipelines.get(name)  # an unknown pipeline is a 404, not an empty page
    where = JobFilter(pipeline_name=name, state=state)
    return _page(jobs, *jobs.list_jobs(where, decode_cursor(cursor), limit))


@router.get("/jobs/{job_id}", response_model=JobPublic)
def get_job(job_id: JobIdPath, jobs: JobsRead) -> JobPublic:
    job = jobs.get(job_id)
    return JobPublic.of(job, jobs.pipeline_names([job]).get(job.pipeline_id or ""))


@router.get("/jobs/{job_id}/events", response_model=Page[JobEventPublic])
def list_job_events(job_id: JobIdPath, jobs: JobsRead, limit: LimitQuery = DEFAULT_LIMIT,
                    cursor: CursorQuery = None) -> Page[JobEventPublic]:
    """The job's state history, oldest first."""
    return Page[JobEventPublic].of_rows(*jobs.events(job_id, decode_cursor(cursor), limit))


@router.get("/jobs/{job_id}/checkpoints", response_model=Page[JobCheckpointPublic])
def list_job_checkpoints(job_id: JobIdPath, jobs: JobsRead, limit: LimitQuery = DEFAULT_LIMIT,
                         cursor: CursorQuery = None) -> Page[JobCheckpointPublic]:
    """The job's committed epochs, oldest first."""
    return Page[JobCheckpointPublic].of_rows(
        *jobs.checkpoints(job_id, decode_cursor(cursor), limit))


@router.get("/jobs/{job_id}/errors", response_model=Page[JobErrorPublic])
def list_job_errors(job_id: JobIdPath, jobs: JobsRead, limit: LimitQuery = DEFAULT_LIMIT,
                    cursor: CursorQuery = None) -> Page[JobErrorPublic]:
    """Errors the job reported, oldest first."""
    return Page[JobErrorPublic].of_rows(*jobs.errors(job_id, decode_cursor(cursor), limit))


@router.get("/jobs/{job_id}/metrics", response_model=JobMetrics)
def get_job_metrics(job_id: JobIdPath, jobs: JobsRead) -> JobMetrics:
    """The job's latest epoch: rows and rates, per operator too; backpressure; lag."""
    return JobMetrics.of(jobs.get(job_id), utc_now())


def _page(jobs: JobRepository, rows: list[Job], next_cursor: str | None) -> Page[JobPublic]:
    names = jobs.pipeline_names(rows)
    return Page[JobPublic](
        items=[JobPublic.of(job, names.get(job.pipeline_id or "")) for job in rows],
        next_cursor=next_cursor)
