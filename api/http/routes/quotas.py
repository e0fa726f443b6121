"""/quotas: the caller's tenant's plan, each limit's value and the tenant's current use
(any role); ``/tenants/{tenant_id}/quotas``: any tenant's, for the platform key.

The limits themselves are checked where things are admitted, in the repositories
(:mod:`spate.api.quotas`); this resource only reports them.
"""

from __future__ import annotations

from fastapi import APIRouter

from spate.api.http.deps import PlatformQuotas, QuotasRead
from spate.api.http.errors import ERROR_RESPONSES
from spate.api.http.schemas.quotas import QuotaPublic
from spate.api.repositories.quotas import QuotaRepository

router = APIRouter(tags=["quotas"], responses=ERROR_RESPONSES)


@router.get("/quotas", response_model=QuotaPublic)
def get_quotas(quotas: QuotasRead) -> QuotaPublic:
    """The tenant's plan: each limit's value and the tenant's current use."""
    return _public(quotas)


@router.get("/tenants/{tenant_id}/quotas", response_model=QuotaPublic)
def get_tenant_quotas(quotas: PlatformQuotas) -> QuotaPublic:
    """A tenant's plan, limits and use, for the platform key (an unknown tenant is a 404)."""
    return _public(quotas)


def _public(quotas: QuotaRepository) -> QuotaPublic:
    return QuotaPublic.of(quotas.tenant_id, quotas.plan(), quotas.usage())
