"""The scheduler's view of the control-plane database: ``spate.scheduler.store.ControlStore``
implemented with SQLAlchemy over :mod:`spate.api.models`.

The scheduler is platform-level, so these sessions are not tenant-scoped
(:mod:`spate.api.tenancy` leaves unscoped sessions alone); rows a write adds still
carry their job's tenant. Races between workers are settled in the database:
state changes are ``UPDATE … WHERE state IN (…)`` and ingestion is
``UPDATE … WHERE channel_cursor = <what the reader saw>``, so of two workers
acting on one job exactly one changes it; creating a run first takes the
pipeline's row lock (a no-op ``UPDATE``, which PostgreSQL turns into a row
lock and SQLite into its write lock), so a pipeline never gets two live jobs.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_, func, or_, select, type_coerce, update
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from spate.api.billing import PriceBook
from spate.api.crypto import SecretBox, SecretKeyMismatchError
from spate.api.db import Database
from spate.api.models import (
    AUTOSCALE_REASON_LENGTH,
    Budget,
    Job,
    JobCheckpoint,
    JobError,
    JobEvent,
    MeterReading,
    Pipeline,
    PipelineVersion,
    Tenant,
    UsageRecord,
    UTCDateTime,
    utc_now,
)
from spate.api.repositories.billing import BillingRepository
from spate.api.repositories.connections import job_tables
from spate.api.repositories.udfs import job_udfs
from spate.scheduler.autoscale import AutoscaleRange
from spate.scheduler.errors import JobConfigurationError
from spate.scheduler.metering import BYTES_IN, BYTES_OUT, EVENTS_IN, EVENTS_OUT
from spate.scheduler.store import (
    DESIRED_RUNNING,
    DESIRED_STOPPED,
    FAILED,
    IDLE,
    PROCESS_STATES,
    RUNNING,
    STARTING,
    TERMINAL_STATES,
    CheckpointRecord,
    ControlStore,
    EventBatch,
    JobView,
    MeteredJob,
    PipelineView,
    UnitReading,
    UsageCharge,
)

_FORCE = "force"
#: Tries at giving a tenant a sandbox number when other workers give them at once.
_NUMBER_ATTEMPTS = 10


class SqlControlStore(ControlStore):
    """Pipelines and jobs of every tenant, in the control-plane database."""

    def __init__(self, database: Database, secret_box: SecretBox | None = None,
                 price_book: PriceBook | None = None) -> None:
        self.database = database
        #: Opens connection tables' secrets for jobs (the API's key and data dir).
        self.secret_box = secret_box or SecretBox(None)
        #: Prices usage for the tenants' budgets.
        self.price_book = price_book or PriceBook.parse("")

    @contextmanager
    def _session(self) -> Iterator[Session]:
        with self.database.sessions() as session, session.begin():
            yield session

    # -- reading --------------------------------------------------------------

    def pipelines_to_reconcile(self) -> list[str]:
        live = select(Job.pipeline_id).where(Job.state.not_in(TERMINAL_STATES),
                                             Job.pipeline_id.is_not(None))
        with self._session() as session:
            return list(session.scalars(select(Pipeline.id).where(or_(
                Pipeline.desired_state == DESIRED_RUNNING, Pipeline.id.in_(live)))
                .order_by(Pipeline.id)))

    def active_preview_ids(self) -> list[str]:
        with self._session() as session:
            return list(session.scalars(select(Job.id).where(
                Job.kind == "preview", Job.state.not_in(TERMINAL_STATES)).order_by(Job.id)))

    def starting_jobs(self) -> int:
        with self._session() as session:
            return int(session.scalar(select(func.count()).select_from(Job).where(
                Job.state == STARTING)) or 0)

    def pipeline(self, pipeline_id: str) -> PipelineView | None:
        with self._session() as session:
            row = session.get(Pipeline, pipeline_id)
            return None if row is None else _pipeline_view(row)

    def pipeline_jobs(self, pipeline_id: str) -> list[JobView]:
        with self._session() as session:
            live = list(session.scalars(select(Job).where(
                Job.pipeline_id == pipeline_id, Job.state.not_in(TERMINAL_STATES))))
            ended = session.scalars(select(Job).where(
                Job.pipeline_id == pipeline_id, Job.state.in_(TERMINAL_STATES))
                .order_by(Job.id.desc()).limit(1)).first()
            jobs = sorted(live + ([ended] if ended else []), key=lambda j: j.id, reverse=True)
            return [_job_view(session, job) for job in jobs]

    def job(self, job_id: str) -> JobView | None:
        with self._session() as session:
            row = session.get(Job, job_id)
            return None if row is None else _job_view(session, row)

    # -- writing --------------------------------------------------------------

    def create_run_job(self, pipeline_id: str, backend: str, message: str,
                       default_cluster: str | None = None, watch: bool = False
                       ) -> JobView | None:
        with self._session() as session:
            locked = session.execute(
                update(Pipeline).where(Pipeline.id == pipeline_id)
                .values(restart_generation=Pipeline.restart_generation)
                .execution_options(synchronize_session=False))
            if locked.rowcount != 1:  # type: ignore[attr-defined]
                return None
            if session.scalars(select(Job.id).where(
                    Job.pipeline_id == pipeline_id,
                    Job.state.not_in(TERMINAL_STATES))).first() is not None:
                return None
            pipeline = session.get(Pipeline, pipeline_id)
            assert pipeline is not None  # locked above, in this transaction
            job = Job(tenant_id=pipeline.tenant_id, pipeline_id=pipeline.id,
                      pipeline_version=pipeline.current_version, kind="run", state="created",
                      parallelism=pipeline.parallelism,
                      checkpoint_interval_ms=pipeline.checkpoint_interval_ms,
                      restart_generation=pipeline.restart_generation, backend=backend,
                      cluster=pipeline.cluster or default_cluster, watch=watch)
            session.add(job)
            session.flush()
            session.add(JobEvent(tenant_id=job.tenant_id, job_id=job.id, state="created",
                                 message=message))
            session.flush()
            return _job_view(session, job)

    def transition(self, job_id: str, expected: Collection[str], state: str, message: str,
                   **changes: Any) -> JobView | None:
        with self._session() as session:
            if not _update_job(session, job_id, expected, state=state, **changes):
                return None
            job = session.get(Job, job_id)
            assert job is not None
            session.add(JobEvent(tenant_id=job.tenant_id, job_id=job_id, state=state,
                                 message=message))
            session.flush()
            return _job_view(session, job)

    def update(self, job_id: str, expected: Collection[str], **changes: Any) -> JobView | None:
        with self._session() as session:
            if not _update_job(session, job_id, expected, **changes):
                return None
            job = session.get(Job, job_id)
            return None if job is None else _job_view(session, job)

    def add_error(self, job_id: str, message: str, detail: str = "") -> None:
        with self._session() as session:
            job = session.get(Job, job_id)
            if job is not None:
                session.add(JobError(tenant_id=job.tenant_id, job_id=job_id, message=message,
                                     detail=detail))

    def request_stop(self, job_id: str, mode: str) -> JobView | None:
        # A stop already asked is kept, unless force overrides a gentler one.
        needed = Job.stop_mode.is_(None) if mode != _FORCE else or_(
            Job.stop_mode.is_(None), Job.stop_mode != _FORCE)
        with self._session() as session:
            done = session.execute(
                update(Job).where(Job.id == job_id, Job.state.not_in(TERMINAL_STATES),
                                  needed)
                .values(stop_mode=mode, updated_at=utc_now())
                .execution_options(synchronize_session=False))
            if done.rowcount != 1:  # type: ignore[attr-defined]
                return None
            job = session.get(Job, job_id)
            return None if job is None else _job_view(session, job)

    def ingest(self, job_id: str, cursor_before: str | None, cursor_after: str | None,
               batch: EventBatch) -> JobView | None:
        with self._session() as session:
            same_cursor = (Job.channel_cursor.is_(None) if cursor_before is None
                           else Job.channel_cursor == cursor_before)
            moved = session.execute(
                update(Job).where(Job.id == job_id, same_cursor)
                .values(channel_cursor=cursor_after)
                .execution_options(synchronize_session=False))
            if moved.rowcount != 1:  # type: ignore[attr-defined]
                return None
            job = session.get(Job, job_id)
            assert job is not None
            _record_batch(session, job, batch)
            session.flush()
            return _job_view(session, job)

    def tenant_number(self, tenant_id: str) -> int:
        for _attempt in range(_NUMBER_ATTEMPTS):
            with self._session() as session:
                number = session.scalar(select(Tenant.sandbox_number)
                                        .where(Tenant.id == tenant_id))
                if number is not None:
                    return int(number)
            try:
                with self._session() as session:
                    highest = session.scalar(select(func.max(Tenant.sandbox_number)))
                    session.execute(update(Tenant).where(
                        Tenant.id == tenant_id, Tenant.sandbox_number.is_(None))
                        .values(sandbox_number=(highest or 0) + 1))
            except IntegrityError:
                continue  # another worker took that number for another tenant: again
        raise JobConfigurationError(f"could not give tenant {tenant_id} a sandbox number")

    def job_tables(self, tenant_id: str) -> list[dict[str, Any]]:
        try:
            return job_tables(self.database.sessions, tenant_id, self.secret_box)
        except SecretKeyMismatchError as error:
            raise JobConfigurationError(str(error)) from None

    def job_udfs(self, tenant_id: str) -> list[dict[str, str]]:
        return job_udfs(self.database.sessions, tenant_id)

    # -- metering -------------------------------------------------------------

    def meter_units(self) -> list[UnitReading]:
        with self._session() as session:
            return [_unit_reading(row) for row in session.scalars(
                select(MeterReading).where(MeterReading.closed.is_(False))
                .order_by(MeterReading.unit))]

    def metered_jobs(self, also: Collection[str] = ()) -> dict[str, MeteredJob]:
        live = Job.state.in_(list(PROCESS_STATES))
        wanted = or_(live, Job.id.in_(list(also))) if also else live
        # A watch job stands for an idle pipeline, whose time is not charged.
        wanted = and_(wanted, Job.watch.is_(False))
        with self._session() as session:
            return {job.id: MeteredJob(
                id=job.id, tenant_id=job.tenant_id, pipeline_id=job.pipeline_id,
                kind=job.kind, handle=job.handle, live=job.state in PROCESS_STATES,
                state_held_bytes=_held_bytes(job.metrics))
                for job in session.scalars(select(Job).where(wanted))}

    def busy_ms(self, job_ids: Collection[str], after: datetime,
                until: datetime) -> dict[str, int]:
        if not job_ids:
            return {}
        with self._session() as session:
            rows = session.execute(
                select(JobCheckpoint.job_id, func.sum(JobCheckpoint.duration_ms))
                .where(JobCheckpoint.job_id.in_(list(job_ids)),
                       JobCheckpoint.committed_at > after, JobCheckpoint.committed_at <= until)
                .group_by(JobCheckpoint.job_id))
            return {job_id: int(total or 0) for job_id, total in rows}

    def open_unit(self, baseline: UnitReading) -> UnitReading:
        try:
            with self._session() as session:
                session.add(MeterReading(
                    unit=baseline.unit, tenant_id=baseline.tenant_id, source=baseline.source,
                    cpu_seconds=baseline.cpu_seconds, memory_bytes=baseline.memory_bytes,
                    read_at=baseline.read_at, jobs=baseline.jobs, closed=False))
        except IntegrityError:
            pass  # another meter opened it first: its reading stands
        with self._session() as session:
            row = session.get(MeterReading, baseline.unit)
            assert row is not None
            return _unit_reading(row)

    def charge_usage(self, previous: UnitReading, reading: UnitReading,
                     charges: Collection[UsageCharge], closed: bool) -> bool:
        with self._session() as session:
            moved = session.execute(
                update(MeterReading).where(MeterReading.unit == previous.unit,
                                           MeterReading.read_at == previous.read_at,
                                           MeterReading.closed.is_(False))
                .values(cpu_seconds=reading.cpu_seconds, memory_bytes=reading.memory_bytes,
                        read_at=reading.read_at, jobs=reading.jobs, closed=closed)
                .execution_options(synchronize_session=False))
            if moved.rowcount != 1:  # type: ignore[attr-defined]
                return False
            add_usage(session, charges)
            return True

    def enforce_budgets(self) -> list[str]:
        with self._session() as session:
            tenants = list(session.scalars(select(Budget.tenant_id)))
        stopped: list[str] = []
        for tenant_id in tenants:
            with self.database.sessions() as session:
                if not BillingRepository(session, tenant_id, self.price_book).check_budget():
                    continue
            with self._session() as session:
                running = list(session.scalars(select(Pipeline.id).where(
                    Pipeline.tenant_id == tenant_id,
                    Pipeline.desired_state == DESIRED_RUNNING)))
                if running:
                    session.execute(update(Pipeline).where(Pipeline.id.in_(running))
                                    .values(desired_state=DESIRED_STOPPED,
                                            stop_mode="checkpoint")
                                    .execution_options(synchronize_session=False))
            stopped.extend(running)
        return stopped

    def record_epoch(self, job_id: str, epoch: int) -> JobView | None:
        with self._session() as session:
            session.execute(
                update(Job).where(Job.id == job_id,
                                  or_(Job.last_epoch.is_(None), Job.last_epoch < epoch))
                .values(last_epoch=epoch, updated_at=utc_now())
                .execution_options(synchronize_session=False))
            job = session.get(Job, job_id)
            return None if job is None else _job_view(session, job)


    def autoscale(self, pipeline_id: str, parallelism: int, reason: str, at: datetime) -> bool:
        with self._session() as session:
            changed = session.execute(
                update(Pipeline).where(Pipeline.id == pipeline_id,
                                       Pipeline.autoscale_min.is_not(None))
                .values(parallelism=parallelism, autoscaled_at=at,
                        autoscale_reason=reason[:AUTOSCALE_REASON_LENGTH], updated_at=at)
                .execution_options(synchronize_session=False))
            return bool(changed.rowcount)  # type: ignore[attr-defined]


def _held_bytes(metrics: Any) -> int:
    """The ``state_held_bytes`` a job's latest epoch reported (0 when absent or odd)."""
    value = metrics.get("state_held_bytes") if isinstance(metrics, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _unit_reading(row: MeterReading) -> UnitReading:
    return UnitReading(unit=row.unit, tenant_id=row.tenant_id, source=dict(row.source),
                       cpu_seconds=row.cpu_seconds, memory_bytes=row.memory_bytes,
                       read_at=row.read_at, jobs=list(row.jobs))


def add_usage(session: Session, charges: Iterable[UsageCharge]) -> None:
    """Add ``charges`` to the usage rows of their (job, minute, dimension), creating
    the rows that do not exist (one upsert per charge, on PostgreSQL and SQLite)."""
    totals: dict[tuple[str, datetime, str], UsageCharge] = {}
    for charge in charges:
        key = (charge.job_id, charge.minute, charge.dimension)
        before = totals.get(key)
        totals[key] = charge if before is None else replace(
            before, quantity=before.quantity + charge.quantity)
    if not totals:
        return
    insert = postgresql_insert if session.get_bind().dialect.name == "postgresql" \
        else sqlite_insert
    table = UsageRecord.__table__
    for charge in totals.values():
        statement = insert(UsageRecord).values(
            tenant_id=charge.tenant_id, job_id=charge.job_id, minute=charge.minute,
            dimension=charge.dimension, pipeline_id=charge.pipeline_id,
            quantity=charge.quantity)
        session.execute(statement.on_conflict_do_update(
            index_elements=["job_id", "minute", "dimension"],
            set_={"quantity": table.c.quantity + statement.excluded.quantity}))


def _epoch_usage(job: Job, record: CheckpointRecord) -> list[UsageCharge]:
    """The rows an epoch read and wrote, charged to the minute it committed in."""
    minute = record.committed_at.astimezone(UTC).replace(second=0, microsecond=0)
    return [UsageCharge(job.id, job.tenant_id, job.pipeline_id, minute, dimension, count)
            for dimension, count in ((EVENTS_IN, record.rows_in), (EVENTS_OUT, record.rows_out),
                                     (BYTES_IN, record.bytes_in), (BYTES_OUT, record.bytes_out))
            if count > 0]


def _update_job(session: Session, job_id: str, expected: Collection[str],
                **changes: Any) -> bool:
    """Compare-and-set: change the job only while its state is one of ``expected``."""
    done = session.execute(
        update(Job).where(Job.id == job_id, Job.state.in_(list(expected)))
        .values(updated_at=utc_now(), **changes)
        .execution_options(synchronize_session=False))
    return bool(done.rowcount == 1)  # type: ignore[attr-defined]


def _record_batch(session: Session, job: Job, batch: EventBatch) -> None:
    """Checkpoints, errors, heartbeat, metrics and status of one read of the channel."""
    known = set(session.scalars(select(JobCheckpoint.epoch).where(
        JobCheckpoint.job_id == job.id,
        JobCheckpoint.epoch.in_([c.epoch for c in batch.checkpoints]))))
    epoch_usage: list[UsageCharge] = []
    for record in batch.checkpoints:
        if record.epoch not in known:  # a replayed epoch event adds nothing
            known.add(record.epoch)
            epoch_usage.extend(_epoch_usage(job, record))
            session.add(JobCheckpoint(
                tenant_id=job.tenant_id, job_id=job.id, epoch=record.epoch,
                committed_at=record.committed_at, duration_ms=record.duration_ms,
                state_bytes=record.state_bytes, rows_in=record.rows_in,
                rows_out=record.rows_out))
    add_usage(session, epoch_usage)
    for error in batch.errors:
        session.add(JobError(tenant_id=job.tenant_id, job_id=job.id, at=error.at,
                             message=error.message, detail=error.detail))
    if batch.heartbeat_at is not None and (job.heartbeat_at is None
                                           or batch.heartbeat_at > job.heartbeat_at):
        job.heartbeat_at = batch.heartbeat_at
    if batch.last_epoch is not None and (job.last_epoch is None
                                         or batch.last_epoch > job.last_epoch):
        job.last_epoch = batch.last_epoch
    if batch.metrics is not None:
        job.metrics = batch.metrics
    job.updated_at = utc_now()
    _apply_status(session, job, batch)


def _apply_status(session: Session, job: Job, batch: EventBatch) -> None:
    status = batch.status
    if status is None or job.state in TERMINAL_STATES or status.state == job.state:
        return
    if status.state == RUNNING and job.state != STARTING:
        return  # a job already stopping stays stopping
    job.state = status.state
    message = status.message or status.state
    if status.state in TERMINAL_STATES:
        job.ended_at = utc_now()
    if status.state == FAILED:
        last_error = batch.errors[-1].message if batch.errors else None
        job.failure_message = status.message or last_error or "the job failed"
        message = job.failure_message
    if status.state == IDLE:  # the scheduler resumes the pipeline then
        job.next_attempt_at = status.wake_at
    session.add(JobEvent(tenant_id=job.tenant_id, job_id=job.id, state=status.state,
                         message=message))


def _pipeline_view(row: Pipeline) -> PipelineView:
    return PipelineView(
        id=row.id, tenant_id=row.tenant_id, desired_state=row.desired_state,
        stop_mode=row.stop_mode, restart_generation=row.restart_generation,
        restart_with_state=row.restart_with_state, parallelism=row.parallelism,
        checkpoint_interval_ms=row.checkpoint_interval_ms, current_version=row.current_version,
        cluster=row.cluster, autoscaled_at=row.autoscaled_at,
        autoscale_reason=row.autoscale_reason,
        autoscale=None if row.autoscale_min is None or row.autoscale_max is None
        else AutoscaleRange(row.autoscale_min, row.autoscale_max))


def _job_view(session: Session, job: Job) -> JobView:
    sql = job.sql
    if sql is None:
        sql = session.scalars(select(PipelineVersion.sql).where(and_(
            PipelineVersion.pipeline_id == job.pipeline_id,
            PipelineVersion.version == job.pipeline_version))).first() or ""
    # type_coerce: the column's type reads the maximum back as an aware timestamp.
    state_since = session.scalar(select(type_coerce(func.max(JobEvent.at), UTCDateTime())).where(
        JobEvent.job_id == job.id, JobEvent.state == job.state))
    last_error = session.scalars(select(JobError.message).where(JobError.job_id == job.id)
                                 .order_by(JobError.at.desc(), JobError.id.desc())).first()
    return JobView(
        id=job.id, tenant_id=job.tenant_id, pipeline_id=job.pipeline_id, kind=job.kind,
        state=job.state, parallelism=job.parallelism,
        checkpoint_interval_ms=job.checkpoint_interval_ms,
        restart_generation=job.restart_generation, stop_mode=job.stop_mode,
        backend=job.backend, handle=job.handle, channel_url=job.channel_url,
        channel_cursor=job.channel_cursor, attempt=job.attempt,
        next_attempt_at=job.next_attempt_at, heartbeat_at=job.heartbeat_at,
        last_epoch=job.last_epoch, created_at=job.created_at, updated_at=job.updated_at,
        sql=sql, state_since=state_since, last_error=last_error, cluster=job.cluster,
        watch=job.watch, metrics=job.metrics if isinstance(job.metrics, dict) else None)

