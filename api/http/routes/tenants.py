"""/tenants: creating, listing and putting tenants on plans, with the platform-admin key
only (the operator's own actions: no tenant's quota applies to them)."""

from __future__ import annotations

from fastapi import APIRouter, Request, status

from spate.api.http.deps import Platform, app_state
from spate.api.http.errors import ERROR_RESPONSES, ConflictError
from spate.api.http.pagination import DEFAULT_LIMIT, CursorQuery, LimitQuery, Page, decode_cursor
from spate.api.http.schemas.api_keys import ApiKeyCreated
from spate.api.http.schemas.tenants import TenantCreate, TenantCreated, TenantPublic, TenantUpdate
from spate.api.quotas import DEFAULT_PLAN

router = APIRouter(prefix="/tenants", tags=["tenants"], responses=ERROR_RESPONSES)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=TenantCreated)
def create_tenant(body: TenantCreate, platform: Platform, request: Request) -> TenantCreated:
    """Create a tenant and its first admin key (shown once, in this response). A server
    without a sandbox for tenants' jobs (``SPATE_SANDBOX=off``) serves one tenant: 409."""
    if app_state(request).settings.sandbox == "off":
        raise ConflictError("this server runs jobs without a sandbox (SPATE_SANDBOX=off, "
                            "single-tenant/dev mode), so it serves one tenant only; run it "
                            "with the sandbox to host more")
    tenant, key, issued = platform.create_tenant(body.name)
    return TenantCreated(tenant=TenantPublic.model_validate(tenant),
                         admin_key=ApiKeyCreated.of(key, issued.token))


@router.get("", response_model=Page[TenantPublic])
def list_tenants(platform: Platform, limit: LimitQuery = DEFAULT_LIMIT,
                 cursor: CursorQuery = None) -> Page[TenantPublic]:
    """Tenants, oldest first."""
    return Page[TenantPublic].of_rows(*platform.list_tenants(decode_cursor(cursor), limit))


@router.get("/{tenant_id}", response_model=TenantPublic)
def get_tenant(tenant_id: str, platform: Platform) -> TenantPublic:
    return TenantPublic.model_validate(platform.get_tenant(tenant_id))


@router.patch("/{tenant_id}", response_model=TenantPublic)
def update_tenant(tenant_id: str, body: TenantUpdate, platform: Platform,
                  request: Request) -> TenantPublic:
    """Put the tenant on another plan (a plan the server does not define is a 400). A lower
    plan stops nothing: it refuses what the tenant would add next."""
    plan = None if body.plan == DEFAULT_PLAN else body.plan
    app_state(request).plans.require_known(plan)
    return TenantPublic.model_validate(platform.set_plan(tenant_id, plan))
