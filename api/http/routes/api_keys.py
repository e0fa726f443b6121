"""/api-keys: a tenant's keys, managed with an admin key.

A key's secret appears once, in the response that creates or rotates it.
Revoking or rotating takes effect on the next request: keys are checked
against the database on every request, with no cache.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response, status

from spate.api.http.deps import ApiKeysAdmin
from spate.api.http.errors import ERROR_RESPONSES
from spate.api.http.pagination import DEFAULT_LIMIT, CursorQuery, LimitQuery, Page, decode_cursor
from spate.api.http.schemas.api_keys import ApiKeyCreate, ApiKeyCreated, ApiKeyPublic

router = APIRouter(prefix="/api-keys", tags=["api-keys"], responses=ERROR_RESPONSES)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=ApiKeyCreated)
def create_api_key(body: ApiKeyCreate, keys: ApiKeysAdmin) -> ApiKeyCreated:
    """Create a key; its secret is in this response only."""
    row, issued = keys.create(body.name, body.role)
    return ApiKeyCreated.of(row, issued.token)


@router.get("", response_model=Page[ApiKeyPublic])
def list_api_keys(
    keys: ApiKeysAdmin,
    limit: LimitQuery = DEFAULT_LIMIT,
    cursor: CursorQuery = None,
    include_revoked: Annotated[bool, Query(description="list revoked keys too")] = False,
) -> Page[ApiKeyPublic]:
    """The tenant's keys, oldest first, by prefix (secrets are never shown again)."""
    return Page[ApiKeyPublic].of_rows(
        *keys.list_keys(decode_cursor(cursor), limit, include_revoked))


@router.get("/{key_id}", response_model=ApiKeyPublic)
def get_api_key(key_id: str, keys: ApiKeysAdmin) -> ApiKeyPublic:
    return ApiKeyPublic.model_validate(keys.get(key_id))


@router.delete("/{key_id}", status_code=status.HTTP_204_NO_CONTENT)
def revoke_api_key(key_id: str, keys: ApiKeysAdmin) -> Response:
    """Revoke a key: it stops working at once. The tenant's last admin key cannot go."""
    keys.revoke(key_id)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{key_id}/rotate", response_model=ApiKeyCreated)
def rotate_api_key(key_id: str, keys: ApiKeysAdmin) -> ApiKeyCreated:
    """Give a key a new secret (in this response only); the old one stops working at once."""
    row, issued = keys.rotate(key_id)
    return ApiKeyCreated.of(row, issued.token)
