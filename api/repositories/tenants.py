"""Tenants, for the platform admin: the only repository not scoped to one tenant."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from spate.api.http.errors import NotFoundError
from spate.api.ids import new_id
from spate.api.models import ApiKey, Tenant, utc_now
from spate.api.repositories.api_keys import new_key_row
from spate.api.repositories.base import page, transaction
from spate.api.security import IssuedKey, Role

FIRST_KEY_NAME = "first admin key"


class PlatformRepository:
    """Creates and lists tenants; reads no tenant's pipelines or keys."""

    def __init__(self, session: Session) -> None:
        self.session = session

    def create_tenant(self, name: str) -> tuple[Tenant, ApiKey, IssuedKey]:
        """A tenant and its first admin key, in one transaction."""
        tenant = Tenant(id=new_id(), name=name, created_at=utc_now())
        key, issued = new_key_row(tenant.id, FIRST_KEY_NAME, Role.ADMIN)
        with transaction(self.session, f"a tenant named '{name}' already exists"):
            self.session.add(tenant)
            self.session.flush()  # the key's foreign key needs the tenant row first
            self.session.add(key)
        return tenant, key, issued

    def list_tenants(self, after: str | None, limit: int) -> tuple[list[Tenant], str | None]:
        return page(self.session, select(Tenant), Tenant.id, after, limit)

    def set_plan(self, tenant_id: str, plan: str | None) -> Tenant:
        """Put the tenant on ``plan`` (None: the default plan); nothing it runs is
        touched, a lower plan only refuses what it admits next."""
        tenant = self.get_tenant(tenant_id)
        with transaction(self.session, f"tenant '{tenant_id}' changed concurrently; retry"):
            tenant.plan = plan
        return tenant

    def get_tenant(self, tenant_id: str) -> Tenant:
        tenant = self.session.scalars(select(Tenant).where(Tenant.id == tenant_id)).one_or_none()
        if tenant is None:
            raise NotFoundError(f"tenant '{tenant_id}' not found")
        return tenant
