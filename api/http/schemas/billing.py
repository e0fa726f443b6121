"""Price book, invoices, budgets and estimates as the API shows them."""

from __future__ import annotations

from datetime import date, datetime
from typing import Literal

from pydantic import BaseModel, Field, field_validator


class PricePublic(BaseModel):
    dimension: str
    unit: str = Field(description="the billing unit the price is per")
    price: float


class PriceBookVersionPublic(BaseModel):
    version: str
    effective_from: date
    currency: str
    prices: list[PricePublic]


class PriceBookPublic(BaseModel):
    """Every version of the operator's price book, oldest first, and the one in effect."""

    current: str
    versions: list[PriceBookVersionPublic]


class InvoiceLine(BaseModel):
    pipeline_id: str | None = Field(description="None: the tenant's previews")
    pipeline_name: str | None
    dimension: str
    unit: str
    quantity: float = Field(description="in billing units")
    unit_price: float
    amount: float
    price_book_version: str


class InvoicePublic(BaseModel):
    """A period's bill: open (still growing) or closed (final, never changes)."""

    tenant_id: str
    period: str = Field(description="YYYY-MM (UTC)")
    state: Literal["open", "closed"]
    currency: str
    closed_at: datetime | None
    price_book_versions: list[str]
    lines: list[InvoiceLine]
    total: float


class InvoiceSummary(BaseModel):
    period: str
    state: Literal["open", "closed"]
    currency: str
    total: float
    closed_at: datetime | None


class BudgetUpdate(BaseModel):
    """A monthly budget in the price book's currency."""

    amount: float = Field(gt=0, le=1e9)
    thresholds: list[int] = Field(default=[50, 80, 100], min_length=1, max_length=10,
                                  description="percentages of amount that raise an alert")
    hard_stop: bool = Field(default=False, description=(
        "stop every pipeline (after a commit) once the month's cost reaches amount, and "
        "refuse starts until the next month or a higher budget"))

    @field_validator("thresholds")
    @classmethod
    def _percentages(cls, thresholds: list[int]) -> list[int]:
        if any(not 1 <= threshold <= 1000 for threshold in thresholds):
            raise ValueError("thresholds are percentages between 1 and 1000")
        return thresholds


class BudgetAlert(BaseModel):
    period: str
    threshold: int = Field(description="the percentage crossed (hard stop: 100)")
    kind: Literal["threshold", "hard_stop"]
    cost: float
    at: datetime


class BudgetPublic(BaseModel):
    amount: float
    currency: str
    thresholds: list[int]
    hard_stop: bool
    period: str
    spent: float = Field(description="this month's cost so far")
    alerts: list[BudgetAlert]


class EstimatePublic(BaseModel):
    """An estimate, not a quote: compute only (state and events are billed on top)."""

    pipeline: str
    parallelism: int
    compute_units: float = Field(description="SCU the pipeline is expected to use")
    cost_per_hour: float
    cost_per_month: float
    currency: str
    basis: str = Field(description="what the estimate was made from")
