"""/connection-profiles and /connection-tables: reusable connector settings and named tables.

Pipelines name a connection table like a table declared in their SQL. Secret
options are write-only: stored encrypted, shown as ``"********"``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Path, Response, status

from spate.api.connections import (
    SECRET_PLACEHOLDER,
    Options,
    build_table,
    masked,
    split_options,
)
from spate.api.crypto import SecretKeyMismatchError
from spate.api.http.deps import ChecksDep, ConnectionsRead, ConnectionsWrite
from spate.api.http.errors import ERROR_RESPONSES, ApiError
from spate.api.http.pagination import DEFAULT_LIMIT, CursorQuery, LimitQuery, Page, decode_cursor
from spate.api.http.schemas.connections import (
    ConnectionCheck,
    ConnectionProfileCreate,
    ConnectionProfilePublic,
    ConnectionProfileUpdate,
    ConnectionTableCreate,
    ConnectionTablePublic,
    FieldSchema,
)
from spate.api.models import ConnectionProfile, ConnectionTable
from spate.api.repositories.connections import ConnectionRepository
from spate.engine.connectors.core.checks import CheckResult
from spate.engine.planner.external import TableDefinition
from spate.scheduler.checks import CheckRunner

logger = logging.getLogger(__name__)
profiles = APIRouter(prefix="/connection-profiles", tags=["connections"],
                     responses=ERROR_RESPONSES)
tables = APIRouter(prefix="/connection-tables", tags=["connections"], responses=ERROR_RESPONSES)

NamePath = Annotated[str, Path(max_length=63, description="the profile's or table's name")]


def _profile_public(profile: ConnectionProfile) -> ConnectionProfilePublic:
    return ConnectionProfilePublic(
        id=profile.id, name=profile.name, connector=profile.connector,
        config=dict(profile.config), secrets=masked(profile.secrets),
        created_at=profile.created_at, updated_at=profile.updated_at)


def _table_public(connections: ConnectionRepository, table: ConnectionTable,
                  profile_name: str | None) -> ConnectionTablePublic:
    try:
        planned = connections.planned_table(table)
        role, bounded = planned.role, planned.bounded
    except ApiError:
        # Stored before the engine changed its rules: still listed, so it can be deleted.
        options = connections.options(table, reveal=False).plain
        role, bounded = options.get("type", "source"), False
    return ConnectionTablePublic(
        id=table.id, name=table.name, connector=table.connector, profile=profile_name,
        role=role, bounded=bounded, config=dict(table.config),
        secrets=masked(table.secrets), fields=[FieldSchema(**f) for f in table.fields],
        created_at=table.created_at, updated_at=table.updated_at)


@profiles.post("", status_code=status.HTTP_201_CREATED, response_model=ConnectionProfilePublic)
def create_profile(body: ConnectionProfileCreate,
                   connections: ConnectionsWrite) -> ConnectionProfilePublic:
    """Create a profile; an option the connector does not know is a 400 naming it."""
    options = split_options(body.connector, body.config, body.secrets)
    return _profile_public(connections.create_profile(body.name, body.connector, options))


@profiles.get("", response_model=Page[ConnectionProfilePublic])
def list_profiles(connections: ConnectionsRead, limit: LimitQuery = DEFAULT_LIMIT,
                  cursor: CursorQuery = None) -> Page[ConnectionProfilePublic]:
    """The tenant's connection profiles, oldest first."""
    rows, next_cursor = connections.list_profiles(decode_cursor(cursor), limit)
    return Page[ConnectionProfilePublic](items=[_profile_public(p) for p in rows],
                                         next_cursor=next_cursor)


@profiles.get("/{name}", response_model=ConnectionProfilePublic)
def get_profile(name: NamePath, connections: ConnectionsRead) -> ConnectionProfilePublic:
    return _profile_public(connections.get_profile(name))


@profiles.patch("/{name}", response_model=ConnectionProfilePublic)
def update_profile(name: NamePath, body: ConnectionProfileUpdate,
                   connections: ConnectionsWrite) -> ConnectionProfilePublic:
    """Set options (a value) or remove them (null); a secret is replaced without being shown.
    A change that would break a table using the profile is a 400."""
    return _profile_public(connections.update_profile(name, body.config, body.secrets))


