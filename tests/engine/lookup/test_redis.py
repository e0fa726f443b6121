"""The redis lookup connector against the real Redis server: keys, value formats, errors."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
import redis
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError
from spate.engine.connectors.redis.lookup import RedisLookup
from tests.engine.lookup.support import assert_fails_without_secret, lookup_table

UTC = dt.UTC
COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType(), False),
           ColumnDef("joined", T.TimestampType()), ColumnDef("balance", T.DecimalType(10, 2)),
           ColumnDef("tags", T.ArrayType(T.StringType())))


def _open(redis_url: str, columns: tuple[ColumnDef, ...] = COLUMNS,
          primary_key: tuple[str, ...] = ("id",), **options: Any) -> RedisLookup:
    options.setdefault("format", "json")
    if options["format"] is None:  # hashes take no format
        del options["format"]
    table = lookup_table("redis", columns, primary_key, address=redis_url, **options)
    source = CONNECTORS["redis"].create_lookup(table)
    assert isinstance(source, RedisLookup)
    return source


class CommandCounter:
    """Counts the round trips a client makes (single commands and pipelines)."""

    def __init__(self, client: redis.Redis) -> None:
        self.commands: list[str] = []
        original_command, original_pipeline = client.execute_command, client.pipeline

        def command(*args: Any, **kwargs: Any) -> Any:
            self.commands.append(str(args[0]))
            return original_command(*args, **kwargs)

        def pipeline(*args: Any, **kwargs: Any) -> Any:
            pipe = original_pipeline(*args, **kwargs)
            original_execute = pipe.execute

            def execute(*a: Any, **k: Any) -> Any:
                self.commands.append("PIPELINE")
                return original_execute(*a, **k)

            pipe.execute = execute  # type: ignore[method-assign]
            return pipe

        client.execute_command = command  # type: ignore[method-assign]
        client.pipeline = pipeline  # type: ignore[method-assign]


def test_json_values_are_fetched_with_one_mget(redis_url: str, redis_prefix: str,
                                               redis_client: redis.Redis) -> None:
    for i in range(50):
        record = {"name": f"user{i}", "joined": "2024-03-01T10:00:00Z", "balance": 12.5,
                  "tags": ["a", str(i)], "unknown_field": True}
        redis_client.set(f"{redis_prefix}{i}", json.dumps(record))
    source = _open(redis_url, key__prefix=redis_prefix)
    counter = CommandCounter(source.client)
    rows = source.fetch([(i,) for i in range(60)]).to_pylist()
    assert counter.commands == ["MGET"]
    assert len(rows) == 50
    assert sorted(rows, key=lambda r: r["id"])[7] == {
        "id": 7, "name": "user7", "joined": dt.datetime(2024, 3, 1, 10, tzinfo=UTC),
        "balance": Decimal("12.50"), "tags": ["a", "7"]}
    source.close()


def test_composite_keys_join_their_values_with_the_separator(
        redis_url: str, redis_prefix: str, redis_client: redis.Redis) -> None:
    columns = (ColumnDef("region", T.StringType()), ColumnDef("id", T.IntegerType()),
               ColumnDef("name", T.StringType()))
    redis_client.set(f"{redis_prefix}eu/3", '{"name": "\\u00e9lodie"}')
    redis_client.set(f"{redis_prefix}eu:3", '{"name": "wrong separator"}')
    source = _open(redis_url, columns, ("region", "id"), key__prefix=redis_prefix,
                   key__separator="/")
    assert source.redis_key(("eu", 3)) == f"{redis_prefix}eu/3"
    assert source.fetch([("eu", 3), ("us", 3)]).to_pylist() == [
        {"region": "eu", "id": 3, "name": "élodie"}]
    source.close()


def test_pretty_printed_json_and_missing_nullable_fields(
        redis_url: str, redis_prefix: str, redis_client: redis.Redis) -> None:
    redis_client.set(f"{redis_prefix}1", '{\n  "name": "ann"\n}')
    source = _open(redis_url, key__prefix=redis_prefix)
    assert source.fetch([(1,)]).to_pylist() == [
        {"id": 1, "name": "ann", "joined": None, "balance": None, "tags": None}]
    source.close()


@pytest.mark.parametrize("value, problem", [
    ('{"name": "ann", "balance": "lots"}', "bad value at Redis key '{prefix}1'"),
    ('{"balance": 1}', "'name' is NOT NULL"),
    ("not json", "bad value at Redis key '{prefix}1'"),
    ("{\n broken", "not valid JSON"),
    ("  ", "the value is empty"),
])
def test_undecodable_values_name_their_key(redis_url: str, redis_prefix: str,
                                           redis_client: redis.Redis, value: str,
                                           problem: str) -> None:
    redis_client.set(f"{redis_prefix}1", value)
    source = _open(redis_url, key__prefix=redis_prefix)
    with pytest.raises(ConnectorError, match="lookup table 'lk'") as caught:
        source.fetch([(1,)])
    assert problem.format(prefix=redis_prefix) in str(caught.value)
    source.close()


def test_raw_string_and_unstructured_values(redis_url: str, redis_prefix: str,
                                            redis_client: redis.Redis) -> None:
    columns = (ColumnDef("id", T.StringType()), ColumnDef("value", T.StringType()))
    redis_client.set(f"{redis_prefix}a", "line one\nline two")
    redis_client.set(f"{redis_prefix}b", '{"x": [1, 2]}')
    raw = _open(redis_url, columns, format="raw_string", key__prefix=redis_prefix)
    assert raw.fetch([("a",)]).to_pylist() == [{"id": "a", "value": "line one\nline two"}]
    unstructured = _open(redis_url, columns, json__unstructured="true",
                         key__prefix=redis_prefix)
    assert unstructured.fetch([("b",)]).to_pylist() == [{"id": "b", "value": '{"x": [1, 2]}'}]
    with pytest.raises(ConnectorError, match="not valid JSON"):
        unstructured.fetch([("a",)])
    raw.close()
    unstructured.close()


def test_hash_values_are_converted_to_column_types(redis_url: str, redis_prefix: str,
                                                   redis_client: redis.Redis) -> None:
    columns = (ColumnDef("id", T.StringType()), ColumnDef("name", T.StringType(), False),
               ColumnDef("age", T.IntegerType()), ColumnDef("vip", T.BooleanType()),
               ColumnDef("seen", T.TimestampType()), ColumnDef("blob", T.BinaryType()))
    redis_client.hset(f"{redis_prefix}u1", mapping={
        "name": "ann", "age": "41", "vip": "true", "seen": "2024-01-02 03:04:05",
        "blob": b"\x00\xff", "other": "ignored"})
    redis_client.hset(f"{redis_prefix}u2", mapping={"name": "bo"})
    redis_client.hset(f"{redis_prefix}u3", mapping={"age": "7"})
    redis_client.hset(f"{redis_prefix}u4", mapping={"name": "x", "age": "old"})
    source = _open(redis_url, columns, value__type="hash", format=None,
                   key__prefix=redis_prefix)
    counter = CommandCounter(source.client)
    rows = source.fetch([("u1",), ("u2",), ("nobody",)]).to_pylist()
    assert counter.commands == ["PIPELINE"]
    assert rows == [
        {"id": "u1", "name": "ann", "age": 41, "vip": True,
         "seen": dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC), "blob": b"\x00\xff"},
        {"id": "u2", "name": "bo", "age": None, "vip": None, "seen": None, "blob": None}]
    with pytest.raises(ConnectorError, match="has no field 'name', which is NOT NULL"):
        source.fetch([("u3",)])
    with pytest.raises(ConnectorError, match="hash field 'age' does not convert to int"):
        source.fetch([("u4",)])
    source.close()


def test_an_unreachable_server_is_a_clear_error_without_the_password() -> None:
    table = lookup_table("redis", COLUMNS, ("id",), format="json",
                         address="redis://:hunter2@127.0.0.1:1/0")
    assert_fails_without_secret(CONNECTORS["redis"].create_lookup(table),
                                "lookup table 'lk': Redis failed", "hunter2")


def test_credentials_given_as_options_are_used(redis_url: str) -> None:
    table = lookup_table("redis", COLUMNS, ("id",), format="json", address=redis_url,
                         username="nobody", password="p4ss-zq")
    # The test server has no such user: the credentials reached it.
    assert_fails_without_secret(CONNECTORS["redis"].create_lookup(table),
                                "lookup table 'lk': Redis failed", "p4ss-zq")
