"""Prometheus scrape targets: a tenant's own figures, and the platform's.

``GET /api/v1/metrics`` takes any key of a tenant and shows that tenant's
pipelines only. ``GET /metrics`` (outside /api/v1, where scrapers look by
default) takes the platform-admin key and shows every tenant's pipelines with
a ``tenant`` label, plus platform totals.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from spate.api.http.deps import PlatformMetrics, TenantMetrics, ViewerCaller
from spate.api.http.errors import ERROR_RESPONSES
from spate.api.http.prometheus import CONTENT_TYPE, PlatformTotals, SpateCollector, render
from spate.api.models import utc_now

_EXPOSITION: dict[int | str, dict[str, Any]] = {200: {
    "description": "Prometheus text exposition format",
    "content": {CONTENT_TYPE.split(";")[0]: {"schema": {"type": "string"}}},
}}

router = APIRouter(tags=["metrics"], responses=ERROR_RESPONSES)
platform_router = APIRouter(tags=["metrics"], responses=ERROR_RESPONSES)


@router.get("/metrics", response_class=Response, responses=_EXPOSITION)
def tenant_metrics(metrics: TenantMetrics, caller: ViewerCaller) -> Response:
    """The tenant's pipelines and their latest runs, for Prometheus."""
    collector = SpateCollector(metrics.pipelines(), utc_now(), usage=metrics.usage())
    return Response(render(collector), media_type=CONTENT_TYPE)


@platform_router.get("/metrics", response_class=Response, responses=_EXPOSITION)
def platform_metrics(metrics: PlatformMetrics) -> Response:
    """Every tenant's pipelines (label ``tenant``: its id) and platform totals."""
    totals = PlatformTotals(tenants=metrics.tenant_count(), job_counts=metrics.job_counts())
    collector = SpateCollector(metrics.pipelines(), utc_now(), platform=totals,
                               usage=metrics.usage())
    return Response(render(collector), media_type=CONTENT_TYPE)
