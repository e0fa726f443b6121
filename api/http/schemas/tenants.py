"""Bodies of the tenants resource (platform administration)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from spate.api.http.schemas.api_keys import ApiKeyCreated
from spate.api.http.schemas.common import NAME_PATTERN, Name, StrictModel


class TenantCreate(StrictModel):
    name: Name


class TenantUpdate(StrictModel):
    """What the platform admin may change about a tenant: its plan."""

    plan: str | None = Field(pattern=NAME_PATTERN, description=(
        "one of the server's plans (SPATE_PLANS); null or 'default': the default plan. "
        "Nothing running is stopped by a lower plan: it only refuses new admissions"))


class TenantPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    created_at: datetime
    plan: str | None = Field(description="the tenant's plan; null: the default plan")


class TenantCreated(BaseModel):
    """A new tenant and its first admin key (the key is shown only here)."""

    tenant: TenantPublic
    admin_key: ApiKeyCreated
