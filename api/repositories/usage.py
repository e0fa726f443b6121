"""Reading usage: a tenant's (or, for the operator, every tenant's) usage records summed
by period (minute or day), pipeline and dimension.

Rows are written by the scheduler's meter (:mod:`spate.scheduler.metering`), one per
job, minute and dimension; here they are only read. A preview's rows have no
pipeline and are reported as such; a deleted pipeline's keep the name it had. Day
buckets are computed in the database, so a month of minutes is summed there, not
carried into Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from spate.api.billing import UsageSum
from spate.api.models import DeletedPipeline, Pipeline, UsageRecord
from spate.api.tenancy import scope_to_tenant

MINUTE, DAY = "minute", "day"


@dataclass(frozen=True)
class UsageFilter:
    start: datetime
    end: datetime
    granularity: str = DAY
    pipeline_id: str | None = None
    dimension: str | None = None
    #: The operator's reads only: one tenant (None: every tenant).
    tenant_id: str | None = None


@dataclass(frozen=True)
class UsageRow:
    """One (period, pipeline, dimension) sum."""

    tenant_id: str
    period_start: datetime
    pipeline_id: str | None
    pipeline_name: str | None
    dimension: str
    quantity: float
    #: the pipeline no longer exists (its usage outlives it)
    pipeline_deleted: bool = False


class UsageRepository:
    """Usage records as a tenant (``tenant_id``) or the operator (None) may read them."""

    def __init__(self, session: Session, tenant_id: str | None) -> None:
        self.session = session if tenant_id is None else scope_to_tenant(session, tenant_id)
        self.tenant_id = tenant_id

    def totals(self, start: datetime, end: datetime) -> list[UsageSum]:
        """Per pipeline (None: previews) and dimension, the usage in ``[start, end)``."""
        rows = self.session.execute(
            select(UsageRecord.pipeline_id, UsageRecord.dimension,
                   func.sum(UsageRecord.quantity))
            .where(UsageRecord.minute >= start, UsageRecord.minute < end)
            .group_by(UsageRecord.pipeline_id, UsageRecord.dimension)).all()
        names = self._names({pipeline for pipeline, _dimension, _quantity in rows})
        return [UsageSum(pipeline, names.get(pipeline or ""), dimension, float(quantity or 0))
                for pipeline, dimension, quantity in rows]

    def first_minute(self) -> datetime | None:
        """When the earliest usage the reader may see happened."""
        return self.session.scalar(select(func.min(UsageRecord.minute)))

    def summed(self, query: UsageFilter) -> list[UsageRow]:
        period = _period(self.session, query.granularity)
        conditions = [UsageRecord.minute >= query.start, UsageRecord.minute < query.end]
        if query.pipeline_id is not None:
            conditions.append(UsageRecord.pipeline_id == query.pipeline_id)
        if query.dimension is not None:
            conditions.append(UsageRecord.dimension == query.dimension)
        if self.tenant_id is None and query.tenant_id is not None:
            conditions.append(UsageRecord.tenant_id == query.tenant_id)
        rows = self.session.execute(
            select(UsageRecord.tenant_id, period, UsageRecord.pipeline_id,
                   UsageRecord.dimension, func.sum(UsageRecord.quantity))
            .where(*conditions)
            .group_by(UsageRecord.tenant_id, period, UsageRecord.pipeline_id,
                      UsageRecord.dimension)
            .order_by(period, UsageRecord.tenant_id, UsageRecord.pipeline_id,
                      UsageRecord.dimension)).all()
        names = self._names({row[2] for row in rows})
        live = self._live({row[2] for row in rows})
        return [UsageRow(tenant_id=tenant, period_start=_as_time(start),
                         pipeline_id=pipeline, pipeline_name=names.get(pipeline or ""),
                         dimension=dimension, quantity=float(quantity or 0.0),
                         pipeline_deleted=pipeline is not None and pipeline not in live)
                for tenant, start, pipeline, dimension, quantity in rows]

    def _live(self, pipeline_ids: set[str | None]) -> set[str]:
        """Those of ``pipeline_ids`` whose pipeline still exists."""
        wanted = {pipeline_id for pipeline_id in pipeline_ids if pipeline_id is not None}
        if not wanted:
            return set()
        return set(self.session.scalars(select(Pipeline.id).where(Pipeline.id.in_(wanted))))

    def _names(self, pipeline_ids: set[str | None]) -> dict[str, str]:
        """The names of ``pipeline_ids``: a deleted pipeline's as it was named."""
        wanted = {pipeline_id for pipeline_id in pipeline_ids if pipeline_id is not None}
        if not wanted:
            return {}
        names = {pipeline_id: name for pipeline_id, name in self.session.execute(
            select(DeletedPipeline.pipeline_id, DeletedPipeline.name)
            .where(DeletedPipeline.pipeline_id.in_(wanted)))}
        names.update((pipeline_id, name) for pipeline_id, name in self.session.execute(
            select(Pipeline.id, Pipeline.name).where(Pipeline.id.in_(wanted))))
        return names


def _period(session: Session, granularity: str) -> ColumnElement[object]:
    """The start of the record's period, computed by the database."""
    if granularity == MINUTE:
        return UsageRecord.minute  # type: ignore[return-value]
    if session.get_bind().dialect.name == "postgresql":
        return func.date_trunc("day", func.timezone("UTC", UsageRecord.minute))
    return func.strftime("%Y-%m-%d 00:00:00", UsageRecord.minute)


def _as_time(value: object) -> datetime:
    """A period start as the database returned it: a timestamp, or SQLite's text."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return datetime.fromisoformat(str(value)).replace(tzinfo=UTC)
