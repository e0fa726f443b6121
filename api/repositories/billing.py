"""Invoices, budgets and cost estimates of one tenant (see :mod:`spate.api.billing`).

An open period's invoice is computed from the usage rows each time it is read; a
closed one is computed once, on its first read after it closed, and stored: the
stored row is what every later read returns (two first reads race on the
invoice's primary key, and the loser reads the winner's).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from spate.api.billing import (
    PriceBook,
    invoice_body,
    invoice_lines,
    is_closed,
    period_bounds,
    period_of,
)
from spate.api.models import Budget, Invoice, Job, Pipeline, UsageRecord, utc_now
from spate.api.repositories.usage import UsageRepository
from spate.api.tenancy import scope_to_tenant

#: History an estimate looks at.
ESTIMATE_WINDOW = timedelta(days=7)
#: Hours in a billing month, for monthly estimates.
HOURS_PER_MONTH = 730


class BillingRepository:
    """One tenant's bills, priced with ``book``."""

    def __init__(self, session: Session, tenant_id: str, book: PriceBook) -> None:
        self.session = scope_to_tenant(session, tenant_id)
        self.tenant_id = tenant_id
        self.book = book
        self.usage = UsageRepository(session, tenant_id)

    # -- invoices ---------------------------------------------------------------

    def invoice(self, period: str, now: datetime | None = None) -> dict[str, Any]:
        """The period's invoice: stored once closed, computed while open."""
        now = now or utc_now()
        if not is_closed(period, now):
            return self._compute(period, "open", None)
        stored = self.session.get(Invoice, (self.tenant_id, period))
        if stored is not None:
            return dict(stored.body)
        body = self._compute(period, "closed", now)
        try:
            self.session.add(Invoice(tenant_id=self.tenant_id, period=period, closed_at=now,
                                     currency=body["currency"], total=body["total"],
                                     body=body))
            self.session.commit()
        except IntegrityError:
            self.session.rollback()  # another request closed it first: its body stands
            stored = self.session.get(Invoice, (self.tenant_id, period))
            assert stored is not None
            return dict(stored.body)
        return body

    def invoices(self, now: datetime | None = None) -> list[dict[str, Any]]:
        """Every period from the tenant's first usage to now, newest first (summaries)."""
        now = now or utc_now()
        first = self.usage.first_minute()
        periods = []
        month = period_bounds(period_of(first or now))[0]
        while month <= now:
            periods.append(period_of(month))
            month = period_bounds(period_of(month))[1]
        summaries = []
        for period in reversed(periods):
            body = self.invoice(period, now)
            summaries.append({key: body[key] for key in
                              ("period", "state", "currency", "total", "closed_at")})
        return summaries

    def _compute(self, period: str, state: str, closed_at: datetime | None) -> dict[str, Any]:
        start, end = period_bounds(period)
        parts = [(version, self.usage.totals(begins, ends))
                 for version, begins, ends in self.book.spans(start, end)]
        return invoice_body(self.tenant_id, period, self.book,
                            invoice_lines(self.book, parts), state, closed_at)

    def spent(self, now: datetime | None = None) -> tuple[str, float]:
        """The current period and its cost so far."""
        now = now or utc_now()
        period = period_of(now)
        return period, float(self._compute(period, "open", None)["total"])

    # -- budget -------------------------------------------------------------------

    def budget(self) -> Budget | None:
        return self.session.get(Budget, self.tenant_id)

    def budget_view(self, budget: Budget) -> tuple[Budget, str, float, str]:
        """The budget with the current period, its cost so far and the currency."""
        period, spent = self.spent()
        return budget, period, spent, self.book.currency

    def check_budget(self, now: datetime | None = None) -> bool:
        """Raise the alerts this period's cost calls for (each threshold once a period);
        whether the budget's hard stop applies now."""
        budget = self.budget()
        if budget is None:
            return False
        now = now or utc_now()
        period, spent = self.spent(now)
        raised = {(alert["period"], alert["kind"], alert["threshold"])
                  for alert in budget.alerts}
        new = []
        for threshold in budget.thresholds:
            if spent >= budget.amount * threshold / 100 and (
                    period, "threshold", threshold) not in raised:
                new.append({"period": period, "threshold": threshold, "kind": "threshold",
                            "cost": round(spent, 6), "at": now.isoformat()})
        stop = budget.hard_stop and spent >= budget.amount
        if stop and (period, "hard_stop", 100) not in raised:
            new.append({"period": period, "threshold": 100, "kind": "hard_stop",
                        "cost": round(spent, 6), "at": now.isoformat()})
        if new:
            budget.alerts = [*budget.alerts, *new]
            self.session.commit()
        return stop

    def over_budget(self) -> Budget | None:
        """The budget whose hard stop applies now, if any (starts are refused then)."""
        budget = self.budget()
        if budget is None or not budget.hard_stop:
            return None
        return budget if self.spent()[1] >= budget.amount else None

    def pipeline(self, name: str) -> Pipeline | None:
        return self.session.scalar(select(Pipeline).where(Pipeline.name == name))

    def set_budget(self, amount: float, thresholds: list[int], hard_stop: bool) -> Budget:
        budget = self.budget()
        if budget is None:
            budget = Budget(tenant_id=self.tenant_id, alerts=[])
            self.session.add(budget)
        budget.amount = amount
        budget.thresholds = sorted(set(thresholds))
        budget.hard_stop = hard_stop
        budget.updated_at = utc_now()
        self.session.commit()
        return budget

    def delete_budget(self) -> bool:
        budget = self.budget()
        if budget is None:
            return False
        self.session.delete(budget)
        self.session.commit()
        return True

    # -- estimates --------------------------------------------------------------

    def estimate(self, pipeline: Pipeline, now: datetime | None = None) -> Estimate:
        """What ``pipeline`` would cost per hour at its parallelism: from the compute units
        per task-hour that the tenant's runs used over the last week, or the platform's
        when the tenant has none, or one SCU per task when no run has history."""
        now = now or utc_now()
        since = now - ESTIMATE_WINDOW
        rate, basis = _compute_rate(self.session, since, now), \
            "the tenant's runs of the last 7 days"
        if rate is None:
            rate, basis = _platform_rate(self.session, since, now), \
                "all tenants' runs of the last 7 days"
        if rate is None:
            rate, basis = 1.0, "no runs in the last 7 days: one compute unit per task"
        scu_per_hour = rate * pipeline.parallelism
        cost_per_hour = self.book.cost("compute_unit_seconds", scu_per_hour * 3600, now)
        return Estimate(compute_units=round(scu_per_hour, 4),
                        cost_per_hour=round(cost_per_hour, 6),
                        cost_per_month=round(cost_per_hour * HOURS_PER_MONTH, 2),
                        currency=self.book.currency, basis=basis)


