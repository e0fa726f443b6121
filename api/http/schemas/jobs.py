"""Bodies of the jobs resource: runs of a pipeline, their history, checkpoints, errors
and metrics."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, computed_field

from spate.api.job_metrics import EpochFigures, parse_epoch_figures
from spate.api.job_metrics import live as live_figure
from spate.api.models import Job
from spate.scheduler.store import IDLE, LIVE_STATES, TERMINAL_STATES, JobKind, JobState

RESUMES_AT = ("idle: when its sources have input again and a new job starts by itself; "
              "null otherwise")


def resumes_at(job: Job) -> datetime | None:
    return job.next_attempt_at if job.state == IDLE else None  # a watch job's: not known


class JobStateFlags(BaseModel):
    """A job's state, and what it means for a client (the console reads these rather
    than keeping lists of states)."""

    state: JobState

    @computed_field(description="the job has not ended (deleting its pipeline stops it first)")
    def active(self) -> bool:
        return self.state not in TERMINAL_STATES

    @computed_field(description="the job has run and not ended: its rates are its latest "
                                "epoch's")
    def live(self) -> bool:
        return self.state in LIVE_STATES


class JobSummary(JobStateFlags):
    """A pipeline's current (latest) run, as shown with the pipeline."""

    id: str
    parallelism: int
    cluster: str | None = Field(description="the Spark cluster it runs on; null: the "
                                            "deployment's default cluster")
    started_at: datetime | None
    last_epoch: int | None
    failure_message: str | None
    resumes_at: datetime | None = Field(description=RESUMES_AT)
    rows_in_per_s: float | None = Field(
        description="input rows per second, latest epoch; 0 while idle, null once ended")
    rows_out_per_s: float | None = Field(
        description="output rows per second, latest epoch; 0 while idle, null once ended")

    @classmethod
    def of(cls, job: Job) -> JobSummary:
        figures = parse_epoch_figures(job.metrics)
        return cls(id=job.id, state=job.shown_state,  # type: ignore[arg-type]
                   parallelism=job.parallelism, cluster=job.cluster, started_at=job.started_at,
                   last_epoch=job.last_epoch, failure_message=job.failure_message,
                   resumes_at=resumes_at(job),
                   rows_in_per_s=live_figure(job, figures.rows_in_per_s),
                   rows_out_per_s=live_figure(job, figures.rows_out_per_s))


class JobPublic(JobStateFlags):
    """One run of a pipeline (or a preview), from its start until it ends."""

    id: str
    kind: JobKind
    pipeline: str | None = Field(description="the pipeline's name; null for a preview")
    pipeline_id: str | None
    pipeline_version: int | None
    parallelism: int
    checkpoint_interval_ms: int | None
    restart_generation: int
    stop_mode: str | None = Field(description="how a stop was asked for, once it was")
    backend: str
    cluster: str | None = Field(description="the Spark cluster it runs on; null: the "
                                            "deployment's default cluster")
    attempt: int = Field(description="automatic restarts after a crash so far")
    failure_message: str | None
    resumes_at: datetime | None = Field(description=RESUMES_AT)
    last_epoch: int | None
    heartbeat_at: datetime | None
    created_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    updated_at: datetime

    @classmethod
    def of(cls, job: Job, pipeline_name: str | None) -> JobPublic:
        return cls(
            id=job.id, kind=job.kind, pipeline=pipeline_name,  # type: ignore[arg-type]
            pipeline_id=job.pipeline_id, pipeline_version=job.pipeline_version,
            state=job.shown_state, parallelism=job.parallelism,  # type: ignore[arg-type]
            checkpoint_interval_ms=job.checkpoint_interval_ms,
            restart_generation=job.restart_generation, stop_mode=job.stop_mode,
            backend=job.backend, cluster=job.cluster, attempt=job.attempt,
            failure_message=job.failure_message, resumes_at=resumes_at(job),
            last_epoch=job.last_epoch, heartbeat_at=job.heartbeat_at, created_at=job.created_at,
            started_at=job.started_at, ended_at=job.ended_at, updated_at=job.updated_at)


