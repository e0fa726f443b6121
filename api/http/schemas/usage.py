"""Usage as the API returns it: sums per period, pipeline and dimension, with totals."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

Granularity = Literal["minute", "day"]
Dimension = Literal["compute_unit_seconds", "cpu_seconds", "memory_gb_seconds",
                    "state_gb_seconds", "preview_seconds", "events_in", "events_out",
                    "bytes_in", "bytes_out"]

#: What each dimension's quantity counts.
DIMENSION_UNITS: dict[str, str] = {
    "compute_unit_seconds": "SCU-seconds (SCU = max(vCPU, memory GiB / 4))",
    "cpu_seconds": "CPU seconds",
    "memory_gb_seconds": "GiB-seconds of working-set memory",
    "state_gb_seconds": "GiB-seconds of operator state held",
    "preview_seconds": "seconds a preview ran",
    "events_in": "rows read from sources",
    "events_out": "rows written to sinks",
    "bytes_in": "bytes sources read from their systems (where measured)",
    "bytes_out": "bytes sinks wrote to their systems (where measured)",
}


class UsageItem(BaseModel):
    """What one pipeline (or the tenant's previews) used of one dimension in one period."""

    period_start: datetime
    tenant_id: str
    pipeline_id: str | None = Field(description="None: the tenant's previews")
    pipeline_name: str | None = Field(description="None for previews; a deleted pipeline's "
                                                  "as it was named")
    pipeline_deleted: bool = Field(False, description="the pipeline has been deleted (its "
                                                      "usage stays)")
    dimension: Dimension
    quantity: float
    cost: float = Field(description="at the price-book version in effect then (0: unpriced)")


class UsagePublic(BaseModel):
    """Usage in ``[start, end)``: the sums, and each dimension's total."""

    granularity: Granularity
    start: datetime
    end: datetime
    items: list[UsageItem]
    totals: dict[str, float]
    currency: str
    total_cost: float
    units: dict[str, str] = Field(default_factory=lambda: dict(DIMENSION_UNITS))
