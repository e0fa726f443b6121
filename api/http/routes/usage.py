"""/usage: what a tenant's pipelines and previews used, by minute or by day.

A tenant's admin key reads its own tenant's usage; the platform-admin key reads
every tenant's (or one's, with ``tenant_id``) for the operator. Usage is measured
by the scheduler's meter (see docs/billing.md).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Request

from spate.api.http.deps import UsageRead, app_state
from spate.api.http.errors import ERROR_RESPONSES, BadRequestError
from spate.api.http.schemas.usage import Dimension, Granularity, UsageItem, UsagePublic
from spate.api.models import utc_now
from spate.api.repositories.usage import MINUTE, UsageFilter

router = APIRouter(tags=["usage"], responses=ERROR_RESPONSES)

#: The longest span read by the minute (a day's minutes, twice).
MAX_MINUTE_SPAN = timedelta(days=2)


@router.get("/usage", response_model=UsagePublic)
def read_usage(
    request: Request,
    usage: UsageRead,
    granularity: Annotated[Granularity, Query(description="sum by minute or by day")] = "day",
    start: Annotated[datetime | None, Query(
        description="from (inclusive; default: the start of this month, UTC)")] = None,
    end: Annotated[datetime | None, Query(description="until (exclusive; default: now)")
                   ] = None,
    pipeline_id: Annotated[str | None, Query(max_length=64,
                                             description="only this pipeline")] = None,
    dimension: Annotated[Dimension | None, Query(description="only this dimension")] = None,
    tenant_id: Annotated[str | None, Query(
        max_length=64, description="only this tenant (the platform-admin key only)")] = None,
) -> UsagePublic:
    """Usage per period, pipeline and dimension, with each dimension's total."""
    now = utc_now()
    until = _aware(end) if end is not None else now
    since = _aware(start) if start is not None else now.replace(
        day=1, hour=0, minute=0, second=0, microsecond=0)
    if since >= until:
        raise BadRequestError("start must be before end")
    if granularity == MINUTE and until - since > MAX_MINUTE_SPAN:
        raise BadRequestError("usage by the minute spans at most two days: narrow start and "
                              "end, or ask for granularity=day")
    if tenant_id is not None and usage.tenant_id is not None:
        raise BadRequestError("tenant_id is for the platform-admin key; a tenant's key reads "
                              "its own tenant's usage")
    rows = usage.summed(UsageFilter(start=since, end=until, granularity=granularity,
                                    pipeline_id=pipeline_id, dimension=dimension,
                                    tenant_id=tenant_id))
    book = app_state(request).price_book
    totals: dict[str, float] = {}
    items = []
    for row in rows:
        totals[row.dimension] = totals.get(row.dimension, 0.0) + row.quantity
        items.append(UsageItem(
            period_start=row.period_start, tenant_id=row.tenant_id,
            pipeline_id=row.pipeline_id, pipeline_name=row.pipeline_name,
            pipeline_deleted=row.pipeline_deleted,
            dimension=row.dimension,  # type: ignore[arg-type]
            quantity=row.quantity,
            cost=round(book.cost(row.dimension, row.quantity, row.period_start), 6)))
    return UsagePublic(granularity=granularity, start=since, end=until, totals=totals,
                       currency=book.currency,
                       total_cost=round(sum(item.cost for item in items), 6), items=items)


def _aware(value: datetime) -> datetime:
    """A time the caller gave without a zone is UTC."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
