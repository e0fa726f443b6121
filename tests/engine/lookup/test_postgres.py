"""The postgres lookup connector against the real PostgreSQL server."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError
from spate.engine.connectors.postgres.lookup import PostgresLookup
from tests.engine.lookup.support import PgTable, assert_fails_without_secret, lookup_table

UTC = dt.UTC
CUSTOMERS_SQL = ("id bigint PRIMARY KEY, name text NOT NULL, since timestamptz, "
                 "balance numeric, profile jsonb, tags int[], active boolean")
CUSTOMERS = [
    (1, "alice", dt.datetime(2024, 1, 1, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=1))),
     Decimal("10.5"), '{"tier": "gold"}', [1, 2], True),
    (2, "bob", None, None, None, None, False),
    (3, "carol", None, Decimal("0"), None, [], True),
]
COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType()),
           ColumnDef("since", T.TimestampType()), ColumnDef("balance", T.DecimalType(10, 2)),
           ColumnDef("profile", T.StringType()), ColumnDef("tags", T.ArrayType(T.LongType())))


def _open(postgres_url: str, columns: tuple[ColumnDef, ...] = COLUMNS,
          primary_key: tuple[str, ...] = ("id",), **options: Any) -> PostgresLookup:
    table = lookup_table("postgres", columns, primary_key, url=postgres_url, **options)
    source = CONNECTORS["postgres"].create_lookup(table)
    assert isinstance(source, PostgresLookup)
    return source


def test_a_table_is_read_by_key_with_types_cast_as_declared(postgres_url: str,
                                                            pg_table: PgTable) -> None:
    name = pg_table(CUSTOMERS_SQL, CUSTOMERS)
    source = _open(postgres_url, table=f"public.{name}")
    rows = sorted(source.fetch([(1,), (2,), (3,), (99,)]).to_pylist(), key=lambda r: r["id"])
    assert rows == [
        {"id": 1, "name": "alice", "since": dt.datetime(2024, 1, 1, 0, 0, tzinfo=UTC),
         "balance": Decimal("10.50"), "profile": '{"tier": "gold"}', "tags": [1, 2]},
        {"id": 2, "name": "bob", "since": None, "balance": None, "profile": None, "tags": None},
        {"id": 3, "name": "carol", "since": None, "balance": Decimal("0.00"), "profile": None,
         "tags": []},
    ]
    assert source.fetch([]).num_rows == 0
    source.close()


def test_a_query_is_keyed_by_its_primary_key(postgres_url: str, pg_table: PgTable) -> None:
    name = pg_table(CUSTOMERS_SQL, CUSTOMERS)
    columns = (ColumnDef("id", T.LongType()), ColumnDef("label", T.StringType()))
    query = f"SELECT id, upper(name) AS label FROM {name} WHERE active AND name LIKE '%o%';"
    source = _open(postgres_url, columns, query=query)
    assert source.fetch([(1,), (2,), (3,)]).to_pylist() == [{"id": 3, "label": "CAROL"}]
    source.close()


def test_composite_keys_match_whole_tuples(postgres_url: str, pg_table: PgTable) -> None:
    name = pg_table("region text, id int, name text, PRIMARY KEY (region, id)",
                    [("eu", 1, "a"), ("eu", 2, "b"), ("us", 1, "c")])
    columns = (ColumnDef("region", T.StringType()), ColumnDef("id", T.IntegerType()),
               ColumnDef("name", T.StringType()))
    source = _open(postgres_url, columns, ("region", "id"), table=name)
    rows = source.fetch([("eu", 1), ("us", 1), ("us", 2)]).to_pylist()
    assert sorted(r["name"] for r in rows) == ["a", "c"]
    source.close()


def test_many_keys_are_one_statement(postgres_url: str, pg_table: PgTable) -> None:
    name = pg_table("id bigint PRIMARY KEY, name text",
                    [(i, f"n{i}") for i in range(500)])
    columns = (ColumnDef("id", T.LongType()), ColumnDef("name", T.StringType()))
    source = _open(postgres_url, columns, table=name)
    source.fetch([(0,)])  # connect and set the session up first
    calls: list[Any] = []
    connection = source._connect()
    original = connection.execute

    def execute(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        return original(*args, **kwargs)

    connection.execute = execute  # type: ignore[method-assign]
    result = source.fetch([(i,) for i in range(0, 1000, 2)])
    assert result.num_rows == 250 and len(calls) == 1
    source.close()


def test_missing_objects_and_refused_connections_are_clear_errors(
        postgres_url: str, pg_table: PgTable) -> None:
    name = pg_table("id bigint PRIMARY KEY, other text", [])
    missing_column = _open(postgres_url, table=name)
    with pytest.raises(ConnectorError, match='PostgreSQL failed: column "name" does not '
                                             "exist"):
        missing_column.fetch([(1,)])
    missing_column.close()
    refused = lookup_table("postgres", COLUMNS, ("id",), table=name,
                           url="postgresql://postgres:hunter2@127.0.0.1:1/test")
    assert_fails_without_secret(CONNECTORS["postgres"].create_lookup(refused),
                                "lookup table 'lk': PostgreSQL failed", "hunter2")


def test_a_dropped_connection_is_reopened(postgres_url: str, pg_table: PgTable) -> None:
    name = pg_table(CUSTOMERS_SQL, CUSTOMERS)
    source = _open(postgres_url, table=name)
    assert source.fetch([(1,)]).num_rows == 1
    pid = source._connect().info.backend_pid
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", [pid])
    assert source.fetch([(2,)]).to_pylist()[0]["name"] == "bob"
    assert source._connect().info.backend_pid != pid
    source.close()


def test_each_fetch_sees_the_newest_committed_rows(postgres_url: str,
                                                   pg_table: PgTable) -> None:
    name = pg_table(CUSTOMERS_SQL, CUSTOMERS)
    source = _open(postgres_url, table=name)
    assert source.fetch([(2,)]).column("name").to_pylist() == ["bob"]
    with psycopg.connect(postgres_url, autocommit=True) as writer:
        writer.execute(f"UPDATE {name} SET name = 'robert' WHERE id = 2")
    assert source.fetch([(2,)]).column("name").to_pylist() == ["robert"]
    source.close()


def test_a_key_matching_several_rows_is_an_error(postgres_url: str, pg_table: PgTable) -> None:
    name = pg_table("id bigint, name text", [(1, "a"), (1, "b"), (2, "c")])
    columns = (ColumnDef("id", T.LongType()), ColumnDef("name", T.StringType()))
    source = _open(postgres_url, columns, table=name)
    assert source.fetch([(2,)]).num_rows == 1
    with pytest.raises(ConnectorError, match=r"key \(1\) matches several rows"):
        source.fetch([(1,), (2,)])
    source.close()
