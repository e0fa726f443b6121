"""What the scheduler reads and writes in the control plane, as an interface.

The scheduler never imports ``api``: ``spate.api.repositories.control`` implements
:class:`ControlStore` over the control-plane database and ``spate.api.worker``
hands it in. Rows travel as frozen views, so nothing the scheduler holds is
tied to a database session.

Every write that changes a job's state is a compare-and-set on the state the
caller saw (:meth:`ControlStore.transition`), and event ingestion is a
compare-and-set on the channel cursor (:meth:`ControlStore.ingest`), so two
workers acting on one job at once cannot both win: the loser gets ``None``
and moves on.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

from spate.scheduler.autoscale import AutoscaleRange

#: A job's states: ``created`` → ``starting`` → ``running`` → ``stopping`` →
#: ``stopped``; a bounded pipeline ends ``finished``; a job whose process died
#: waits ``restarting`` for its backoff, and ends ``failed`` when its restart
#: budget is spent or it cannot start; a job with no input for its idle period
#: ends ``idle`` (``next_attempt_at``: when its input is due), and its pipeline
#: resumes in a new job then.  Declared here only: the API's models, its database
#: constraint and its metrics read these.
JobState = Literal["created", "starting", "running", "stopping", "restarting", "stopped",
                   "finished", "failed", "idle"]
JOB_STATES: tuple[JobState, ...] = get_args(JobState)
CREATED, STARTING, RUNNING, STOPPING, RESTARTING, STOPPED, FINISHED, FAILED, IDLE = JOB_STATES
#: States a job does not leave, in the order of :data:`JOB_STATES`.
TERMINAL_STATES = (STOPPED, FINISHED, FAILED, IDLE)
#: States in which a job's process may be running.
PROCESS_STATES = frozenset({STARTING, RUNNING, STOPPING})
#: States of a job that has run and not ended: its rates are its latest epoch's
#: (``created`` and ``starting`` have none yet, an ended job's are history).
LIVE_STATES = frozenset({RUNNING, STOPPING, RESTARTING})

#: What a job is: a pipeline's run, or a preview of a query's first rows.
JobKind = Literal["run", "preview"]
JOB_KINDS: tuple[JobKind, ...] = get_args(JobKind)
RUN, PREVIEW = JOB_KINDS
DESIRED_RUNNING, DESIRED_STOPPED = "running", "stopped"


@dataclass(frozen=True)
class PipelineView:
    """A pipeline's desired state and current settings."""

    id: str
    tenant_id: str
    desired_state: str
    stop_mode: str | None
    restart_generation: int
    restart_with_state: bool
    parallelism: int
    checkpoint_interval_ms: int | None
    current_version: int
    #: The Spark cluster its latest move asked for; None: never moved (the default cluster).
    cluster: str | None = None
    #: The parallelism the autoscaler may choose from; None: autoscaling is off.
    autoscale: AutoscaleRange | None = None
    #: When the autoscaler last changed the parallelism, and why.
    autoscaled_at: datetime | None = None
    autoscale_reason: str | None = None


@dataclass(frozen=True)
class JobView:
    """One job as the scheduler sees it."""

    id: str
    tenant_id: str
    pipeline_id: str | None
    kind: str
    state: str
    parallelism: int
    checkpoint_interval_ms: int | None
    restart_generation: int
    stop_mode: str | None
    backend: str
    handle: dict[str, Any] | None
    channel_url: str | None
    channel_cursor: str | None
    attempt: int
    next_attempt_at: datetime | None
    heartbeat_at: datetime | None
    last_epoch: int | None
    created_at: datetime
    updated_at: datetime
    #: The SQL it runs: its pipeline version's, or a preview's own.
    sql: str
    #: When the job entered its current state.
    state_since: datetime | None = None
    #: The newest error the job reported, if any.
    last_error: str | None = None
    #: The Spark cluster it runs on; None: the default cluster (a preview, an older row).
    cluster: str | None = None
    #: A run that watches an idle pipeline's sources without Spark (:mod:`spate.engine.job.watch`).
    watch: bool = False
    #: Its latest epoch's figures, as it reported them (:mod:`spate.engine.job.events`).
    metrics: dict[str, Any] | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


