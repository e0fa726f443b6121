"""Fixtures shared by every test package."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
import redis
from sqlalchemy import make_url

from tests.api.serving import ServeProcess
from tests.suite import processes_allowed

#: How the suite runs (markers, workers, CI skips, timing): tests/suite.py.
pytest_plugins = ("tests.suite",)


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local SparkSession for the whole test session (it takes seconds to start)."""
    from spate.engine.spark import build_spark

    with processes_allowed():  # the session's JVM is the suite's, not a test's
        session = build_spark(os.environ.get("SPATE_TEST_SPARK_MASTER", "local[2]"),
                              "spate-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The real PostgreSQL server the integration tests use."""
    return os.environ.get("SPATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The real Redis server the integration tests use."""
    return os.environ.get("SPATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def redis_key_prefix(url: str) -> Iterator[str]:
    """A fresh key prefix; every key under it is deleted when the generator closes.

    For fixtures of any scope: ``yield from redis_key_prefix(redis_url)``.
    """
    prefix = f"spate-test-{secrets.token_hex(6)}:"
    yield prefix
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()


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


#: The platform admin key of the session's shared server (:func:`shared_serve`).
SHARED_PLATFORM_KEY = "pk-" + secrets.token_urlsafe(32)


@pytest.fixture(scope="session")
def shared_serve(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One ``spate serve`` (embedded defaults, sandboxed jobs) for the test modules of the
    ``serve`` xdist group: the CLI, console, billing console and Terraform tests. Each
    module takes a tenant of its own with :func:`new_tenant`. Three seconds without
    input make a pipeline idle (the console's slow-ticks test); reconciles every second.
    """
    serve = ServeProcess(tmp_path_factory.mktemp("shared-serve"), {
        "SPATE_PLATFORM_ADMIN_KEY": SHARED_PLATFORM_KEY, "SPATE_IDLE_STOP_S": "3",
        "SPATE_RECONCILE_INTERVAL_S": "1"})
    try:
        yield serve
    finally:
        assert serve.stop() == 0, serve.log()
        assert serve.leftovers == [], "stopping spate serve left its tenants' processes"
