"""Bodies of the tenants resource (platform administration)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from spate.api.schemas.api_keys import ApiKeyCreated
from spate.api.schemas.common import Name


class TenantCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name


class TenantPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    created_at: datetime


class TenantCreated(BaseModel):
    """A new tenant and its first admin key (the key is shown only here)."""

    tenant: TenantPublic
    admin_key: ApiKeyCreated
