"""A tenant's plan and use, and the admissions the pipeline and job repositories ask for.

An admission takes the tenant's row lock first — a no-op ``UPDATE`` of its
``tenants`` row, which PostgreSQL turns into a row lock and SQLite into its
write lock, as :mod:`spate.api.repositories.control` does for a pipeline — then counts what
the tenant holds and checks the demand with :func:`spate.api.quotas.check`.
The lock is held until the caller's write commits, so of two requests racing
for a tenant's last slot the second counts the first's row and is refused.
A refusal rolls the transaction back, which releases the lock.
"""

from __future__ import annotations

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from spate.api.billing import PriceBook
from spate.api.http.errors import BudgetExceededError, QuotaExceededError
from spate.api.models import Job, Pipeline, Tenant
from spate.api.planning.sql import PlannedSource
from spate.api.quotas import Demand, Plan, Plans, SourcePlanner, Usage, check
from spate.api.repositories.base import TenantRepository
from spate.api.repositories.billing import BillingRepository
from spate.scheduler.store import DESIRED_RUNNING, TERMINAL_STATES


class QuotaRepository(TenantRepository):
    """One tenant's plan, its use, and its admissions."""

    def __init__(self, session: Session, tenant_id: str, plans: Plans,
                 planner: SourcePlanner | None = None,
                 price_book: PriceBook | None = None) -> None:
        super().__init__(session, tenant_id)
        self.plans = plans
        #: plans stored SQL for the sources of a new job (None: this repository only reads)
        self.planner = planner
        #: prices the tenant's month for its budget's hard stop (None: not checked)
        self.price_book = price_book

    def plan(self) -> Plan:
        # Tenants are not tenant-owned rows, so the scope does not filter them: name it.
        name = self.session.scalar(select(Tenant.plan).where(Tenant.id == self.tenant_id))
        return self.plans.plan(name)

    def usage(self) -> Usage:
        """What the tenant holds now: its pipelines, the running ones and their units,
        and its live previews (streaming: not yet asked to stop, not ended)."""
        pipelines = self.session.scalar(select(func.count()).select_from(Pipeline).where(
            Pipeline.tenant_id == self.tenant_id)) or 0
        running, pipeline_units, pipeline_widest = self.session.execute(select(
            func.count(), func.coalesce(func.sum(Pipeline.parallelism), 0),
            func.coalesce(func.max(Pipeline.parallelism), 0),
        ).where(Pipeline.tenant_id == self.tenant_id,
                Pipeline.desired_state == DESIRED_RUNNING)).one()
        previews, preview_units, preview_widest = self.session.execute(select(
            func.count(), func.coalesce(func.sum(Job.parallelism), 0),
            func.coalesce(func.max(Job.parallelism), 0),
        ).where(Job.tenant_id == self.tenant_id, Job.kind == "preview",
                Job.stop_mode.is_(None), Job.state.not_in(TERMINAL_STATES))).one()
        return Usage(pipelines=int(pipelines), running_pipelines=int(running),
                     pipeline_units=int(pipeline_units), preview_units=int(preview_units),
                     previews=int(previews),
                     largest_parallelism=max(int(pipeline_widest), int(preview_widest)))

    def sources_of(self, sql: str) -> tuple[PlannedSource, ...]:
        """The sources stored SQL reads, planned now (its tables may have changed)."""
        if self.planner is None:
            raise RuntimeError("admitting a new job needs a planner for the stored SQL")
        return tuple(self.planner(sql))

    def admit(self, demand: Demand) -> None:
        """Check ``demand`` against the tenant's plan and use, under the tenant's row lock,
        which stays held until the caller commits its write; refused: rolled back and
        :class:`~spate.api.http.errors.QuotaExceededError`. An empty demand needs no lock."""
        if demand.empty:
            return
        self._lock()
        try:
            check(self.plan(), self.usage(), demand)
            self._check_budget(demand)
        except (QuotaExceededError, BudgetExceededError):
            self.session.rollback()
            raise

    def _check_budget(self, demand: Demand) -> None:
        """Refuse new work once the tenant's hard-stop budget is spent (docs/billing.md)."""
        starts = max(demand.running_pipelines, demand.compute_units, demand.previews) > 0
        if not starts or self.price_book is None:
            return
        budget = BillingRepository(self.session, self.tenant_id, self.price_book).over_budget()
        if budget is not None:
            raise BudgetExceededError(
                f"this month's budget of {budget.amount:g} is spent and its hard stop is on: "
                "nothing new starts until next month; raise the budget or remove its hard stop "
                "to start now",
                {"limit": "budget", "value": budget.amount})

    def _lock(self) -> None:
        self.session.execute(
            update(Tenant).where(Tenant.id == self.tenant_id).values(plan=Tenant.plan)
            .execution_options(synchronize_session=False))