@dataclass(frozen=True)
class CheckpointRecord:
    """One committed epoch, as a ``epoch`` event reported it."""

    epoch: int
    committed_at: datetime
    duration_ms: int
    state_bytes: int
    rows_in: int
    rows_out: int
    #: bytes read from the sources' systems and written to the sinks' (where measured)
    bytes_in: int = 0
    bytes_out: int = 0


@dataclass(frozen=True)
class ErrorRecord:
    at: datetime
    message: str
    detail: str = ""


@dataclass(frozen=True)
class StatusChange:
    """The job state a ``status`` event asks for, with its message."""

    state: str
    message: str
    #: an idle job's: when its sources will have input again (None: not known)
    wake_at: datetime | None = None


@dataclass(frozen=True)
class EventBatch:
    """What one read of a job's channel adds to the job's rows."""

    checkpoints: list[CheckpointRecord] = field(default_factory=list)
    errors: list[ErrorRecord] = field(default_factory=list)
    heartbeat_at: datetime | None = None
    metrics: dict[str, Any] | None = None
    status: StatusChange | None = None

    @property
    def last_epoch(self) -> int | None:
        return max((c.epoch for c in self.checkpoints), default=None)


@dataclass(frozen=True)
class MeteredJob:
    """A job as the meter sees it: whose it is, and where it runs."""

    id: str
    tenant_id: str
    pipeline_id: str | None
    kind: str
    handle: dict[str, Any] | None
    #: Whether its process may run (starting, running or stopping).
    live: bool
    #: The live state its pipeline holds, as its latest epoch reported the state store's
    #: accounting (0: none, or not reported).
    state_held_bytes: int = 0


@dataclass(frozen=True)
class UnitReading:
    """The meter's reading of a compute unit's cumulative counters."""

    unit: str
    tenant_id: str
    #: The process handle the unit is read from.
    source: dict[str, Any]
    cpu_seconds: float
    memory_bytes: int
    read_at: datetime
    #: The jobs it hosted when read.
    jobs: list[str]


@dataclass(frozen=True)
class UsageCharge:
    """A quantity of one dimension that one job used in one minute."""

    job_id: str
    tenant_id: str
    pipeline_id: str | None
    minute: datetime
    dimension: str
    quantity: float


