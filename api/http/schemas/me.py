"""Body of ``GET /me``: the calling key, its role and its tenant."""

from __future__ import annotations

from pydantic import BaseModel, Field

from spate.api.security import Role


class CallerPublic(BaseModel):
    """The tenant key a request was made with (never its secret)."""

    tenant_id: str
    tenant: str = Field(description="the tenant's name")
    key_id: str
    key_name: str
    role: Role
