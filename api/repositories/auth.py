"""Finding the key a request presents: the one lookup made before a tenant is known."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from spate.api.models import ApiKey, Tenant


@dataclass(frozen=True)
class FoundKey:
    """A key, and the plan its tenant is on (whose request rate applies to it)."""

    key: ApiKey
    plan: str | None


def find_key(session: Session, key_id: str) -> FoundKey | None:
    """The key with ``key_id`` in any tenant, revoked or not, with its tenant's plan."""
    row = session.execute(select(ApiKey, Tenant.plan).join(Tenant, Tenant.id == ApiKey.tenant_id)
                          .where(ApiKey.id == key_id)).one_or_none()
    return None if row is None else FoundKey(key=row[0], plan=row[1])
