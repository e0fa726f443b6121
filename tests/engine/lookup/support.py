"""Helpers of the lookup tests: lookup-table configs, Redis prefixes, PostgreSQL tables."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
import redis

from spate.engine.connectors import ColumnDef, ConnectorError, TableConfig
from spate.engine.connectors.core.lookup import LookupSource
from tests.conftest import redis_key_prefix


def assert_fails_without_secret(source: LookupSource, message: str, secret: str) -> None:
    """A fetch from ``source`` fails with ``message`` and never shows ``secret``."""
    with pytest.raises(ConnectorError, match=message) as caught:
        source.fetch([(1,)])
    assert secret not in str(caught.value)
    source.close()


def lookup_table(connector: str, columns: tuple[ColumnDef, ...], primary_key: tuple[str, ...],
                 name: str = "lk", role: str = "lookup", **options: Any) -> TableConfig:
    """A lookup TableConfig as the catalog builds it; ``__`` in a keyword spells a dot."""
    values = {key.replace("__", "."): str(value) for key, value in options.items()}
    return TableConfig(name=name, connector=connector, role=role, options=values,
                       columns=columns, primary_key=primary_key)


@pytest.fixture
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A fresh key prefix whose keys are deleted after the test."""
    yield from redis_key_prefix(redis_url)


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


PgTable = Callable[[str, list[tuple[Any, ...]]], str]


@pytest.fixture
def pg_table(postgres_url: str) -> Iterator[PgTable]:
    """A factory: ``pg_table(columns_sql, rows)`` creates a uniquely named table, filled
    with ``rows``, and returns its name; every table is dropped after the test."""
    created: list[str] = []

    def create(columns_sql: str, rows: list[tuple[Any, ...]]) -> str:
        name = f"spate_lookup_{secrets.token_hex(5)}"
        with psycopg.connect(postgres_url, autocommit=True) as connection:
            connection.execute(f"CREATE TABLE {name} ({columns_sql})")
            created.append(name)
            if rows:
                marks = ", ".join(["%s"] * len(rows[0]))
                with connection.cursor() as cursor:
                    cursor.executemany(f"INSERT INTO {name} VALUES ({marks})", rows)
        return name

    yield create
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        for name in created:
            connection.execute(f"DROP TABLE IF EXISTS {name}")
