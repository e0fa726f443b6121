"""The tenant scope of a session filters every ORM query and refuses cross-tenant writes."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from sqlalchemy import delete, func, select, update
from sqlalchemy.orm import Session

from spate.api import migrate
from spate.api.db import Database, create_database
from spate.api.ids import new_id
from spate.api.models import (
    ImmutableVersionError,
    Pipeline,
    PipelineVersion,
    Tenant,
    utc_now,
)
from spate.api.tenancy import TenancyViolationError, scope_to_tenant
from tests.api.support import BACKENDS


@pytest.fixture(params=BACKENDS)
def database(request: pytest.FixtureRequest,
             fresh_database_url: Callable[[str], str]) -> Iterator[Database]:
    url = fresh_database_url(request.param)
    migrate.upgrade(url)
    database = create_database(url)
    yield database
    database.dispose()


def _two_tenants(database: Database) -> tuple[str, str]:
    ids = []
    with database.sessions() as session:
        for name in ("a", "b"):
            tenant = Tenant(id=new_id(), name=name, created_at=utc_now())
            session.add(tenant)
            session.flush()
            pipeline = Pipeline(id=new_id(), tenant_id=tenant.id, name="shared-name",
                                current_version=1, created_at=utc_now(), updated_at=utc_now())
            pipeline.versions.append(PipelineVersion(
                id=new_id(), tenant_id=tenant.id, version=1, sql=f"-- {name}",
                sql_sha256="0" * 64, created_at=utc_now()))
            session.add(pipeline)
            ids.append(tenant.id)
        session.commit()
    return ids[0], ids[1]


def _scoped(database: Database, tenant_id: str) -> Session:
    return scope_to_tenant(database.sessions(), tenant_id)


def test_selects_joins_and_relationships_see_one_tenant(database: Database) -> None:
    a, b = _two_tenants(database)
    with _scoped(database, a) as session:
        assert session.scalar(select(func.count()).select_from(Pipeline)) == 1
        assert {p.tenant_id for p in session.scalars(select(Pipeline))} == {a}
        assert [v.sql for v in session.scalars(select(PipelineVersion))] == ["-- a"]
        joined = session.execute(select(Pipeline.tenant_id, PipelineVersion.sql)
                                 .join(PipelineVersion, Pipeline.versions)).all()
        assert [tuple(row) for row in joined] == [(a, "-- a")]
        pipeline = session.scalars(select(Pipeline)).one()
        assert [v.sql for v in pipeline.versions] == ["-- a"]
        assert pipeline.current.sql == "-- a"
        # Asking for b's rows by id finds nothing.
        assert session.scalars(select(Pipeline).where(Pipeline.tenant_id == b)).all() == []


def test_bulk_update_and_delete_touch_one_tenant(database: Database) -> None:
    a, b = _two_tenants(database)
    with _scoped(database, a) as session:
        assert session.execute(update(Pipeline).values(description="changed")).rowcount == 1
        assert session.execute(delete(PipelineVersion)).rowcount == 1
        session.commit()
    with database.sessions() as session:
        rows = {p.tenant_id: p.description for p in session.scalars(select(Pipeline))}
        assert rows == {a: "changed", b: ""}
        versions = session.scalars(select(PipelineVersion.tenant_id)).all()
        assert versions == [b]


def test_writes_to_another_tenant_are_refused(database: Database) -> None:
    a, b = _two_tenants(database)
    with _scoped(database, a) as session:
        session.add(Pipeline(id=new_id(), tenant_id=b, name="intruder", current_version=1,
                             created_at=utc_now(), updated_at=utc_now()))
        with pytest.raises(TenancyViolationError):
            session.flush()
    with _scoped(database, a) as session:
        stamped = Pipeline(id=new_id(), name="stamped", current_version=1,
                           created_at=utc_now(), updated_at=utc_now())
        stamped.versions.append(PipelineVersion(id=new_id(), version=1, sql="--",
                                                sql_sha256="0" * 64, created_at=utc_now()))
        session.add(stamped)
        session.commit()
        assert stamped.tenant_id == a and stamped.versions[0].tenant_id == a


def test_a_session_serves_one_tenant(database: Database) -> None:
    a, b = _two_tenants(database)
    with _scoped(database, a) as session, pytest.raises(TenancyViolationError):
        scope_to_tenant(session, b)


def test_a_version_cannot_point_at_another_tenants_pipeline(database: Database) -> None:
    a, b = _two_tenants(database)
    with database.sessions() as session:
        b_pipeline = session.scalars(select(Pipeline).where(Pipeline.tenant_id == b)).one()
        session.add(PipelineVersion(id=new_id(), tenant_id=a, pipeline_id=b_pipeline.id,
                                    version=2, sql="--", sql_sha256="0" * 64,
                                    created_at=utc_now()))
        with pytest.raises(Exception, match="(?i)foreign key"):
            session.commit()


def test_versions_are_immutable(database: Database) -> None:
    a, _ = _two_tenants(database)
    with _scoped(database, a) as session:
        version = session.scalars(select(PipelineVersion)).one()
        version.sql = "-- rewritten"
        with pytest.raises(ImmutableVersionError):
            session.flush()
