"""The redis sinks against the real Redis: what each target writes, what a replayed
epoch leaves, option checks, and reach() (docs/sql/connectors.md#redis)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
import redis
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError, Sink, TableConfig
from spate.engine.connectors.core.boundary import Boundary
from spate.engine.connectors.core.egress import EgressPolicy
from spate.engine.runtime.failures import root_message
from tests.conftest import redis_key_prefix

SCHEMA = T.StructType([T.StructField("k", T.StringType()), T.StructField("f", T.StringType()),
                       T.StructField("n", T.LongType())])
COLUMNS = tuple(ColumnDef(f.name, f.dataType) for f in SCHEMA.fields)


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    yield from redis_key_prefix(redis_url)


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(redis_url, decode_responses=True)
    yield connection
    connection.close()


def frame(spark: SparkSession, *rows: tuple[Any, ...]) -> DataFrame:
    return spark.createDataFrame(list(rows), SCHEMA)


def sink_table(redis_url: str, target: str, prefix: str, **options: str) -> TableConfig:
    values = {"type": "sink", "address": redis_url, "format": "json", "target": target,
              "target.key_prefix": prefix, **{k.replace("__", "."): v for k, v in options.items()}}
    return TableConfig("out", "redis", "sink", values, COLUMNS)


def opened(table: TableConfig, marker: Any | None) -> Sink:
    sink = CONNECTORS["redis"].create_sink(table, SCHEMA)
    sink.open(marker)
    return sink


def replay(table: TableConfig, marker: Any, epoch: int, df: DataFrame) -> Any:
    """A restarted pipeline: a new sink opened at ``marker`` writes ``epoch`` again."""
    sink = opened(table, marker)
    try:
        return sink.write_epoch(epoch, df)
    finally:
        sink.close()


def test_string_sets_one_key_per_row_and_a_replay_rewrites_them(
        spark: SparkSession, redis_url: str, prefix: str, client: redis.Redis) -> None:
    table = sink_table(redis_url, "string", prefix, target__key_column="k")
    sink = opened(table, None)
    marker = sink.write_epoch(0, frame(spark, ("a", "x", 1), ("b", "y", 2)))
    assert marker == {"epoch": 0}
    assert sink.epoch_bytes == 2 * len('{"k":"a","f":"x","n":1}')
    sink.write_epoch(1, frame(spark, ("a", "z", 3)))
    sink.close()
    replay(table, marker, 1, frame(spark, ("a", "z", 3)))
    assert json.loads(cast(str, client.get(f"{prefix}a"))) == {"k": "a", "f": "z", "n": 3}
    assert json.loads(cast(str, client.get(f"{prefix}b"))) == {"k": "b", "f": "y", "n": 2}
    assert sorted(client.keys(f"{prefix}*")) == [f"{prefix}a", f"{prefix}b"]


def test_hash_sets_one_field_per_row(spark: SparkSession, redis_url: str, prefix: str,
                                     client: redis.Redis) -> None:
    table = sink_table(redis_url, "hash", prefix, target__key_column="k",
                       target__field_column="f")
    sink = opened(table, None)
    marker = sink.write_epoch(0, frame(spark, ("a", "x", 1), ("a", "y", 2), ("b", "x", 3)))
    sink.close()
    replay(table, None, 0, frame(spark, ("a", "x", 1), ("a", "y", 2), ("b", "x", 3)))
    assert marker == {"epoch": 0}
    assert {f: json.loads(v)["n"] for f, v in client.hgetall(f"{prefix}a").items()} == {
        "x": 1, "y": 2}
    assert list(client.hgetall(f"{prefix}b")) == ["x"]


def test_list_appends_each_epoch_once(spark: SparkSession, redis_url: str, prefix: str,
                                      client: redis.Redis) -> None:
    table = sink_table(redis_url, "list", prefix, target__key_column="k")
    sink = opened(table, None)
    first = sink.write_epoch(0, frame(spark, ("a", "x", 1), ("b", "y", 2)))
    sink.write_epoch(1, frame(spark, ("a", "z", 3)))  # written, then a crash: not committed
    sink.close()
    replay(table, first, 1, frame(spark, ("a", "z", 3)))
    third = replay(table, {"epoch": 1}, 2, frame(spark, ("a", "w", 4)))
    assert third == {"epoch": 2}
    assert [json.loads(v)["n"] for v in client.lrange(f"{prefix}a", 0, -1)] == [1, 3, 4]
    assert [json.loads(v)["n"] for v in client.lrange(f"{prefix}b", 0, -1)] == [2]
    assert client.get(f"{prefix}__spate_epoch") == "2"


def test_a_fresh_pipeline_writes_from_its_first_epoch(spark: SparkSession, redis_url: str,
                                                      prefix: str, client: redis.Redis) -> None:
    table = sink_table(redis_url, "list", f"{prefix}l")
    client.set(f"{prefix}l__spate_epoch", 7)  # left by an earlier pipeline
    replay(table, None, 0, frame(spark, ("a", "x", 1)))
    assert client.llen(f"{prefix}l") == 1


def test_two_pipelines_writing_one_list_keep_an_epoch_marker_each(
        spark: SparkSession, redis_url: str, prefix: str, client: redis.Redis) -> None:
    table = sink_table(redis_url, "list", f"{prefix}l")
    for pipeline, n in (("t/one", 1), ("t/two", 2)):
        sink = CONNECTORS["redis"].create_sink(table, SCHEMA)
        sink.pipeline = pipeline
        sink.open({"epoch": 0})
        sink.write_epoch(1, frame(spark, ("a", "x", n)))  # the same epoch number
        sink.close()
    assert [json.loads(v)["n"] for v in client.lrange(f"{prefix}l", 0, -1)] == [1, 2], \
        "the second pipeline's epoch 1 was taken for the first's"


def test_stream_ids_come_from_the_epoch(spark: SparkSession, redis_url: str, prefix: str,
                                        client: redis.Redis) -> None:
    table = sink_table(redis_url, "stream", f"{prefix}s")
    sink = opened(table, None)
    first = sink.write_epoch(0, frame(spark, ("a", "x", 1), ("b", "y", 2)))
    sink.write_epoch(1, frame(spark, ("c", "z", 3)))
    sink.close()
    replay(table, first, 1, frame(spark, ("c", "z", 3)))
    entries = cast(list[tuple[str, dict[str, str]]], client.xrange(f"{prefix}s"))
    assert [entry_id for entry_id, _ in entries] == ["0-1", "0-2", "1-1"]
    assert [json.loads(fields["value"])["k"] for _, fields in entries] == ["a", "b", "c"]
    with pytest.raises(redis.ResponseError, match="equal or smaller"):
        client.xadd(f"{prefix}s", {"value": "again"}, id="1-1")


def test_pubsub_publishes_each_epoch_once(spark: SparkSession, redis_url: str, prefix: str,
                                          client: redis.Redis) -> None:
    subscriber = client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
    subscriber.subscribe(f"{prefix}chan")
    table = sink_table(redis_url, "pubsub", f"{prefix}chan")
    sink = opened(table, None)
    first = sink.write_epoch(0, frame(spark, ("a", "x", 1)))
    sink.write_epoch(1, frame(spark, ("b", "y", 2)))  # published, then a crash
    sink.close()
    replay(table, first, 1, frame(spark, ("b", "y", 2)))
    received: list[str] = []
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # the two messages, then 0.5 s for a third
        message = subscriber.get_message(timeout=0.1)
        if message is not None:
            received.append(json.loads(message["data"])["k"])
            if len(received) == 2:
                deadline = min(deadline, time.monotonic() + 0.5)
    subscriber.close()
    assert received == ["a", "b"]


def test_raw_string_writes_the_value_column(spark: SparkSession, redis_url: str, prefix: str,
                                            client: redis.Redis) -> None:
    schema = T.StructType([T.StructField("value", T.StringType())])
    table = TableConfig("out", "redis", "sink", {
        "type": "sink", "address": redis_url, "format": "raw_string", "target": "list",
        "target.key_prefix": f"{prefix}raw"}, (ColumnDef("value", T.StringType()),))
    sink = CONNECTORS["redis"].create_sink(table, schema)
    sink.open(None)
    sink.write_epoch(0, spark.createDataFrame([("one",), ("two",)], schema))
    sink.close()
    assert client.lrange(f"{prefix}raw", 0, -1) == ["one", "two"]


def test_a_null_key_fails_naming_the_column(spark: SparkSession, redis_url: str,
                                            prefix: str) -> None:
    sink = opened(sink_table(redis_url, "string", prefix, target__key_column="k"), None)
    with pytest.raises(Exception) as caught:  # raised in a task: Spark wraps it
        sink.write_epoch(0, frame(spark, (None, "x", 1)))
    sink.close()
    assert root_message(caught.value) == (
        "redis sink 'out': a row has NULL in column 'k' (target.key_column), so it has no "
        "Redis key")


def test_the_tasks_write_their_own_rows_under_the_egress_policy(
        spark: SparkSession, redis_url: str, prefix: str, client: redis.Redis) -> None:
    """A string sink's epoch of four partitions is written by its tasks, each connecting
    through the tenant's egress policy (resolved and checked again in the task)."""
    values = {"type": "sink", "address": "redis://127.0.0.1:6379/0", "format": "json",
              "target": "string", "target.key_prefix": prefix, "target.key_column": "k"}
    allowed = Boundary(egress=EgressPolicy.from_config(["127.0.0.1"], ()))
    table = TableConfig("out", "redis", "sink", values, COLUMNS, boundary=allowed)
    rows = spark.range(0, 400, numPartitions=4).selectExpr(
        "concat('k', id) AS k", "'x' AS f", "id AS n")
    sink = opened(table, None)
    assert sink.write_epoch(0, rows) == {"epoch": 0}
    sink.close()
    assert sorted(client.keys(f"{prefix}*")) == sorted(f"{prefix}k{i}" for i in range(400))
    assert json.loads(cast(str, client.get(f"{prefix}k399")))["n"] == 399


