"""Finding the key a request presents: the one lookup made before a tenant is known."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from spate.api.models import ApiKey


def find_key(session: Session, key_id: str) -> ApiKey | None:
    """The key with ``key_id`` in any tenant, revoked or not."""
    return session.scalars(select(ApiKey).where(ApiKey.id == key_id)).one_or_none()