class JobEventPublic(BaseModel):
    """One state change of a job."""

    model_config = ConfigDict(from_attributes=True)

    at: datetime
    state: JobState
    message: str


class JobCheckpointPublic(BaseModel):
    """One committed epoch."""

    model_config = ConfigDict(from_attributes=True)

    epoch: int
    committed_at: datetime
    duration_ms: int
    state_bytes: int
    rows_in: int
    rows_out: int


class JobErrorPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    at: datetime
    message: str
    detail: str


class OperatorMetrics(BaseModel):
    """One operator (a source, a query's operators, a sink) of the job's plan."""

    operator: str = Field(description="source:<table>, sink:<table>, or a query by its sink")
    kind: str | None
    rows_in: int | None = Field(description="rows into it in the latest epoch")
    rows_out: int | None = Field(description="rows out of it in the latest epoch")
    rows_in_per_s: float | None = Field(
        None, description="rows into it per second of wall time over the job's last minute")
    rows_out_per_s: float | None = Field(
        None, description="rows out of it per second of wall time over the job's last minute")
    busy_ratio: float | None = Field(
        None, description="the share of the job's last minute its own work took (a query's "
                          "Spate operators: their state tasks; a sink: its write); null for "
                          "sources and native queries, which run inside those")


class JobMetrics(BaseModel):
    """A job's latest epoch: throughput, backpressure and lag. Unknown figures are null."""

    job_id: str
    state: JobState
    epoch: int | None
    rows_in: int | None = Field(description="rows read in the latest epoch")
    rows_out: int | None = Field(description="rows written in the latest epoch")
    rows_in_per_s: float | None = Field(description="0 while idle, null once ended")
    rows_out_per_s: float | None = Field(description="0 while idle, null once ended")
    duration_ms: int | None = Field(description="how long the latest epoch took")
    backpressure: float | None = Field(
        description="busy ratio: the epoch's duration over the wall time since the previous "
                    "epoch started (near 1: the job cannot keep up with its input); 0 while "
                    "idle, null once ended")
    watermark_us: int | None = Field(description="event time the job has completed (µs)")
    watermark_lag_s: float | None = Field(description="now minus the watermark, in seconds")
    state_bytes: int | None = Field(description="bytes of state the latest epoch wrote")
    state_cache_hits: int | None = Field(
        description="state reads of the latest epoch served by the tasks' local caches")
    state_cache_misses: int | None = Field(
        description="state reads of the latest epoch that went to the state store")
    state_remote_bytes: int | None = Field(
        description="bytes the latest epoch read from the state store")
    operators: list[OperatorMetrics]

    @classmethod
    def of(cls, job: Job, now: datetime) -> JobMetrics:
        figures: EpochFigures = parse_epoch_figures(job.metrics)
        return cls(
            job_id=job.id, state=job.shown_state, epoch=figures.epoch,  # type: ignore[arg-type]
            rows_in=figures.rows_in, rows_out=figures.rows_out,
            rows_in_per_s=live_figure(job, figures.rows_in_per_s),
            rows_out_per_s=live_figure(job, figures.rows_out_per_s),
            duration_ms=figures.duration_ms, backpressure=live_figure(job, figures.busy_ratio),
            watermark_us=figures.watermark_us, watermark_lag_s=figures.watermark_lag_s(now),
            state_bytes=figures.state_bytes, state_cache_hits=figures.cache_hits,
            state_cache_misses=figures.cache_misses, state_remote_bytes=figures.remote_bytes,
            operators=[OperatorMetrics(operator=o.operator, kind=o.kind, rows_in=o.rows_in,
                                       rows_out=o.rows_out,
                                       rows_in_per_s=live_figure(job, o.rows_in_per_s),
                                       rows_out_per_s=live_figure(job, o.rows_out_per_s),
                                       busy_ratio=live_figure(job, o.busy_ratio))
                       for o in figures.operators])

