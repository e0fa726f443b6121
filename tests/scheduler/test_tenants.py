"""Each tenant's share of a deployment: folders, state-store credentials, boundary."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from spate.scheduler.config import SchedulerConfig
from spate.scheduler.tenants import Tenants, role_name
from spate.statestore import open_store


def test_each_tenant_has_its_own_folders_and_state_file(tmp_path: Path) -> None:
    config = SchedulerConfig(data_dir=tmp_path / "data",
                             state_url=f"sqlite:///{tmp_path / 'data' / 'state.db'}").resolved()
    tenants = Tenants(config)
    a, b = tenants.space("tenant-a"), tenants.space("tenant-b")
    assert a.storage_root != b.storage_root and a.state_dir != b.state_dir
    assert tenants.state_url("tenant-a") != tenants.state_url("tenant-b")
    assert tenants.state_url("tenant-a").endswith("/state/tenant-a/state.db")
    assert tenants.boundary("tenant-a").storage_root == str(a.storage_root)
    assert tenants.boundary("tenant-a").egress is not None


@pytest.fixture
def postgres_tenants(postgres_url: str, tmp_path: Path) -> Iterator[Tenants]:
    config = SchedulerConfig(data_dir=tmp_path, state_url=postgres_url,
                             state_role_secret=secrets.token_bytes(32))
    yield Tenants(config)


def _drop(admin_url: str, tenant_ids: list[str]) -> None:
    with psycopg.connect(admin_url, autocommit=True) as connection:
        for tenant_id in tenant_ids:
            role = role_name(tenant_id)
            connection.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                sql.Identifier(role)))
            connection.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def test_on_postgresql_a_tenant_reaches_only_its_own_schema(
        postgres_tenants: Tenants, postgres_url: str) -> None:
    a, b = f"a-{secrets.token_hex(4)}", f"b-{secrets.token_hex(4)}"
    control_table = f"public.spate_control_{secrets.token_hex(4)}"  # the server's own rows
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE {control_table} (secret text)")
    try:
        url_a, url_b = postgres_tenants.state_url(a), postgres_tenants.state_url(b)
        assert role_name(a) in url_a and role_name(a) not in url_b
        with open_store(url_a) as store:  # the job's own state works under its role
            state = store.pipeline(a, "p1")
            state.begin_epoch(0, [range(0, 128)])
            writer = state.writer(0, range(0, 128))
            writer.put("op", 0, ("k",), b"v")
            writer.commit()
            state.commit_epoch(0, {"epoch": 0})
            assert store.pipeline(a, "p1").last_committed_epoch() == 0
        with psycopg.connect(url_b) as connection:
            for table in (f"{role_name(a)}.spate_state", control_table):
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    connection.execute(f"SELECT count(*) FROM {table}")
                connection.rollback()
        with psycopg.connect(url_a) as connection:  # nor may it make objects elsewhere
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                connection.execute("CREATE TABLE public.spate_intrusion (x int)")
    finally:
        _drop(postgres_url, [a, b])
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f"DROP TABLE IF EXISTS {control_table}")