class ControlStore(ABC):
    """The control-plane rows the scheduler works on, across tenants."""

    # -- reading --------------------------------------------------------------

    @abstractmethod
    def pipelines_to_reconcile(self) -> list[str]:
        """Ids of pipelines that want to run or still have a job that is not over."""

    @abstractmethod
    def active_preview_ids(self) -> list[str]:
        """Ids of preview jobs that are not over."""

    @abstractmethod
    def starting_jobs(self) -> int:
        """How many jobs are starting: launched or placed, their query not running yet."""

    @abstractmethod
    def pipeline(self, pipeline_id: str) -> PipelineView | None:
        """The pipeline, or None once it is deleted."""

    @abstractmethod
    def pipeline_jobs(self, pipeline_id: str) -> list[JobView]:
        """Every job of the pipeline that is not over, plus its newest ended one; newest first."""

    @abstractmethod
    def job(self, job_id: str) -> JobView | None:
        """The job, or None once it is deleted."""

    # -- writing --------------------------------------------------------------

    @abstractmethod
    def create_run_job(self, pipeline_id: str, backend: str, message: str,
                       default_cluster: str | None = None, watch: bool = False
                       ) -> JobView | None:
        """A new ``created`` job at the pipeline's current settings, on the cluster the
        pipeline asks for (``default_cluster`` when it was never moved); ``watch``: one
        that watches the idle pipeline's sources until input arrives.

        None when the pipeline is gone or already has a job that is not over
        (checked under a lock on the pipeline, so two workers never create two).
        """

    @abstractmethod
    def transition(self, job_id: str, expected: Collection[str], state: str, message: str,
                   **changes: Any) -> JobView | None:
        """Move the job from one of ``expected`` to ``state``, recording a state event.

        ``changes`` sets other job columns in the same write. None when the
        job is no longer in an ``expected`` state (another worker moved it).
        """

    @abstractmethod
    def update(self, job_id: str, expected: Collection[str], **changes: Any) -> JobView | None:
        """Set job columns while the job is in one of ``expected`` (no state event)."""

    @abstractmethod
    def add_error(self, job_id: str, message: str, detail: str = "") -> None:
        """Record an error the scheduler saw (a process that died, a failed submit)."""

    @abstractmethod
    def request_stop(self, job_id: str, mode: str) -> JobView | None:
        """Record that the job should stop in ``mode`` (``force`` overrides any other)."""

    @abstractmethod
    def ingest(self, job_id: str, cursor_before: str | None, cursor_after: str | None,
               batch: EventBatch) -> JobView | None:
        """Record what the job's channel said since ``cursor_before``, in one transaction.

        Applies ``batch.status`` unless the job is already over. None when the
        cursor moved meanwhile (another worker ingested the same events).
        """

    @abstractmethod
    def tenant_number(self, tenant_id: str) -> int:
        """The tenant's sandbox number (1, 2, …), given on first use and never reused."""

    @abstractmethod
    def job_tables(self, tenant_id: str) -> list[dict[str, Any]]:
        """The tenant's connection tables with secrets decrypted, for a starting job's spec.

        Raises :class:`~spate.scheduler.errors.JobConfigurationError` when they cannot be
        read (for example, secrets encrypted with another key).
        """

    @abstractmethod
    def job_udfs(self, tenant_id: str) -> list[dict[str, str]]:
        """The tenant's UDFs at their current versions, for a starting job's spec: each
        its ``name`` (the SQL calls it by), ``filename`` and ``source``."""

    @abstractmethod
    def record_epoch(self, job_id: str, epoch: int) -> JobView | None:
        """Set the job's ``last_epoch`` to ``epoch`` if that is newer."""

    @abstractmethod
    def autoscale(self, pipeline_id: str, parallelism: int, reason: str, at: datetime) -> bool:
        """Set the pipeline's parallelism to ``parallelism`` as the autoscaler decided at
        ``at`` for ``reason`` (which its job's replacement then gives as its own); False
        when its autoscaling was turned off meanwhile."""

    # -- metering (see spate.scheduler.metering) --------------------------------

    @abstractmethod
    def meter_units(self) -> list[UnitReading]:
        """The last reading of every unit not yet closed."""

    @abstractmethod
    def metered_jobs(self, also: Collection[str] = ()) -> dict[str, MeteredJob]:
        """Every job whose process may run, and the jobs in ``also``, by id."""

    @abstractmethod
    def busy_ms(self, job_ids: Collection[str], after: datetime,
                until: datetime) -> dict[str, int]:
        """Per job, the durations of the epochs it committed in ``(after, until]``."""

    @abstractmethod
    def open_unit(self, baseline: UnitReading) -> UnitReading:
        """Record a unit's first reading unless it has one; the unit's reading."""

    @abstractmethod
    def charge_usage(self, previous: UnitReading, reading: UnitReading,
                     charges: Collection[UsageCharge], closed: bool) -> bool:
        """Replace the unit's reading ``previous`` with ``reading`` and add ``charges``,
        in one transaction, only while ``previous`` is still its reading; whether it was."""

    @abstractmethod
    def enforce_budgets(self) -> list[str]:
        """Raise the budget alerts the tenants' costs call for, and ask every running
        pipeline of a tenant past a hard-stop budget to stop after a commit; the ids of
        the pipelines asked to stop."""