@pytest.mark.parametrize(("options", "message", "option"), [
    ({"target": None}, "needs option 'target'", "target"),
    ({"target": "set"}, "must be one of 'string', 'list'", "target"),
    ({"target.key_prefix": None}, "needs option 'target.key_prefix'", "target.key_prefix"),
    ({"target": "hash"}, "needs option 'target.field_column'", "target.field_column"),
    ({"target.field_column": "f"}, "applies to target 'hash' only", "target.field_column"),
    ({"target.key_column": "nope"}, "must name a column of 'out'", "target.key_column"),
    ({"target.ttl_secs": "5"}, "is not supported yet", "target.ttl_secs"),
    ({"target.operation": "prepend"}, "is not supported yet", "target.operation"),
    ({"bad_data": "drop"}, "applies to sources only", "bad_data"),
    ({"format": "debezium_json"}, "not supported yet by redis sinks", "format"),
    ({"type": "source"}, "used as a sink but is declared as a source", "type"),
    ({"password": "p", "address": "redis://:q@127.0.0.1"}, "given twice", "password"),
])
def test_options_are_checked(options: dict[str, str | None], message: str,
                             option: str) -> None:
    values = {"type": "sink", "address": "redis://127.0.0.1:6379/0", "format": "json",
              "target": "list", "target.key_prefix": "p:", **options}
    table = TableConfig("out", "redis", "sink",
                        {k: v for k, v in values.items() if v is not None}, COLUMNS)
    with pytest.raises(ConnectorError, match=message) as caught:
        CONNECTORS["redis"].validate(table)
    assert caught.value.option == option


