"""The redis stream source against the real Redis: offsets, decoding, bad data, and
pipelines that stop and resume exactly once (docs/sql/connectors.md#redis)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import redis
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError, TableConfig
from spate.engine.connectors.core.streaming import CONFIG_OPTION
from spate.engine.connectors.redis.connector import RedisConnector
from spate.engine.connectors.redis.source import RedisStreamReader, stream_reader_options
from tests.conftest import redis_key_prefix
from tests.engine.connectors.support import make_table
from tests.engine.harness import run_pipeline

COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType()))


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    yield from redis_key_prefix(redis_url)


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url)
    yield connection
    connection.close()


def source(redis_url: str, stream: str, options: dict[str, str] | None = None) -> TableConfig:
    return TableConfig("t", "redis", "source", {
        "type": "source", "address": redis_url, "stream": stream, "format": "json",
        **(options or {})}, COLUMNS)


def reader(table: TableConfig) -> RedisStreamReader:
    connector = CONNECTORS["redis"]
    assert isinstance(connector, RedisConnector)
    settings = connector.source_settings(table)
    payload = json.loads(stream_reader_options(table, settings)[CONFIG_OPTION])
    schema = T.StructType.fromJson(payload.pop("stream_schema"))
    return RedisStreamReader(payload, settings.connection, schema)


def read_range(stream_reader: RedisStreamReader, start: dict[str, Any],
               end: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for partition in stream_reader.partitions(start, end):
        for batch in stream_reader.read(partition):
            rows.extend(pa.Table.from_batches([batch]).to_pylist())
    return rows


def add(client: redis.Redis, stream: str, *values: str, entry_id: str = "*") -> list[str]:
    return [_text(client.xadd(stream, {"value": v}, id=entry_id)) for v in values]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def test_offsets_are_entry_ids_and_a_range_reads_the_same_entries(
        redis_url: str, prefix: str, client: redis.Redis) -> None:
    stream = f"{prefix}s"
    for i in range(1, 6):
        client.xadd(stream, {"value": json.dumps({"id": i, "name": f"n{i}"}), "other": "x"},
                    id=f"{1_700_000_000_000 + i}-0")
    r = reader(source(redis_url, stream, {"source.offset": "earliest"}))
    start = r.initialOffset()
    assert start == {"id": "0-0"}
    first = r.latestOffset(start, ReadMaxRows(2))
    assert first == {"id": "1700000000002-0"}
    rows = read_range(r, start, first)
    assert [(row["id"], row["name"]) for row in rows] == [(1, "n1"), (2, "n2")]
    assert rows[0]["_spate_timestamp"].timestamp() == 1_700_000_000.001
    assert read_range(r, start, first) == rows  # a replay reads the same entries
    rest = r.latestOffset(first, ReadAllAvailable())
    assert rest == {"id": "1700000000005-0"}
    assert [row["id"] for row in read_range(r, first, rest)] == [3, 4, 5]
    assert r.latestOffset(rest, ReadMaxRows(10)) == rest
    assert r.partitions(rest, rest) == []


def test_latest_starts_after_what_the_stream_holds(redis_url: str, prefix: str,
                                                   client: redis.Redis) -> None:
    stream = f"{prefix}s"
    add(client, stream, '{"id": 1}')
    r = reader(source(redis_url, stream))
    start = r.initialOffset()
    add(client, stream, '{"id": 2, "name": null}')
    end = r.latestOffset(start, ReadAllAvailable())
    assert [row["id"] for row in read_range(r, start, end)] == [2]
    missing = reader(source(redis_url, f"{prefix}none"))
    assert missing.initialOffset() == {"id": "0-0"}


def test_the_idle_watcher_sees_entries_past_the_committed_id(
        redis_url: str, prefix: str, client: redis.Redis) -> None:
    stream = f"{prefix}s"
    table = source(redis_url, stream)
    connector = CONNECTORS["redis"]
    assert connector.has_input_after(table, 1, {"id": "0-0"}) is False, "no stream yet"
    last = add(client, stream, '{"id": 1}')[0]
    assert connector.has_input_after(table, 1, {"id": "0-0"}) is True
    assert connector.has_input_after(table, 1, {"id": last}) is False
    add(client, stream, '{"id": 2}')
    assert connector.has_input_after(table, 1, {"id": last}) is True


def test_bad_entries_fail_naming_the_entry(redis_url: str, prefix: str,
                                           client: redis.Redis) -> None:
    stream = f"{prefix}s"
    ids = add(client, stream, '{"id": 1}', '{"id": "one"}')
    r = reader(source(redis_url, stream, {"source.offset": "earliest"}))
    with pytest.raises(ConnectorError, match=f"at entry {ids[1]}: ") as caught:
        read_range(r, r.initialOffset(), {"id": ids[1]})
    assert caught.value.option == "bad_data"


def test_bad_entries_are_dropped_and_counted(redis_url: str, prefix: str,
                                             client: redis.Redis) -> None:
    stream = f"{prefix}s"
    add(client, stream, '{"id": 1, "name": "a"}', "not json", '{"name": "no id"}', "  ")
    client.xadd(stream, {"payload": '{"id": 9}'})  # no `value` field
    last = add(client, stream, '{\n  "id": 2,\n  "name": "b"\n}')[0]
    r = reader(source(redis_url, stream, {"bad_data": "drop", "source.offset": "earliest"}))
    rows = read_range(r, r.initialOffset(), {"id": last})
    assert [(row["id"], row["name"]) for row in rows if row["_spate_control"] is None] == [
        (1, "a"), (2, "b")]
    assert [row["_spate_control"] for row in rows if row["_spate_control"]] == ["dropped:4"]


def test_raw_string_entries_keep_their_text(redis_url: str, prefix: str,
                                            client: redis.Redis) -> None:
    stream = f"{prefix}s"
    last = add(client, stream, "plain", "two\nlines")[-1]
    table = make_table("redis", "source", (), type="source", address=redis_url, stream=stream,
                       format="raw_string", value_field="value",
                       **{"source.offset": "earliest"})
    r = reader(table)
    assert [row["value"] for row in read_range(r, r.initialOffset(), {"id": last})] == [
        "plain", "two\nlines"]


@pytest.mark.parametrize(("options", "message", "option"), [
    ({"stream": None}, "needs option 'stream'", "stream"),
    ({"source.offset": "middle"}, "must be one of 'earliest', 'latest'", "source.offset"),
    ({"value_field": " "}, "must name the entry field", "value_field"),
    ({"max_entries_per_batch": "0"}, "must be at least 1", "max_entries_per_batch"),
    ({"connection_type": "cluster"}, "is not supported yet", "connection_type"),
    ({"format": "debezium_json"}, "not supported yet by redis sources", "format"),
    ({"address": "http://h"}, "must be a redis://", "address"),
    ({"type": None}, "give it type = 'source'", None),
    ({"target": "list"}, "unknown option 'target'", "target"),
])
def test_options_are_checked(options: dict[str, str | None], message: str,
                             option: str | None) -> None:
    values = {"type": "source", "address": "redis://127.0.0.1:6379/0", "stream": "s",
              "format": "json", **options}
    table = TableConfig("t", "redis", "source",
                        {k: v for k, v in values.items() if v is not None}, COLUMNS)
    with pytest.raises(ConnectorError, match=message) as caught:
        CONNECTORS["redis"].validate(table)
    assert caught.value.option == option


def _pipeline(redis_url: str, stream: str, out: str) -> str:
    return (f"CREATE TABLE events (id BIGINT NOT NULL, name TEXT) WITH (connector = 'redis', "
            f"type = 'source', address = '{redis_url}', stream = '{stream}', format = 'json', "
            "'source.offset' = 'earliest', max_entries_per_batch = 3);\n"
            f"CREATE TABLE out WITH (connector = 'redis', type = 'sink', address = '{redis_url}',"
            f" format = 'json', target = 'list', 'target.key_prefix' = '{out}');\n"
            "INSERT INTO out SELECT id, upper(name) AS name FROM events;\n")


def test_a_pipeline_stops_and_resumes_exactly_once(spark: SparkSession, tmp_path: Path,
                                                   redis_url: str, prefix: str,
                                                   client: redis.Redis) -> None:
    stream, out = f"{prefix}in", f"{prefix}out"
    for i in range(1, 6):
        client.xadd(stream, {"value": json.dumps({"id": i, "name": f"n{i}"})},
                    id=f"{1_000 * i}-0")
    sql = _pipeline(redis_url, stream, out)

    def written(count: int) -> bool:
        return client.llen(out) >= count

    run_pipeline(spark, sql, tmp_path, stop_when=lambda: written(5), timeout_s=90)
    # Without its Spark checkpoint the job resumes at the offsets its state store kept.
    shutil.rmtree(tmp_path / "checkpoint")
    for i in range(6, 9):
        client.xadd(stream, {"value": json.dumps({"id": i, "name": f"n{i}"})},
                    id=f"{1_000 * i}-0")
    run_pipeline(spark, sql, tmp_path, stop_when=lambda: written(8), timeout_s=90)
    rows = [json.loads(v) for v in client.lrange(out, 0, -1)]
    assert [r["id"] for r in rows] == list(range(1, 9))
    assert rows[0] == {"id": 1, "name": "N1"}
    assert client.get(f"{out}__spate_epoch:default/test") is not None  # the pipeline's own