@dataclass(frozen=True)
class Estimate:
    """An estimate of a pipeline's compute cost (state and events come on top)."""

    compute_units: float
    cost_per_hour: float
    cost_per_month: float
    currency: str
    basis: str


def _compute_rate(session: Session, since: datetime, now: datetime) -> float | None:
    """Compute units per task over ``[since, now)``: the SCU-seconds the session's runs
    used, over the task-seconds they ran (None: no run ran). Both sides count only the
    runs whose jobs are still kept: a deleted pipeline's jobs go, its usage rows stay, and
    counting those would raise every other pipeline's estimate."""
    used = session.scalar(select(func.sum(UsageRecord.quantity)).where(
        UsageRecord.dimension == "compute_unit_seconds", UsageRecord.pipeline_id.is_not(None),
        UsageRecord.minute >= since, UsageRecord.minute < now,
        UsageRecord.job_id.in_(select(Job.id).where(Job.kind == "run"))))
    task_seconds = 0.0
    for started, ended, parallelism in session.execute(
            select(Job.started_at, Job.ended_at, Job.parallelism).where(
                Job.kind == "run", Job.started_at.is_not(None),
                (Job.ended_at.is_(None)) | (Job.ended_at > since))):
        if started is None:
            continue
        begins = max(started, since)
        ends = min(ended or now, now)
        if ends > begins:
            task_seconds += (ends - begins).total_seconds() * parallelism
    if not used or task_seconds < 60:
        return None
    return float(used) / task_seconds


def _platform_rate(session: Session, since: datetime, now: datetime) -> float | None:
    """The same rate over every tenant's runs (read without the tenant scope)."""
    unscoped = Session(bind=session.get_bind())
    try:
        return _compute_rate(unscoped, since, now)
    finally:
        unscoped.close()

