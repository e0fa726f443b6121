"""What every repository shares: the tenant-scoped session, commits, and pages."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import InstrumentedAttribute, Session

from spate.api.http.errors import ConflictError
from spate.api.http.pagination import encode_cursor
from spate.api.tenancy import scope_to_tenant


class TenantRepository:
    """Base of repositories over one tenant's rows."""

    def __init__(self, session: Session, tenant_id: str) -> None:
        self.session = scope_to_tenant(session, tenant_id)
        self.tenant_id = tenant_id


@contextmanager
def transaction(session: Session, conflict_message: str) -> Iterator[None]:
    """Commit what the block does; a uniqueness race with another request becomes a 409."""
    try:
        yield
        session.commit()
    except IntegrityError as error:
        session.rollback()
        raise ConflictError(conflict_message) from error


def page(session: Session, statement: Select[Any], id_column: InstrumentedAttribute[Any],
         after: str | None, limit: int) -> tuple[list[Any], str | None]:
    """One keyset page of ``statement`` ordered by ``id_column`` (ids sort by creation)."""
    if after is not None:
        statement = statement.where(id_column > after)
    rows = list(session.scalars(statement.order_by(id_column).limit(limit + 1)).unique())
    if len(rows) <= limit:
        return rows, None
    rows = rows[:limit]
    return rows, encode_cursor(getattr(rows[-1], id_column.key))
