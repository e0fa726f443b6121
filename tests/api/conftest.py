"""Fixtures for the control-plane API tests: real PostgreSQL, SQLite and Redis.

PostgreSQL tests run in a throwaway database created for this test run (and
dropped after), so they never meet other suites' tables. Redis keys get a
prefix unique to the run and are deleted at the end. Tenants are created per
test with random names, so tests sharing a database do not see each other.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from fastapi import FastAPI
from sqlalchemy import make_url

from api import migrate
from api.app import create_app
from api.settings import Settings
from tests.api.support import BACKENDS, PLATFORM_KEY, UNLIMITED, TenantKeys, TestClient, new_tenant
from tests.conftest import redis_key_prefix


@pytest.fixture(scope="session")
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix for this run; its keys are deleted afterwards."""
    yield from redis_key_prefix(redis_url)


class ThrowawayPostgres:
    """Creates PostgreSQL databases for one test run and drops them all afterwards."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.names: list[str] = []

    def _admin(self) -> psycopg.Connection[Any]:
        url = make_url(self.server_url).set(drivername="postgresql")
        return psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)

    def create(self) -> str:
        name = f"spate_api_test_{secrets.token_hex(6)}"
        with self._admin() as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        self.names.append(name)
        url = make_url(self.server_url).set(database=name)
        return url.render_as_string(hide_password=False)

    def drop_all(self) -> None:
        with self._admin() as connection:
            for name in self.names:
                connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.names.clear()


@pytest.fixture(scope="session")
def throwaway_postgres(postgres_url: str) -> Iterator[ThrowawayPostgres]:
    databases = ThrowawayPostgres(postgres_url)
    yield databases
    databases.drop_all()


@pytest.fixture
def fresh_database_url(request: pytest.FixtureRequest, tmp_path: Path,
                       throwaway_postgres: ThrowawayPostgres) -> Callable[[str], str]:
    """A factory of empty databases: ``fresh_database_url("sqlite" | "postgresql")``."""

    def make(backend: str) -> str:
        if backend == "sqlite":
            return f"sqlite:///{tmp_path / f'{secrets.token_hex(4)}.db'}"
        return throwaway_postgres.create()

    return make


@pytest.fixture(scope="session")
def migrated_urls(tmp_path_factory: pytest.TempPathFactory,
                  throwaway_postgres: ThrowawayPostgres) -> dict[str, str]:
    """One migrated database per backend, shared by the API tests of this run."""
    urls = {
        "sqlite": f"sqlite:///{tmp_path_factory.mktemp('api') / 'spate.db'}",
        "postgresql": throwaway_postgres.create(),
    }
    for url in urls.values():
        migrate.upgrade(url)
    return urls


@pytest.fixture(scope="session")
def make_app(migrated_urls: dict[str, str], redis_url: str,
             redis_prefix: str) -> Callable[..., FastAPI]:
    """Build an app on a backend's shared database: ``make_app("sqlite", **settings)``."""

    def make(backend: str, **overrides: Any) -> FastAPI:
        values: dict[str, Any] = {
            "database_url": migrated_urls[backend], "redis_url": redis_url,
            "redis_key_prefix": redis_prefix, "platform_admin_key": PLATFORM_KEY, **UNLIMITED,
        }
        values.update(overrides)
        return create_app(Settings(**values))

    return make


@pytest.fixture(scope="session", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def client(backend: str, make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    """A client of an app over ``backend``, with Redis rate limits (set high)."""
    with TestClient(make_app(backend), raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def tenant_factory(client: TestClient) -> Callable[[], TenantKeys]:
    return lambda: new_tenant(client)
