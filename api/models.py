"""The control plane's tables as SQLAlchemy 2 models.

Every table but ``tenants`` carries ``tenant_id`` through :class:`TenantOwned`;
:mod:`spate.api.tenancy` uses that marker to scope every query of a tenant's session.
A pipeline's SQL lives in immutable :class:`PipelineVersion` rows: changing the
SQL adds a version, it never edits one; a UDF's source, likewise, in
:class:`UdfVersion` rows.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    ForeignKeyConstraint,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    event,
    false,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from spate.api.ids import ID_LENGTH, new_id
from spate.api.security import Role
from spate.scheduler.store import (
    CREATED,
    DESIRED_RUNNING,
    DESIRED_STOPPED,
    IDLE,
    JOB_KINDS,
    JOB_STATES,
    RESTARTING,
    RUN,
    RUNNING,
    STARTING,
)

NAME_LENGTH = 63
KEY_NAME_LENGTH = 100
DESCRIPTION_LENGTH = 1000

# Deterministic constraint names, so migrations can refer to them on every database.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utc_now() -> datetime:
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware.

    PostgreSQL keeps the zone; SQLite drops it, so naive values read back are UTC.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("timestamps must be timezone-aware")
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if not isinstance(value, datetime):
            raise TypeError(f"expected a timestamp, got {type(value).__name__}")
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class Tenant(Base):
    """A customer: the owner of every other row."""

    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    #: Numbers the tenant's sandbox user (uid = base + number); given on first job.
    sandbox_number: Mapped[int | None] = mapped_column(Integer, unique=True, default=None)
    #: The tenant's plan: which set of the operator's quota limits applies (None: the
    #: default plan; see :mod:`spate.api.quotas`).
    plan: Mapped[str | None] = mapped_column(String(NAME_LENGTH), default=None)


class TenantOwned:
    """Marks a model whose rows belong to one tenant (see :mod:`spate.api.tenancy`)."""

    tenant_id: Mapped[str] = mapped_column(
        String(ID_LENGTH), ForeignKey("tenants.id", ondelete="CASCADE"), index=True,
    )


class ImmutableVersionError(RuntimeError):
    """Code tried to change a stored version; add a new version instead."""


class ImmutableVersion:
    """Marks one numbered, immutable version of a tenant's text (a pipeline's SQL, a
    UDF's source): who stored it and when; changing it raises :class:`ImmutableVersionError`."""

    #: What the rows are versions of, as :class:`ImmutableVersionError` names them.
    versions_of: ClassVar[str]

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    version: Mapped[int] = mapped_column(Integer, CheckConstraint("version >= 1", name="version"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    created_by_key_id: Mapped[str | None] = mapped_column(
        String(ID_LENGTH), ForeignKey("api_keys.id", ondelete="SET NULL"),
    )


@event.listens_for(ImmutableVersion, "before_update", propagate=True)
def _refuse_version_update(mapper: object, connection: object,
                           target: ImmutableVersion) -> None:
    raise ImmutableVersionError(f"{target.versions_of} version {target.id} is immutable")


class ApiKey(TenantOwned, Base):
    """A tenant's API key: its role and the SHA-256 of the key, never the key."""

    __tablename__ = "api_keys"
    __table_args__ = (
        CheckConstraint(f"role IN ({', '.join(repr(r.value) for r in Role)})", name="role"),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    name: Mapped[str] = mapped_column(String(KEY_NAME_LENGTH))
    role: Mapped[str] = mapped_column(String(16))
    secret_sha256: Mapped[str] = mapped_column(String(64))
    prefix: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    rotated_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


STOP_MODES = ("checkpoint", "graceful", "immediate", "force")


#: The longest reason the autoscaler gives for a decision.
AUTOSCALE_REASON_LENGTH = 300


class Pipeline(TenantOwned, Base):
    """A tenant's pipeline: its desired settings and which SQL version is current."""

    __tablename__ = "pipelines"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name"),
        # Target of the versions' (tenant_id, pipeline_id) foreign key.
        UniqueConstraint("tenant_id", "id"),
        CheckConstraint("parallelism >= 1", name="parallelism"),
        CheckConstraint("(autoscale_min IS NULL AND autoscale_max IS NULL) OR "
                        "(autoscale_min >= 1 AND autoscale_max >= autoscale_min)",
                        name="autoscale"),
        CheckConstraint("current_version >= 1", name="current_version"),
        CheckConstraint(f"desired_state IN ('{DESIRED_RUNNING}', '{DESIRED_STOPPED}')",
                        name="desired_state"),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    description: Mapped[str] = mapped_column(String(DESCRIPTION_LENGTH), default="")
    parallelism: Mapped[int] = mapped_column(Integer, default=1)
    checkpoint_interval_ms: Mapped[int | None] = mapped_column(Integer)
    current_version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    # Desired state, which the scheduler makes true (see scheduler/).
    #: ``running`` or ``stopped``.
    desired_state: Mapped[str] = mapped_column(String(16), default=DESIRED_RUNNING)
    #: How the last requested stop should happen: checkpoint, graceful, immediate or force.
    stop_mode: Mapped[str | None] = mapped_column(String(16))
    #: Raised by each restart request; a job started before it is replaced.
    restart_generation: Mapped[int] = mapped_column(Integer, default=0)
    #: Whether the latest restart request keeps the pipeline's state.
    restart_with_state: Mapped[bool] = mapped_column(Boolean, default=True)
    #: The Spark cluster its latest move asked for; None: never moved (the default cluster).
    cluster: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    #: The parallelism the autoscaler may choose from (both None: autoscaling is off).
    autoscale_min: Mapped[int | None] = mapped_column(Integer)
    autoscale_max: Mapped[int | None] = mapped_column(Integer)
    #: When the autoscaler last changed the parallelism, and why (None after a change
    #: made through the API).
    autoscaled_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    autoscale_reason: Mapped[str | None] = mapped_column(String(AUTOSCALE_REASON_LENGTH))

    versions: Mapped[list[PipelineVersion]] = relationship(
        back_populates="pipeline", cascade="all, delete-orphan", passive_deletes=True,
        order_by="PipelineVersion.version",
    )
    #: The version whose SQL is current (loaded with the pipeline).
    current: Mapped[PipelineVersion] = relationship(
        primaryjoin="and_(Pipeline.id == foreign(PipelineVersion.pipeline_id), "
                    "Pipeline.current_version == PipelineVersion.version)",
        viewonly=True, lazy="joined", uselist=False,
    )


class PipelineVersion(TenantOwned, ImmutableVersion, Base):
    """One immutable SQL text of a pipeline, numbered from 1."""

    __tablename__ = "pipeline_versions"
    __table_args__ = (
        # The version's tenant is its pipeline's tenant, checked by the database.
        ForeignKeyConstraint(["tenant_id", "pipeline_id"], ["pipelines.tenant_id", "pipelines.id"],
                             ondelete="CASCADE"),
        UniqueConstraint("pipeline_id", "version"),
    )
    versions_of = "pipeline"

    pipeline_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    sql: Mapped[str] = mapped_column(Text)
    sql_sha256: Mapped[str] = mapped_column(String(64))

    pipeline: Mapped[Pipeline] = relationship(back_populates="versions")




class Job(TenantOwned, Base):
    """One run of a pipeline: from a start until it stops, finishes or fails.

    Automatic restarts after a crash stay in the same job (``attempt`` counts
    them); a restart or rescale asked for by the tenant starts a new job.
    """

    __tablename__ = "jobs"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id", "pipeline_id"], ["pipelines.tenant_id", "pipelines.id"],
                             ondelete="CASCADE"),
        # Target of the job children's (tenant_id, job_id) foreign keys.
        UniqueConstraint("tenant_id", "id"),
        CheckConstraint(f"state IN ({', '.join(repr(s) for s in JOB_STATES)})", name="state"),
        CheckConstraint(f"kind IN ({', '.join(repr(k) for k in JOB_KINDS)})", name="kind"),
        CheckConstraint("parallelism >= 1", name="parallelism"),
        CheckConstraint("(kind = 'run' AND pipeline_id IS NOT NULL AND pipeline_version IS NOT "
                        "NULL) OR (kind = 'preview' AND sql IS NOT NULL)", name="source"),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    #: The pipeline a run belongs to (a preview has none).
    pipeline_id: Mapped[str | None] = mapped_column(String(ID_LENGTH), index=True)
    pipeline_version: Mapped[int | None] = mapped_column(Integer)
    #: A preview's SQL (a run's SQL is its pipeline version's).
    sql: Mapped[str | None] = mapped_column(Text)
    kind: Mapped[str] = mapped_column(String(16), default=RUN)
    #: A run that watches an idle pipeline's sources, without Spark, until input arrives
    #: (it ends ``idle``, due at once); its pipeline shows as idle meanwhile.
    watch: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    state: Mapped[str] = mapped_column(String(16), default="created")
    parallelism: Mapped[int] = mapped_column(Integer)
    checkpoint_interval_ms: Mapped[int | None] = mapped_column(Integer)
    #: The pipeline's ``restart_generation`` when this job was created.
    restart_generation: Mapped[int] = mapped_column(Integer, default=0)
    #: The stop mode asked of this job, once a stop was asked.
    stop_mode: Mapped[str | None] = mapped_column(String(16))
    #: The cluster backend running it (local, standalone, kubernetes).
    backend: Mapped[str] = mapped_column(String(16))
    #: The named Spark cluster it runs on; None for previews and rows from before clusters
    #: had names (the default cluster).
    cluster: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    #: What the backend needs to find the running process again (pid, app id, …).
    handle: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    channel_url: Mapped[str | None] = mapped_column(String(1000))
    #: How far the scheduler has read the job's channel.
    channel_cursor: Mapped[str | None] = mapped_column(String(64))
    #: Automatic restarts so far.
    attempt: Mapped[int] = mapped_column(Integer, default=0)
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    failure_message: Mapped[str | None] = mapped_column(Text)
    last_epoch: Mapped[int | None] = mapped_column(BigInteger)
    #: The latest operator metrics and totals the job reported.
    metrics: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)

    @property
    def shown_state(self) -> str:
        """The state a tenant sees: a watch job that has not ended stands for its idle
        pipeline, so it shows ``idle`` (a stop of it shows ``stopping``)."""
        if self.watch and self.state in (CREATED, STARTING, RUNNING, RESTARTING):
            return IDLE
        return self.state


def _job_child_key() -> ForeignKeyConstraint:
    return ForeignKeyConstraint(["tenant_id", "job_id"], ["jobs.tenant_id", "jobs.id"],
                                ondelete="CASCADE")


class JobEvent(TenantOwned, Base):
    """One state change of a job: its history."""

    __tablename__ = "job_events"
    __table_args__ = (_job_child_key(),)

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    job_id: Mapped[str] = mapped_column(String(ID_LENGTH), index=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    state: Mapped[str] = mapped_column(String(16))
    message: Mapped[str] = mapped_column(Text, default="")


class JobCheckpoint(TenantOwned, Base):
    """One committed epoch of a job."""

    __tablename__ = "job_checkpoints"
    __table_args__ = (_job_child_key(), UniqueConstraint("job_id", "epoch"))

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    job_id: Mapped[str] = mapped_column(String(ID_LENGTH), index=True)
    epoch: Mapped[int] = mapped_column(BigInteger)
    committed_at: Mapped[datetime] = mapped_column(UTCDateTime())
    duration_ms: Mapped[int] = mapped_column(Integer)
    state_bytes: Mapped[int] = mapped_column(BigInteger, default=0)
    rows_in: Mapped[int] = mapped_column(BigInteger, default=0)
    rows_out: Mapped[int] = mapped_column(BigInteger, default=0)


class JobError(TenantOwned, Base):
    """An error a job reported (or the scheduler saw), newest last."""

    __tablename__ = "job_errors"
    __table_args__ = (_job_child_key(),)

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    job_id: Mapped[str] = mapped_column(String(ID_LENGTH), index=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    message: Mapped[str] = mapped_column(Text)
    detail: Mapped[str] = mapped_column(Text, default="")


class ConnectionProfile(TenantOwned, Base):
    """Reusable connection settings of a connector; secret options only as ciphertext."""

    __tablename__ = "connection_profiles"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name"),
        # Target of the connection tables' (tenant_id, profile_id) foreign key.
        UniqueConstraint("tenant_id", "id"),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    connector: Mapped[str] = mapped_column(String(NAME_LENGTH))
    #: Options that are not secret, as given.
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: Secret options: name → Fernet token (see :mod:`spate.api.crypto`).
    secrets: Mapped[dict[str, str]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


class ConnectionTable(TenantOwned, Base):
    """A named connector table a tenant's pipelines use without CREATE TABLE."""

    __tablename__ = "connection_tables"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name"),
        # The profile is the same tenant's, checked by the database; a used profile
        # cannot be deleted.
        ForeignKeyConstraint(["tenant_id", "profile_id"],
                             ["connection_profiles.tenant_id", "connection_profiles.id"]),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    connector: Mapped[str] = mapped_column(String(NAME_LENGTH))
    profile_id: Mapped[str | None] = mapped_column(String(ID_LENGTH), index=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    secrets: Mapped[dict[str, str]] = mapped_column(JSON)
    #: Columns: ``[{"name", "type", "nullable"}]``.
    fields: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


class UsageRecord(TenantOwned, Base):
    """What one job used of one dimension in one minute (see :mod:`spate.scheduler.metering`).

    One row per (job, minute, dimension), added to as the meter reads more: the
    meter's writes are compare-and-set on the unit's reading, and epoch counts are
    added with the epoch's checkpoint row, so nothing is counted twice. Usage is what
    a bill is made of: it stays when its job or pipeline is deleted (only with its
    tenant does it go).
    """

    __tablename__ = "usage_records"

    job_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    minute: Mapped[datetime] = mapped_column(UTCDateTime(), primary_key=True)
    dimension: Mapped[str] = mapped_column(String(32), primary_key=True)
    #: The run's pipeline (None for a preview), kept so usage reads need no join.
    pipeline_id: Mapped[str | None] = mapped_column(String(ID_LENGTH), index=True)
    quantity: Mapped[float] = mapped_column(Float, default=0.0)


class DeletedPipeline(TenantOwned, Base):
    """The name a deleted pipeline had. Its usage stays (a bill is made of it), and an
    invoice or a usage report names it as it was named."""

    __tablename__ = "deleted_pipelines"

    pipeline_id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    deleted_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


class MeterReading(Base):
    """The meter's last reading of one compute unit's cumulative counters.

    Platform-level (a unit may outlive the jobs it hosted), so not tenant-owned;
    ``unit`` names the unit's control groups, or its process where it has none.
    """

    __tablename__ = "meter_readings"

    unit: Mapped[str] = mapped_column(String(200), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(
        String(ID_LENGTH), ForeignKey("tenants.id", ondelete="CASCADE"), index=True)
    #: Where to read the unit again: the process handle of its application or job.
    source: Mapped[dict[str, Any]] = mapped_column(JSON)
    #: Cumulative CPU seconds and working-set memory at ``read_at``.
    cpu_seconds: Mapped[float] = mapped_column(Float)
    memory_bytes: Mapped[int] = mapped_column(BigInteger)
    read_at: Mapped[datetime] = mapped_column(UTCDateTime())
    #: The jobs the unit hosted at ``read_at`` (their share of the next interval).
    jobs: Mapped[list[str]] = mapped_column(JSON)
    #: Set once the unit's processes are gone and its last reading is taken.
    closed: Mapped[bool] = mapped_column(Boolean, default=False)


class Invoice(TenantOwned, Base):
    """A tenant's bill for one closed period (a calendar month, UTC), frozen when it
    closed: later usage rows or price-book changes never alter it."""

    __tablename__ = "invoices"

    tenant_id: Mapped[str] = mapped_column(
        String(ID_LENGTH), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True)
    #: ``YYYY-MM``
    period: Mapped[str] = mapped_column(String(7), primary_key=True)
    closed_at: Mapped[datetime] = mapped_column(UTCDateTime())
    currency: Mapped[str] = mapped_column(String(3))
    total: Mapped[float] = mapped_column(Float)
    #: The invoice as the API returns it (lines, price-book versions, totals).
    body: Mapped[dict[str, Any]] = mapped_column(JSON)


class Budget(TenantOwned, Base):
    """A tenant's monthly budget: alert thresholds, an optional hard stop, and the alerts
    raised so far."""

    __tablename__ = "budgets"

    tenant_id: Mapped[str] = mapped_column(
        String(ID_LENGTH), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True)
    amount: Mapped[float] = mapped_column(Float)
    #: Percentages of ``amount`` at which an alert is raised, ascending.
    thresholds: Mapped[list[int]] = mapped_column(JSON)
    #: Stop the tenant's pipelines (after a commit) once the period's cost reaches amount.
    hard_stop: Mapped[bool] = mapped_column(Boolean, default=False)
    #: Alerts raised: ``{"period", "threshold", "cost", "at"}``, oldest first.
    alerts: Mapped[list[dict[str, Any]]] = mapped_column(JSON, default=list)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)


class Udf(TenantOwned, Base):
    """A tenant's Python UDF, callable by its name from any of the tenant's pipelines
    (docs/udfs.md); which source version is current."""

    __tablename__ = "udfs"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name"),
        # Target of the versions' (tenant_id, udf_id) foreign key.
        UniqueConstraint("tenant_id", "id"),
        CheckConstraint("current_version >= 1", name="current_version"),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    #: The SQL name: the name of the one function its file declares, in lower case.
    name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    current_version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)

    versions: Mapped[list[UdfVersion]] = relationship(
        back_populates="udf", cascade="all, delete-orphan", passive_deletes=True,
        order_by="UdfVersion.version",
    )
    #: The version whose source is current (loaded with the UDF).
    current: Mapped[UdfVersion] = relationship(
        primaryjoin="and_(Udf.id == foreign(UdfVersion.udf_id), "
                    "Udf.current_version == UdfVersion.version)",
        viewonly=True, lazy="joined", uselist=False,
    )


class UdfVersion(TenantOwned, ImmutableVersion, Base):
    """One immutable source text of a UDF, numbered from 1, with the signature read from
    it when it was stored."""

    __tablename__ = "udf_versions"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id", "udf_id"], ["udfs.tenant_id", "udfs.id"],
                             ondelete="CASCADE"),
        UniqueConstraint("udf_id", "version"),
    )
    versions_of = "UDF"

    udf_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    source: Mapped[str] = mapped_column(Text)
    source_sha256: Mapped[str] = mapped_column(String(64))
    #: ``scalar``, ``vectorized`` or ``aggregate``.
    kind: Mapped[str] = mapped_column(String(16))
    #: The signature as the file declares it: ``ratio(a: int, b: Optional[int]) -> float``.
    signature: Mapped[str] = mapped_column(Text)

    udf: Mapped[Udf] = relationship(back_populates="versions")
