"""/tenants: creating and listing tenants, with the platform-admin key only."""

from __future__ import annotations

from fastapi import APIRouter, status

from api.deps import Platform
from api.errors import ERROR_RESPONSES
from api.pagination import DEFAULT_LIMIT, CursorQuery, LimitQuery, Page, decode_cursor
from api.schemas.api_keys import ApiKeyCreated
from api.schemas.tenants import TenantCreate, TenantCreated, TenantPublic

router = APIRouter(prefix="/tenants", tags=["tenants"], responses=ERROR_RESPONSES)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=TenantCreated)
def create_tenant(body: TenantCreate, platform: Platform) -> TenantCreated:
    """Create a tenant and its first admin key (shown once, in this response)."""
    tenant, key, issued = platform.create_tenant(body.name)
    return TenantCreated(tenant=TenantPublic.model_validate(tenant),
                         admin_key=ApiKeyCreated.of(key, issued.token))


@router.get("", response_model=Page[TenantPublic])
def list_tenants(platform: Platform, limit: LimitQuery = DEFAULT_LIMIT,
                 cursor: CursorQuery = None) -> Page[TenantPublic]:
    """Tenants, oldest first."""
    tenants, next_cursor = platform.list_tenants(decode_cursor(cursor), limit)
    return Page[TenantPublic](items=[TenantPublic.model_validate(t) for t in tenants],
                              next_cursor=next_cursor)


@router.get("/{tenant_id}", response_model=TenantPublic)
def get_tenant(tenant_id: str, platform: Platform) -> TenantPublic:
    return TenantPublic.model_validate(platform.get_tenant(tenant_id))
