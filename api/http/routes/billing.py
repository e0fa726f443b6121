"""/price-book, /invoices, /budget and /pipelines/{name}/estimate: what usage costs.

The price book is public to every key (it is the operator's offer); invoices,
the budget and estimates are the tenant admin's. See docs/billing.md.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request, Response, status

from spate.api.billing import BILLING_UNITS, invoice_csv, period_bounds
from spate.api.http.deps import BillingAdmin, CallerDep, app_state
from spate.api.http.errors import ERROR_RESPONSES, BadRequestError, NotFoundError
from spate.api.http.schemas.billing import (
    BudgetAlert,
    BudgetPublic,
    BudgetUpdate,
    EstimatePublic,
    InvoicePublic,
    InvoiceSummary,
    PriceBookPublic,
    PriceBookVersionPublic,
    PricePublic,
)
from spate.api.models import Budget, utc_now

router = APIRouter(tags=["billing"], responses=ERROR_RESPONSES)

PeriodPath = Annotated[str, Path(max_length=7, description="the month, YYYY-MM (UTC)")]
_CSV: dict[int | str, dict[str, Any]] = {200: {
    "content": {"text/csv": {"schema": {"type": "string"}}},
    "description": "the invoice, as JSON or (format=csv) as CSV"}}


@router.get("/price-book", response_model=PriceBookPublic)
def read_price_book(request: Request, caller: CallerDep) -> PriceBookPublic:
    """Every version of the price book: price per billing unit of each dimension."""
    book = app_state(request).price_book
    return PriceBookPublic(
        current=book.at(utc_now()).version,
        versions=[PriceBookVersionPublic(
            version=version.version, effective_from=version.effective_from,
            currency=version.currency,
            prices=[PricePublic(dimension=dimension, unit=unit.name,
                                price=version.prices.get(dimension, 0.0))
                    for dimension, unit in BILLING_UNITS.items()])
            for version in book.versions])


@router.get("/invoices", response_model=list[InvoiceSummary])
def list_invoices(billing: BillingAdmin) -> list[InvoiceSummary]:
    """Every month from the tenant's first usage, newest first: the current one open."""
    return [InvoiceSummary.model_validate(summary) for summary in billing.invoices()]


@router.get("/invoices/{period}", response_model=InvoicePublic, responses=_CSV)
def read_invoice(billing: BillingAdmin, period: PeriodPath,
                 format: Annotated[str, Query(pattern="^(json|csv)$",
                                              description="json or csv")] = "json",
                 ) -> InvoicePublic | Response:
    """A month's invoice: lines per pipeline and dimension; final once the month closed."""
    try:
        start, _end = period_bounds(period)
    except ValueError as error:
        raise BadRequestError(str(error)) from None
    if start > utc_now():
        raise NotFoundError(f"{period} has not begun: there is no invoice for it yet")
    body = billing.invoice(period)
    if format == "csv":
        return Response(invoice_csv(body), media_type="text/csv", headers={
            "Content-Disposition": f'attachment; filename="spate-invoice-{period}.csv"'})
    return InvoicePublic.model_validate(body)


@router.get("/budget", response_model=BudgetPublic)
def read_budget(billing: BillingAdmin) -> BudgetPublic:
    """The monthly budget, this month's cost so far, and the alerts raised."""
    budget = billing.budget()
    if budget is None:
        raise NotFoundError("no budget is set: PUT /api/v1/budget sets one")
    return _budget_public(billing.budget_view(budget))


@router.put("/budget", response_model=BudgetPublic)
def set_budget(billing: BillingAdmin, body: BudgetUpdate) -> BudgetPublic:
    """Set the monthly budget: alerts at its thresholds, and optionally a hard stop."""
    budget = billing.set_budget(body.amount, body.thresholds, body.hard_stop)
    return _budget_public(billing.budget_view(budget))


@router.delete("/budget", status_code=status.HTTP_204_NO_CONTENT)
def delete_budget(billing: BillingAdmin) -> Response:
    """Remove the budget (its alerts go with it)."""
    if not billing.delete_budget():
        raise NotFoundError("no budget is set")
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/pipelines/{name}/estimate", response_model=EstimatePublic)
def estimate_pipeline(billing: BillingAdmin,
                      name: Annotated[str, Path(max_length=63)]) -> EstimatePublic:
    """What the pipeline's compute would cost at its parallelism: an estimate from the
    last week's runs, not a quote."""
    pipeline = billing.pipeline(name)
    if pipeline is None:
        raise NotFoundError(f"no pipeline named {name!r}")
    estimate = billing.estimate(pipeline)
    return EstimatePublic(pipeline=pipeline.name, parallelism=pipeline.parallelism,
                          compute_units=estimate.compute_units,
                          cost_per_hour=estimate.cost_per_hour,
                          cost_per_month=estimate.cost_per_month,
                          currency=estimate.currency, basis=estimate.basis)


def _budget_public(view: tuple[Budget, str, float, str]) -> BudgetPublic:
    budget, period, spent, currency = view
    return BudgetPublic(amount=budget.amount, currency=currency,
                        thresholds=list(budget.thresholds), hard_stop=budget.hard_stop,
                        period=period, spent=round(spent, 6),
                        alerts=[BudgetAlert.model_validate(alert) for alert in budget.alerts])

