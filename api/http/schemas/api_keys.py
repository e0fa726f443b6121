"""Bodies of the api-keys resource."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from spate.api.http.schemas.common import Label, StrictModel
from spate.api.security import Role


class ApiKeyCreate(StrictModel):
    name: Label = Field(description="what the key is for, e.g. 'terraform' or 'ci'")
    role: Role


class ApiKeyPublic(BaseModel):
    """A key as listed: its prefix, never its secret."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    name: str
    role: Role
    prefix: str = Field(description="the key's first characters, to recognise it")
    created_at: datetime
    rotated_at: datetime | None
    revoked_at: datetime | None


class ApiKeyCreated(ApiKeyPublic):
    """A key just created or rotated: ``key`` is shown this once and never again."""

    key: str = Field(description="the whole key; send it as 'Authorization: Bearer <key>'")

    @classmethod
    def of(cls, row: object, token: str) -> ApiKeyCreated:
        """The key row ``row`` with its just-issued ``token``."""
        return cls(**ApiKeyPublic.model_validate(row).model_dump(), key=token)