def test_reach_pings_the_server_through_the_egress_policy(redis_url: str) -> None:
    allowed = Boundary(egress=EgressPolicy.from_config(["127.0.0.1"], ()))
    reached = CONNECTORS["redis"].reach({"address": "redis://127.0.0.1:6379/0"}, "sink",
                                        allowed)
    assert reached is not None and reached.startswith("Redis ")
    assert reached.endswith(" at 127.0.0.1:6379")
    assert CONNECTORS["redis"].reach({"address": redis_url}, None, Boundary()) is not None


def test_an_unreachable_server_is_named_without_the_password() -> None:
    allowed = Boundary(egress=EgressPolicy.from_config(["127.0.0.1"], ()))
    options = {"address": "redis://127.0.0.1:1/0", "password": "s3cret-pw"}
    for boundary in (allowed, Boundary()):
        with pytest.raises(ConnectorError, match="could not connect to 127.0.0.1:1") as caught:
            CONNECTORS["redis"].reach(options, "source", boundary)
        assert "s3cret-pw" not in str(caught.value)
    refused = Boundary(egress=EgressPolicy.from_config(["10.0.0.1"], ()))
    with pytest.raises(ConnectorError) as caught:
        CONNECTORS["redis"].reach(options, None, refused)
    assert "s3cret-pw" not in str(caught.value) and caught.value.option == "address"
