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

import pytest
from fastapi import FastAPI

from spate.api import migrate
from spate.api.http.app import create_app
from spate.api.settings import Settings
from tests.api.support import BACKENDS, PLATFORM_KEY, UNLIMITED, TenantKeys, TestClient, new_tenant
from tests.conftest import ThrowawayPostgres


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
def make_app(migrated_urls: dict[str, str], redis_url: str, redis_prefix: str,
             tmp_path_factory: pytest.TempPathFactory) -> Callable[..., FastAPI]:
    """Build an app on a backend's shared database: ``make_app("sqlite", **settings)``.

    Its data folder (tenants' storage roots, the secret key) is one per test run."""
    data_dir = tmp_path_factory.mktemp("data")

    def make(backend: str, **overrides: Any) -> FastAPI:
        values: dict[str, Any] = {
            "database_url": migrated_urls[backend], "redis_url": redis_url,
            "data_dir": data_dir,
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
