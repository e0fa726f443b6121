"""Tenant scoping of database sessions: the one place tenancy is enforced.

A session scoped to a tenant (:func:`scope_to_tenant`) gets, on every ORM
SELECT, UPDATE and DELETE, the criterion ``tenant_id = <tenant>`` for every
:class:`~spate.api.models.TenantOwned` model — in joins, relationship loads and
subqueries too. Before each flush it stamps new rows with the tenant and
refuses to write a row of another tenant. Repositories get their session only
through :func:`scope_to_tenant`, so no route or repository method has to
remember to filter, and forgetting cannot leak another tenant's rows.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import ORMExecuteState, Session, sessionmaker, with_loader_criteria

from spate.api.models import TenantOwned

_TENANT_KEY = "spate.tenant_id"


class TenancyViolationError(RuntimeError):
    """A write crossed tenants: a bug in Spate, never the caller's doing."""


def scope_to_tenant(session: Session, tenant_id: str) -> Session:
    """Scope ``session`` to ``tenant_id`` for the rest of its life."""
    current = session.info.get(_TENANT_KEY)
    if current is not None and current != tenant_id:
        raise TenancyViolationError("a session cannot serve two tenants")
    session.info[_TENANT_KEY] = tenant_id
    return session


def session_tenant(session: Session) -> str | None:
    """The tenant ``session`` is scoped to, if any."""
    tenant_id = session.info.get(_TENANT_KEY)
    return tenant_id if isinstance(tenant_id, str) else None


def install_tenancy(sessions: sessionmaker[Session]) -> None:
    """Make every session of ``sessions`` honour its tenant scope."""
    event.listen(sessions, "do_orm_execute", _filter_by_tenant)
    event.listen(sessions, "before_flush", _check_writes)


def _filter_by_tenant(state: ORMExecuteState) -> None:
    tenant_id = session_tenant(state.session)
    if tenant_id is None:
        return
    if state.is_select or state.is_update or state.is_delete:
        # A column load refreshes an object this session already loaded in scope.
        if state.is_select and state.is_column_load:
            return
        state.statement = state.statement.options(with_loader_criteria(
            TenantOwned, lambda cls: cls.tenant_id == tenant_id, include_aliases=True,
        ))


def _check_writes(session: Session, flush_context: Any, instances: Any) -> None:
    tenant_id = session_tenant(session)
    if tenant_id is None:
        return
    for obj in session.new:
        if isinstance(obj, TenantOwned):
            if obj.tenant_id is None:
                obj.tenant_id = tenant_id
            elif obj.tenant_id != tenant_id:
                raise TenancyViolationError(f"refusing to add a row of another tenant: {obj!r}")
    for obj in list(session.dirty) + list(session.deleted):
        if isinstance(obj, TenantOwned) and obj.tenant_id != tenant_id:
            raise TenancyViolationError(f"refusing to change a row of another tenant: {obj!r}")
