"""Option validation of the redis and postgres lookup connectors (no server needed)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError
from spate.engine.connectors.core.lookup import DEFAULT_CACHE_MAX_BYTES, CacheSettings
from tests.engine.lookup.support import lookup_table

COLUMNS = (ColumnDef("id", T.StringType(), False), ColumnDef("name", T.StringType()),
           ColumnDef("score", T.DoubleType()))
REDIS = {"address": "redis://127.0.0.1:6379/0", "format": "json"}
POSTGRES = {"url": "postgresql://postgres@127.0.0.1:5432/test", "table": "customers"}


def _error(connector: str, columns: tuple[ColumnDef, ...] = COLUMNS,
           primary_key: tuple[str, ...] = ("id",), role: str = "lookup",
           **options: Any) -> ConnectorError:
    table = lookup_table(connector, columns, primary_key, role=role, **options)
    with pytest.raises(ConnectorError) as caught:
        CONNECTORS[connector].validate(table)
    return caught.value


@pytest.mark.parametrize("connector, options", [("redis", REDIS), ("postgres", POSTGRES)])
def test_valid_tables_keep_their_columns(connector: str, options: dict[str, str]) -> None:
    table = lookup_table(connector, COLUMNS, ("id",), type="lookup", **options)
    assert CONNECTORS[connector].validate(table) == COLUMNS
    assert "lookup" in CONNECTORS[connector].roles


@pytest.mark.parametrize("connector, options", [("redis", REDIS), ("postgres", POSTGRES)])
@pytest.mark.parametrize("columns, primary_key, role, extra, message, option", [
    (COLUMNS, ("id",), "source", {}, "declare 'lk' with CREATE TEMPORARY TABLE", None),
    (COLUMNS, ("id",), "lookup", {"type": "source"}, "can only be a lookup table, not a source",
     "type"),
    (COLUMNS, (), "lookup", {}, "needs a PRIMARY KEY", None),
    ((), ("id",), "lookup", {}, "needs its columns declared", None),
    (COLUMNS[:1], ("id",), "lookup", {}, "only PRIMARY KEY columns", None),
    (COLUMNS, ("id",), "lookup", {"lookup.cache.ttl": "5"}, "must be a duration",
     "lookup.cache.ttl"),
    (COLUMNS, ("id",), "lookup", {"lookup.cache.ttl": "1 month"}, "must be a duration",
     "lookup.cache.ttl"),
    (COLUMNS, ("id",), "lookup", {"lookup.cache.ttl": "-5 seconds"}, "must be positive",
     "lookup.cache.ttl"),
    (COLUMNS, ("id",), "lookup", {"lookup.cache.ttl": "1 s", "lookup.cache.max_bytes": "0"},
     "needs a cache", "lookup.cache.ttl"),
    (COLUMNS, ("id",), "lookup", {"lookup.cache.max_bytes": "lots"}, "must be an integer",
     "lookup.cache.max_bytes"),
    (COLUMNS, ("id",), "lookup", {"lookup.cache.max_bytes": "-1"}, "at least 0",
     "lookup.cache.max_bytes"),
    (COLUMNS, ("id",), "lookup", {"colour": "red"}, "unknown option 'colour'", "colour"),
])
def test_rules_every_lookup_table_follows(connector: str, options: dict[str, str],
                                          columns: tuple[ColumnDef, ...],
                                          primary_key: tuple[str, ...], role: str,
                                          extra: dict[str, str], message: str,
                                          option: str | None) -> None:
    error = _error(connector, columns, primary_key, role, **options, **extra)
    assert message in str(error)
    assert error.option == option


@pytest.mark.parametrize("value, expected", [
    ("INTERVAL '5' SECOND", 5.0),
    ("INTERVAL '2 minutes'", 120.0),
    ("5 seconds", 5.0),
    ("1h 30m", 5400.0),
    ("250ms", 0.25),
])
def test_cache_ttl_reads_durations(value: str, expected: float) -> None:
    table = lookup_table("redis", COLUMNS, ("id",), lookup__cache__ttl=value, **REDIS)
    assert CONNECTORS["redis"].cache_settings(table) == CacheSettings(DEFAULT_CACHE_MAX_BYTES,
                                                                      expected)


def test_cache_is_off_unless_asked_for() -> None:
    plain = lookup_table("postgres", COLUMNS, ("id",), **POSTGRES)
    assert not CONNECTORS["postgres"].cache_settings(plain).enabled
    sized = lookup_table("postgres", COLUMNS, ("id",), lookup__cache__max_bytes=1000, **POSTGRES)
    assert CONNECTORS["postgres"].cache_settings(sized) == CacheSettings(1000, None)


@pytest.mark.parametrize("options, message, option", [
    ({"format": "json"}, "needs option 'address'", "address"),
    ({"address": "http://user:hunter2@host", "format": "json"}, "must be a redis://",
     "address"),
    ({"address": "redis://h"}, "needs option 'format'", "format"),
    ({"address": "redis://h", "format": "avro"}, "not supported by lookup tables", "format"),
    ({"address": "redis://h", "format": "yaml"}, "unknown format 'yaml'", "format"),
    ({"address": "redis://h", "format": "json", "value.type": "list"},
     "must be one of 'string', 'hash'", "value.type"),
    ({"address": "redis://h", "value.type": "hash", "format": "json"},
     "applies to value.type 'string' only", "format"),
    ({"address": "redis://h", "format": "raw_string"}, "exactly one column `value TEXT`",
     "format"),
])
def test_redis_options(options: dict[str, str], message: str, option: str) -> None:
    error = _error("redis", **options)
    assert message in str(error)
    assert error.option == option
    assert "hunter2" not in str(error)


def test_redis_key_and_hash_column_types() -> None:
    float_key = (ColumnDef("id", T.DoubleType()), ColumnDef("name", T.StringType()))
    assert "a redis key is built from TEXT or integer" in str(_error("redis", float_key, **REDIS))
    nested = COLUMNS + (ColumnDef("tags", T.ArrayType(T.LongType())),)
    error = _error("redis", nested, address="redis://h", value__type="hash")
    assert "hash fields hold scalars only" in str(error) and error.option == "value.type"
    table = lookup_table("redis", nested, ("id",), **REDIS)  # JSON values hold arrays
    assert CONNECTORS["redis"].validate(table) == nested


@pytest.mark.parametrize("options, message, option", [
    ({"table": "t"}, "needs option 'url'", "url"),
    ({"url": "postgresql://u:hunter2@h:5432/db?bogus=1", "table": "t"},
     "must be a PostgreSQL URL", "url"),
    ({"url": "postgresql://h/db"}, "exactly one of the options 'table'", None),
    ({"url": "postgresql://h/db", "table": "t", "query": "SELECT 1"},
     "exactly one of the options 'table'", "query"),
    ({"url": "postgresql://h/db", "table": "a.b.c"}, "table name or schema.table", "table"),
    ({"url": "postgresql://h/db", "query": " ; "}, "must not be empty", "query"),
])
def test_postgres_options(options: dict[str, str], message: str, option: str | None) -> None:
    error = _error("postgres", **options)
    assert message in str(error)
    assert error.option == option
    assert "hunter2" not in str(error)


def test_postgres_column_types() -> None:
    struct = COLUMNS + (ColumnDef("s", T.StructType([T.StructField("a", T.LongType())])),)
    assert "cannot return" in str(_error("postgres", struct, **POSTGRES))
    nested = COLUMNS + (ColumnDef("m", T.ArrayType(T.ArrayType(T.LongType()))),)
    assert "nested arrays" in str(_error("postgres", nested, **POSTGRES))


def test_redis_credentials_come_from_the_address_or_the_options_not_both() -> None:
    table = lookup_table("redis", COLUMNS, ("id",), address="redis://h", format="json",
                         username="app", password="hunter2")
    assert CONNECTORS["redis"].validate(table) == COLUMNS
    error = _error("redis", address="redis://:s3cret@h", format="json", password="hunter2")
    assert "given twice" in str(error) and error.option == "password"
    assert "s3cret" not in str(error) and "hunter2" not in str(error)
    bad_port = _error("redis", address="redis://:s3cret@h:99999", format="json")
    assert bad_port.option == "address" and "s3cret" not in str(bad_port)
