"""The embedded server's first tenant and its bootstrap admin key.

``spate serve`` has no platform operator to create tenants, so it keeps one
tenant (``default`` unless configured) and, at every start, issues a fresh
admin key named :data:`BOOTSTRAP_KEY_NAME` and revokes the one the previous
start printed. Only the key's hash is stored; the key itself is printed once.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update

from spate.api.db import Database
from spate.api.ids import new_id
from spate.api.models import ApiKey, Tenant, utc_now
from spate.api.repositories.api_keys import new_key_row
from spate.api.security import Role

BOOTSTRAP_KEY_NAME = "bootstrap admin key (spate serve)"


@dataclass(frozen=True)
class Bootstrap:
    """The tenant the embedded server serves and the admin key issued for this start."""

    tenant_id: str
    tenant_name: str
    admin_key: str


def bootstrap_tenant(database: Database, tenant_name: str) -> Bootstrap:
    """Create ``tenant_name`` if absent; issue a new bootstrap key, revoking the old one."""
    with database.sessions() as session:
        tenant = session.scalars(select(Tenant).where(Tenant.name == tenant_name)).one_or_none()
        if tenant is None:
            tenant = Tenant(id=new_id(), name=tenant_name, created_at=utc_now())
            session.add(tenant)
            session.flush()  # the key's foreign key needs the tenant row first
        session.execute(
            update(ApiKey)
            .where(ApiKey.tenant_id == tenant.id, ApiKey.name == BOOTSTRAP_KEY_NAME,
                   ApiKey.revoked_at.is_(None))
            .values(revoked_at=utc_now()))
        row, issued = new_key_row(tenant.id, BOOTSTRAP_KEY_NAME, Role.ADMIN)
        session.add(row)
        session.commit()
        return Bootstrap(tenant_id=tenant.id, tenant_name=tenant.name, admin_key=issued.token)
