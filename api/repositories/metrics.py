"""The figures Prometheus scrapes: each pipeline with its latest run and its row totals.

A tenant's figures come through a tenant-scoped session (:class:`TenantMetricsRepository`),
so they hold that tenant's pipelines only; the platform's
(:class:`PlatformMetricsRepository`) span every tenant and add platform totals.
Both run the same few aggregate queries, whatever the number of jobs.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session, lazyload

from spate.api.models import Job, JobCheckpoint, Pipeline, Tenant, UsageRecord
from spate.api.repositories.base import TenantRepository


@dataclass(frozen=True)
class PipelineFigures:
    """One pipeline as scraped."""

    tenant_id: str
    pipeline: str
    desired_state: str
    #: The latest run job, or None before the pipeline's first run.
    job: Job | None
    #: Rows over every committed epoch of every run of the pipeline.
    rows_in_total: int
    rows_out_total: int


def pipeline_figures(session: Session) -> list[PipelineFigures]:
    """Every pipeline the session may see, with its latest run and row totals."""
    pipelines = session.scalars(
        select(Pipeline).options(lazyload(Pipeline.current)).order_by(Pipeline.id)).all()
    newest = select(func.max(Job.id)).where(Job.kind == "run").group_by(Job.pipeline_id)
    latest = {job.pipeline_id: job
              for job in session.scalars(select(Job).where(Job.id.in_(newest)))}
    totals = {
        pipeline_id: (int(rows_in or 0), int(rows_out or 0))
        for pipeline_id, rows_in, rows_out in session.execute(
            select(Job.pipeline_id, func.sum(JobCheckpoint.rows_in),
                   func.sum(JobCheckpoint.rows_out))
            .join(JobCheckpoint, JobCheckpoint.job_id == Job.id)
            .where(Job.kind == "run").group_by(Job.pipeline_id))
    }
    return [PipelineFigures(
        tenant_id=p.tenant_id, pipeline=p.name, desired_state=p.desired_state,
        job=latest.get(p.id), rows_in_total=totals.get(p.id, (0, 0))[0],
        rows_out_total=totals.get(p.id, (0, 0))[1],
    ) for p in pipelines]


@dataclass(frozen=True)
class UsageFigure:
    """All-time usage of one dimension by one pipeline ("" for previews) of a tenant."""

    tenant_id: str
    pipeline: str
    dimension: str
    quantity: float


def usage_figures(session: Session) -> list[UsageFigure]:
    """Every usage total the session may see, per tenant, pipeline and dimension (a
    deleted pipeline's usage counts under its id)."""
    rows = session.execute(
        select(UsageRecord.tenant_id, UsageRecord.pipeline_id, UsageRecord.dimension,
               func.sum(UsageRecord.quantity))
        .group_by(UsageRecord.tenant_id, UsageRecord.pipeline_id, UsageRecord.dimension)
        .order_by(UsageRecord.tenant_id, UsageRecord.pipeline_id, UsageRecord.dimension)
    ).all()
    names = {pipeline_id: name for pipeline_id, name in session.execute(
        select(Pipeline.id, Pipeline.name))}
    return [UsageFigure(tenant_id=tenant, pipeline=names.get(pipeline, pipeline)
                        if pipeline is not None else "", dimension=dimension,
                        quantity=float(quantity or 0.0))
            for tenant, pipeline, dimension, quantity in rows]


class TenantMetricsRepository(TenantRepository):
    """One tenant's figures."""

    def pipelines(self) -> list[PipelineFigures]:
        return pipeline_figures(self.session)

    def usage(self) -> list[UsageFigure]:
        return usage_figures(self.session)


class PlatformMetricsRepository:
    """Every tenant's figures and the platform's totals, for the platform admin."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def pipelines(self) -> list[PipelineFigures]:
        return pipeline_figures(self.session)

    def usage(self) -> list[UsageFigure]:
        return usage_figures(self.session)

    def tenant_count(self) -> int:
        return int(self.session.scalar(select(func.count()).select_from(Tenant)) or 0)

    def job_counts(self) -> dict[tuple[str, str], int]:
        """How many jobs are in each (kind, state)."""
        rows = self.session.execute(
            select(Job.kind, Job.state, func.count()).group_by(Job.kind, Job.state))
        return {(kind, state): int(count) for kind, state, count in rows}
