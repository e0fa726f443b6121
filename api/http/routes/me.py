"""/me: the calling key's tenant, name and role (what the web console shows at sign-in)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends

from spate.api.http.deps import SessionDep, ViewerCaller
from spate.api.http.errors import ERROR_RESPONSES
from spate.api.http.schemas.me import CallerPublic
from spate.api.repositories.me import CallerRepository

router = APIRouter(tags=["api-keys"], responses=ERROR_RESPONSES)


def _callers(session: SessionDep, caller: ViewerCaller) -> CallerRepository:
    return CallerRepository(session, caller.tenant_id)


@router.get("/me", response_model=CallerPublic)
def who_am_i(caller: ViewerCaller,
             callers: Annotated[CallerRepository, Depends(_callers)]) -> CallerPublic:
    """The tenant and key this request's API key belongs to."""
    tenant, key = callers.describe(caller.key_id)
    return CallerPublic(tenant_id=tenant.id, tenant=tenant.name, key_id=key.id,
                        key_name=key.name, role=key.role)  # type: ignore[arg-type]
