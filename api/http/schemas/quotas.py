"""Bodies of the quotas resource: a tenant's plan, each limit and the tenant's use."""

from __future__ import annotations

from pydantic import BaseModel, Field

from spate.api.quotas import LimitName, LimitUse, Plan, Usage, limit_uses


class QuotaLimitPublic(BaseModel):
    """One limit of the tenant's plan and how much of it the tenant uses."""

    limit: LimitName
    value: int | None = Field(description="the plan's limit; null: none (the server's API "
                                          "rate limits are off)")
    current: int | None = Field(
        description="the tenant's use now: pipelines stored, pipelines running, compute "
                    "units reserved, live previews; for parallelism the largest in use; "
                    "null where use is not counted (source_rate is checked per source, "
                    "api_requests_per_minute per request)")

    @classmethod
    def of(cls, use: LimitUse) -> QuotaLimitPublic:
        return cls(limit=use.limit, value=use.value, current=use.current)


class QuotaPublic(BaseModel):
    """A tenant's plan and, for each limit, its value and the tenant's use."""

    tenant_id: str
    plan: str = Field(description="the tenant's plan ('default' unless the operator put "
                                  "the tenant on another)")
    limits: list[QuotaLimitPublic]

    @classmethod
    def of(cls, tenant_id: str, plan: Plan, usage: Usage) -> QuotaPublic:
        return cls(tenant_id=tenant_id, plan=plan.name,
                   limits=[QuotaLimitPublic.of(use) for use in limit_uses(plan, usage)])