@profiles.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT)
def delete_profile(name: NamePath, connections: ConnectionsWrite) -> Response:
    """Delete a profile no connection table uses (otherwise 409 naming the tables)."""
    connections.delete_profile(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@profiles.post("/test", response_model=ConnectionCheck)
def test_new_profile(body: ConnectionProfileCreate, connections: ConnectionsWrite,
                     checks: ChecksDep) -> ConnectionCheck:
    """Check a profile before creating it, as ``POST /connection-profiles/{name}/test``
    checks one: nothing is stored. An option the connector does not know is a 400."""
    options = split_options(body.connector, body.config, body.secrets)
    return _checked(lambda: _check_options(connections, checks, body.connector, options))


@profiles.post("/{name}/test", response_model=ConnectionCheck)
def test_profile(name: NamePath, connections: ConnectionsWrite,
                 checks: ChecksDep) -> ConnectionCheck:
    """Check that what the profile points at can be reached (from the tenant's compute
    unit, never from the API's process)."""
    profile = connections.get_profile(name)
    return _checked(lambda: _check_options(connections, checks, profile.connector,
                                           connections.reveal_profile(profile)))


@tables.post("", status_code=status.HTTP_201_CREATED, response_model=ConnectionTablePublic)
def create_table(body: ConnectionTableCreate,
                 connections: ConnectionsWrite) -> ConnectionTablePublic:
    """Create a table, validated as CREATE TABLE would be; problems are 400s naming the
    option or field."""
    options = split_options(body.connector, body.config, body.secrets)
    fields = [f.model_dump() for f in body.fields]
    table = connections.create_table(body.name, body.connector, body.profile, options, fields)
    return _table_public(connections, table, body.profile)


@tables.get("", response_model=Page[ConnectionTablePublic])
def list_tables(connections: ConnectionsRead, limit: LimitQuery = DEFAULT_LIMIT,
                cursor: CursorQuery = None) -> Page[ConnectionTablePublic]:
    """The tenant's connection tables, oldest first."""
    rows, next_cursor = connections.list_tables(decode_cursor(cursor), limit)
    names = connections.profile_names(rows)
    items = [_table_public(connections, t, names.get(t.profile_id or "")) for t in rows]
    return Page[ConnectionTablePublic](items=items, next_cursor=next_cursor)


@tables.get("/{name}", response_model=ConnectionTablePublic)
def get_table(name: NamePath, connections: ConnectionsRead) -> ConnectionTablePublic:
    table = connections.get_table(name)
    names = connections.profile_names([table])
    return _table_public(connections, table, names.get(table.profile_id or ""))


@tables.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT)
def delete_table(name: NamePath, connections: ConnectionsWrite) -> Response:
    """Delete a table; pipelines already stored keep their SQL, which no longer plans."""
    connections.delete_table(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@tables.post("/test", response_model=ConnectionCheck)
def test_new_table(body: ConnectionTableCreate, connections: ConnectionsWrite,
                   checks: ChecksDep) -> ConnectionCheck:
    """Check a table before creating it (over its profile's options), as ``POST
    /connection-tables/{name}/test`` checks one: nothing is stored. Problems with its
    request (an unknown option, connector or profile) are 400s naming them."""
    options = split_options(body.connector, body.config, body.secrets)
    definition, merged = connections.unsaved_definition(
        body.name, body.connector, body.profile, options, [f.model_dump() for f in body.fields])
    return _checked(lambda: _check_definition(connections, checks, definition, merged))


@tables.post("/{name}/test", response_model=ConnectionCheck)
def test_table(name: NamePath, connections: ConnectionsWrite,
               checks: ChecksDep) -> ConnectionCheck:
    """Validate the table with its real options and check what it points at can be reached
    (from the tenant's compute unit, never from the API's process)."""
    table = connections.get_table(name)
    return _checked(lambda: _check_table(connections, checks, table))


def _check_table(connections: ConnectionRepository, checks: CheckRunner,
                 table: ConnectionTable) -> CheckResult:
    return _check_definition(connections, checks, connections.definition(table, reveal=True),
                             connections.options(table, reveal=True))


def _check_definition(connections: ConnectionRepository, checks: CheckRunner,
                      definition: TableDefinition, options: Options) -> CheckResult:
    """Validate a table as CREATE TABLE would, then check what it points at."""
    try:
        planned = build_table(definition, options.secret, connections.boundary)
    except ApiError as error:
        return CheckResult(False, error.message).scrubbed(options.secret, SECRET_PLACEHOLDER)
    return _check_options(connections, checks, definition.connector, options, planned.role)


def _check_options(connections: ConnectionRepository, checks: CheckRunner, connector: str,
                   options: Options, role: str | None = None) -> CheckResult:
    """Check what ``options`` (secrets in clear) point at, from the tenant's compute unit;
    the secrets never appear in the answer."""
    answer = checks.run(connections.tenant_id, {
        "connector": connector, "options": options.merged(), "role": role,
        "boundary": connections.boundary.to_dict()})
    result = CheckResult(bool(answer["ok"]), str(answer["message"]))
    return result.scrubbed(options.secret, SECRET_PLACEHOLDER)


def _checked(run: Callable[[], CheckResult]) -> ConnectionCheck:
    """Run a check; a key that cannot open the secrets is a failed check, not an error."""
    try:
        result = run()
    except SecretKeyMismatchError as error:
        result = CheckResult(False, str(error))
    return ConnectionCheck(ok=result.ok, message=result.message)
