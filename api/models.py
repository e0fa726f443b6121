"""The control plane's tables as SQLAlchemy 2 models.

Every table but ``tenants`` carries ``tenant_id`` through :class:`TenantOwned`;
:mod:`api.tenancy` uses that marker to scope every query of a tenant's session.
A pipeline's SQL lives in immutable :class:`PipelineVersion` rows: changing the
SQL adds a version, it never edits one.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    CheckConstraint,
    DateTime,
    Dialect,
    ForeignKey,
    ForeignKeyConstraint,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    event,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship
from sqlalchemy.types import TypeDecorator

from api.ids import ID_LENGTH, new_id
from api.security import Role

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


class TenantOwned:
    """Marks a model whose rows belong to one tenant (see :mod:`api.tenancy`)."""

    tenant_id: Mapped[str] = mapped_column(
        String(ID_LENGTH), ForeignKey("tenants.id", ondelete="CASCADE"), index=True,
    )


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


class Pipeline(TenantOwned, Base):
    """A tenant's pipeline: its desired settings and which SQL version is current."""

    __tablename__ = "pipelines"
    __table_args__ = (
        UniqueConstraint("tenant_id", "name"),
        # Target of the versions' (tenant_id, pipeline_id) foreign key.
        UniqueConstraint("tenant_id", "id"),
        CheckConstraint("parallelism >= 1", name="parallelism"),
        CheckConstraint("current_version >= 1", name="current_version"),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    description: Mapped[str] = mapped_column(String(DESCRIPTION_LENGTH), default="")
    parallelism: Mapped[int] = mapped_column(Integer, default=1)
    checkpoint_interval_ms: Mapped[int | None] = mapped_column(Integer)
    current_version: Mapped[int] = mapped_column(Integer, default=1)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)

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


class PipelineVersion(TenantOwned, Base):
    """One immutable SQL text of a pipeline, numbered from 1."""

    __tablename__ = "pipeline_versions"
    __table_args__ = (
        # The version's tenant is its pipeline's tenant, checked by the database.
        ForeignKeyConstraint(["tenant_id", "pipeline_id"], ["pipelines.tenant_id", "pipelines.id"],
                             ondelete="CASCADE"),
        UniqueConstraint("pipeline_id", "version"),
        CheckConstraint("version >= 1", name="version"),
    )

    id: Mapped[str] = mapped_column(String(ID_LENGTH), primary_key=True, default=new_id)
    pipeline_id: Mapped[str] = mapped_column(String(ID_LENGTH))
    version: Mapped[int] = mapped_column(Integer)
    sql: Mapped[str] = mapped_column(Text)
    sql_sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utc_now)
    created_by_key_id: Mapped[str | None] = mapped_column(
        String(ID_LENGTH), ForeignKey("api_keys.id", ondelete="SET NULL"),
    )

    pipeline: Mapped[Pipeline] = relationship(back_populates="versions")


class ImmutableVersionError(RuntimeError):
    """Code tried to change a stored pipeline version; add a new version instead."""


@event.listens_for(PipelineVersion, "before_update")
def _refuse_version_update(mapper: object, connection: object, target: PipelineVersion) -> None:
    raise ImmutableVersionError(f"pipeline version {target.id} is immutable")
