"""Who a tenant key is: its tenant's and its own name, for ``GET /me``."""

from __future__ import annotations

from sqlalchemy import select

from spate.api.http.errors import NotFoundError
from spate.api.models import ApiKey, Tenant
from spate.api.repositories.base import TenantRepository


class CallerRepository(TenantRepository):
    """The calling key and its tenant."""

    def describe(self, key_id: str) -> tuple[Tenant, ApiKey]:
        # Tenants are not tenant-owned rows, so the scope does not filter them: name it.
        tenant = self.session.scalars(
            select(Tenant).where(Tenant.id == self.tenant_id)).one_or_none()
        key = self.session.scalars(select(ApiKey).where(ApiKey.id == key_id)).one_or_none()
        if tenant is None or key is None:
            raise NotFoundError("the key's tenant no longer exists")
        return tenant, key
