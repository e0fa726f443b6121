"""bad_data = 'dead_letter': undecodable records written to a sink table with the
epoch (docs/sql/connectors.md#dead-letters): end to end through the real Redis, and
every message source's reader handing its bad records over as dead letters, against
the real brokers (tansu Kafka, moto Kinesis, RabbitMQ, NATS) or, for the sources whose
readers buffer what a connection pushed (MQTT, core NATS, the HTTP family), their
decoding half given the payloads."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import redis
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable

from spate.engine.connectors import CONNECTORS, HIDDEN_CONTROL, ColumnDef, ConnectorError
from spate.engine.connectors.core.dead_letter import CONTROL_DEAD_PREFIX
from spate.engine.connectors.formats.records import dead_letter_connectors, source_schema
from spate.engine.connectors.http.common import FeedReader
from spate.engine.connectors.http.polling import PollingFeed
from spate.engine.connectors.http.sse import SseFeed
from spate.engine.connectors.http.websocket import WebSocketFeed
from spate.engine.connectors.kafka.source import KafkaStreamReader
from spate.engine.connectors.kinesis.source import KinesisDataSource
from spate.engine.connectors.mqtt.connector import parse_table as parse_mqtt
from spate.engine.connectors.mqtt.source import MqttStreamReader
from spate.engine.connectors.nats.source import CoreReader, NatsJetStreamDataSource
from spate.engine.connectors.rabbitmq.queues import RabbitQueueReader
from spate.engine.connectors.rabbitmq.settings import read_settings
from spate.engine.connectors.rabbitmq.streams import RabbitStreamReader
from spate.engine.planner import plan_pipeline
from spate.engine.planner.errors import PlanningError
from spate.engine.runtime.reports import EpochReport
from tests.conftest import redis_key_prefix
from tests.engine.connectors.kafka.kafka_broker import Broker, kafka_broker
from tests.engine.connectors.kinesis.kinesis_support import KinesisServer, serve_kinesis
from tests.engine.connectors.nats.nats_support import TestStream, js_stream, publish
from tests.engine.connectors.rabbitmq.rabbitmq_support import (
    publish_to_queue,
    publish_to_stream,
    queue_name,
    stream_name,
)
from tests.engine.connectors.support import make_table
from tests.engine.harness import read_lines, run_pipeline

pytestmark = pytest.mark.e2e

__all__ = ["js_stream", "kafka_broker", "queue_name", "stream_name"]  # fixtures

COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType()))
#: Two good records around the bad ones every test sends: not JSON, and no id.
GOOD_1, GOOD_2 = b'{"id": 1, "name": "a"}', b'{"id": 2, "name": "b"}'
NOT_JSON, NO_ID = b"{not json\xff", b'{"name": "no id"}'
RECORDS = [GOOD_1, NOT_JSON, NO_ID, GOOD_2]
DEAD = {"bad_data": "dead_letter", "dead_letter.table": "bad"}


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    yield from redis_key_prefix(redis_url)


def _source(redis_url: str, stream: str, extra: str = "") -> str:
    return (f"CREATE TABLE events (id BIGINT NOT NULL, name TEXT) WITH (connector = 'redis', "
            f"type = 'source', address = '{redis_url}', stream = '{stream}', format = 'json', "
            f"'source.offset' = 'earliest', bad_data = 'dead_letter'{extra});\n")


def _sink(redis_url: str, name: str, key: str) -> str:
    return (f"CREATE TABLE {name} WITH (connector = 'redis', type = 'sink', "
            f"address = '{redis_url}', format = 'json', target = 'list', "
            f"'target.key_prefix' = '{key}');\n")


def test_undecodable_records_go_to_the_dead_letter_table(spark: SparkSession, tmp_path: Path,
                                                         redis_url: str, prefix: str) -> None:
    client = redis.Redis.from_url(redis_url)
    stream = f"{prefix}in"
    client.xadd(stream, {"value": json.dumps({"id": 1, "name": "a"})}, id="1000-0")
    client.xadd(stream, {"value": b"{not json\xff"}, id="2000-0")
    client.xadd(stream, {"value": json.dumps({"name": "no id"})}, id="3000-0")
    client.xadd(stream, {"other": "x"}, id="4000-0")
    client.xadd(stream, {"value": json.dumps({"id": 5, "name": "e"})}, id="5000-0")
    sql = (_source(redis_url, stream, ", 'dead_letter.table' = 'bad'")
           + _sink(redis_url, "out", f"{prefix}out") + _sink(redis_url, "bad", f"{prefix}bad")
           + "INSERT INTO out SELECT id, name FROM events;\n")
    reports: list[EpochReport] = []
    counters = run_pipeline(spark, sql, tmp_path, timeout_s=120, reports=reports,
                            stop_when=lambda: client.llen(f"{prefix}out") >= 2
                            and client.llen(f"{prefix}bad") >= 3)
    rows = [json.loads(v) for v in client.lrange(f"{prefix}out", 0, -1)]
    assert rows == [{"id": 1, "name": "a"}, {"id": 5, "name": "e"}]
    letters = sorted((json.loads(v) for v in client.lrange(f"{prefix}bad", 0, -1)),
                     key=lambda r: r["position"])
    assert [(r["source"], r["position"]) for r in letters] == [
        ("events", "2000-0"), ("events", "3000-0"), ("events", "4000-0")]
    assert base64.b64decode(letters[0]["record"]) == b"{not json\xff"
    assert "JSON" in letters[0]["error"]
    assert "column 'id' is NOT NULL" in letters[1]["error"]
    assert letters[2]["record"] is None and "has no field 'value'" in letters[2]["error"]
    assert all(r["at"] for r in letters)
    assert sum(r.rows_dead_lettered for r in reports) == 3
    assert counters["rows_dead_lettered"] == 3
    assert sum(r.rows_dropped for r in reports) == 3  # the job's metrics count them
    client.close()


@pytest.mark.parametrize(("tail", "message"), [
    ("", "needs option 'dead_letter.table'"),
    (", 'dead_letter.table' = 'nowhere'", "must name a sink table .* there is none"),
    (", 'dead_letter.table' = 'other'", "other is not a sink"),
    (", 'dead_letter.table' = 'out'", "no INSERT may write it too"),
])
def test_the_dead_letter_table_is_checked_at_plan_time(tail: str, message: str) -> None:
    sql = (_source("redis://127.0.0.1:6379/0", "s", tail) + _sink("redis://h", "out", "o")
           + "CREATE TABLE other (v TEXT) WITH (connector = 'redis', type = 'source', "
           "address = 'redis://h', stream = 'x', format = 'json');\n"
           "INSERT INTO out SELECT id, name FROM events;\n")
    with pytest.raises(PlanningError, match=message):
        plan_pipeline(sql)


def test_other_connectors_refuse_dead_letters_for_now(tmp_path: Path) -> None:
    sql = (f"CREATE TABLE f (v TEXT) WITH (connector = 'single_file', type = 'source', "
           f"path = '{tmp_path / 'in.jsonl'}', format = 'json', "
           "bad_data = 'dead_letter', 'dead_letter.table' = 'bad');\n"
           + _sink("redis://h", "bad", "b") + _sink("redis://h", "out", "o")
           + "INSERT INTO out SELECT v FROM f;\n")
    with pytest.raises(PlanningError, match="not supported by single_file sources yet"):
        plan_pipeline(sql)


def test_a_source_offers_dead_letters_exactly_when_it_takes_a_dead_letter_table() -> None:
    """What a connection form offers for ``bad_data`` agrees with what the source does."""
    takers = dead_letter_connectors()
    assert {"kafka", "mqtt", "nats", "redis"} <= takers
    for name, connector in CONNECTORS.items():
        declared = {o.name: o for o in connector.options}
        if "bad_data" in declared:
            offers = "dead_letter" in declared["bad_data"].choices
            assert offers == (name in takers), name


# -- every message source's reader -----------------------------------------------------


def _letters(rows: Iterable[dict[str, Any]]) -> tuple[list[int], list[tuple[bytes, str, str]]]:
    """The ids of the data rows, and the dead letters (raw record, error, position);
    no record may have been dropped."""
    rows = list(rows)
    controls = [r[HIDDEN_CONTROL] for r in rows if r[HIDDEN_CONTROL] is not None]
    assert all(c.startswith(CONTROL_DEAD_PREFIX) for c in controls), controls
    letters = [json.loads(c[len(CONTROL_DEAD_PREFIX):]) for c in controls]
    return ([r["id"] for r in rows if r[HIDDEN_CONTROL] is None],
            [(base64.b64decode(p["record"]), p["error"], p["position"]) for p in letters])


def _check(rows: Iterable[dict[str, Any]], *positions: str) -> None:
    """The good records became rows; the two bad ones dead letters at ``positions``."""
    ids, letters = _letters(rows)
    assert ids == [1, 2]
    assert [(raw, position) for raw, _, position in letters] == [
        (NOT_JSON, positions[0]), (NO_ID, positions[1])]
    assert "JSON" in letters[0][1]
    assert "column 'id' is NOT NULL" in letters[1][1]


def _batch_rows(batches: Iterable[pa.RecordBatch]) -> list[dict[str, Any]]:
    return [row for batch in batches for row in batch.to_pylist()]


def _read_available(reader: DataSourceStreamReader) -> list[dict[str, Any]]:
    """Everything the reader's source holds now, read as Spark does (one batch)."""
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    try:
        return [row for partition in reader.partitions(start, end)
                for row in _batch_rows(reader.read(partition))]
    finally:
        reader.stop()


def test_kafka_dead_letters_name_partition_and_offset(kafka_broker: Broker) -> None:
    topic = kafka_broker.create_topic(1)
    kafka_broker.produce(topic, [(0, value, 1_700_000_000_000 + i)
                                 for i, value in enumerate(RECORDS)])
    table = make_table("kafka", "source", COLUMNS, bootstrap_servers=kafka_broker.address,
                       topic=topic, format="json", type="source",
                       **{"source.offset": "earliest"}, **DEAD)
    settings, schema = CONNECTORS["kafka"].source_settings(  # type: ignore[attr-defined]
        table, 1)
    _check(_read_available(KafkaStreamReader(settings, schema)),
           "partition 0 offset 1", "partition 0 offset 2")


@pytest.fixture(scope="module")
def kinesis_server() -> Iterator[KinesisServer]:
    yield from serve_kinesis()


def test_kinesis_dead_letters_name_shard_and_sequence(kinesis_server: KinesisServer) -> None:
    stream = kinesis_server.create_stream(shards=1)
    kinesis_server.put_raw(stream, RECORDS)
    table = make_table("kinesis", "source", COLUMNS, name="k", type="source", format="json",
                       **kinesis_server.options(stream, **{"source.offset": "earliest"}),
                       **DEAD)
    source = KinesisDataSource(CONNECTORS["kinesis"].reader_options(  # type: ignore[attr-defined]
        table, 1))
    rows = _read_available(source.streamReader(source.schema()))
    records = kinesis_server.read_all(stream)
    _check(rows, *(f"shard shardId-000000000000 sequence {records[i]['SequenceNumber']}"
                   for i in (1, 2)))


def _rabbit(**options: str) -> Any:
    table = make_table("rabbitmq", "source", COLUMNS, type="source", host="127.0.0.1",
                       format="json", **options, **DEAD)
    return read_settings(table, CONNECTORS["rabbitmq"].roles)


def test_rabbitmq_dead_letters_name_the_message_or_offset(queue_name: str,
                                                         stream_name: str) -> None:
    publish_to_queue(queue_name, RECORDS)
    settings = _rabbit(mode="queue", queue=queue_name)
    queue = RabbitQueueReader(settings, source_schema(settings.spec, COLUMNS))
    batches, end = queue.read(queue.initialOffset())
    queue.commit(end)
    queue.stop()
    _check(_batch_rows(batches), "message 2", "message 3")

    publish_to_stream(stream_name, [b'{"id": 0}', *RECORDS])
    settings = _rabbit(stream=stream_name, **{"source.offset": "earliest"})
    stream = RabbitStreamReader(settings, source_schema(settings.spec, COLUMNS))
    start = stream.initialOffset()
    batches, end = stream.read({"offset": 1})
    replayed = stream.readBetweenOffsets({"offset": 1}, end)  # the same dead letters
    stream.stop()
    assert start == {"offset": 0}
    _check(_batch_rows(batches), "offset 2", "offset 3")
    _check(_batch_rows(replayed), "offset 2", "offset 3")


def test_nats_jetstream_dead_letters_name_the_sequence(js_stream: TestStream) -> None:
    publish(js_stream.subject(), RECORDS)
    table = make_table("nats", "source", COLUMNS, name="events", type="source",
                       servers="nats://127.0.0.1:4222", format="json",
                       **{"nats.stream": js_stream.name}, **DEAD)
    _, options = CONNECTORS["nats"].reader_options(table)  # type: ignore[attr-defined]
    source = NatsJetStreamDataSource(options)
    _check(_read_available(source.streamReader(source.schema())), "sequence 2", "sequence 3")


def test_pushed_messages_dead_letters_name_their_number() -> None:
    """MQTT, core NATS and the HTTP sources number the messages handed to batches (the
    count their offsets keep); this batch's first is message 5."""
    schema = source_schema(parse_mqtt(make_table(
        "mqtt", "source", COLUMNS, type="source", url="mqtt://127.0.0.1:1883", topic="t/#",
        format="json", **DEAD)).spec, COLUMNS)
    spec = {"kind": "json", "bad_data": "dead_letter", "dead_letter": "bad"}
    mqtt = MqttStreamReader({"table": "m", "format": spec, "not_null": ["id"]}, schema)
    topics = ["t/a", "t/b", "t/c", "t/d"]
    _check(_batch_rows(mqtt.decode(InputPartition((RECORDS, topics, [1, 2, 3, 4], 5)))),
           "message 6 on topic 't/b'", "message 7 on topic 't/c'")

    nats = CoreReader({"table": "n", "subject": "s.>", "format": spec, "not_null": ["id"],
                       "metadata": {}}, schema)
    received = [(r, 1, f"s.{i}") for i, r in enumerate(RECORDS)]
    rows = [dict(zip(schema.names, row, strict=True)) for row in nats._rows(received, 5)]
    _check(rows, "message 6 on subject 's.1'", "message 7 on subject 's.2'")

    cursors = ["e1", "e2", None, "e4"]
    for feed, connector, positions in [
            (SseFeed, "sse", ("message 6 (event id e2)", "message 7")),
            (WebSocketFeed, "websocket", ("message 6", "message 7")),
            (PollingFeed, "polling_http", ("response 6", "response 7"))]:
        http = FeedReader({"connector": connector, "table": "h", "format": spec,
                           "not_null": ["id"]}, {}, schema, feed_class=feed)
        _check(_batch_rows(http.decode(InputPartition((RECORDS, [1, 2, 3, 4], 5, cursors)))),
               *positions)


def test_fail_and_drop_still_behave_through_the_shared_helper() -> None:
    schema = source_schema(parse_mqtt(make_table(
        "mqtt", "source", COLUMNS, type="source", url="mqtt://127.0.0.1:1883", topic="t",
        format="json")).spec, COLUMNS)
    for bad_data, expected in (("drop", ["dropped:2"]), ("fail", None)):
        http = FeedReader({"connector": "websocket", "table": "h", "not_null": ["id"],
                           "format": {"kind": "json", "bad_data": bad_data}}, {}, schema,
                          feed_class=WebSocketFeed)
        batch = InputPartition((RECORDS, [1, 2, 3, 4], 1, [None] * 4))
        if expected is None:
            with pytest.raises(ConnectorError, match="bad record in message 2: .*'dead_letter'"
                               ) as caught:
                list(http.decode(batch))
            assert caught.value.option == "bad_data"
            continue
        rows = _batch_rows(http.decode(batch))
        assert [r[HIDDEN_CONTROL] for r in rows if r[HIDDEN_CONTROL]] == expected


# -- one pipeline, several sources, one dead-letter table --------------------------------


def test_a_pipeline_dead_letters_several_sources_into_one_table(
        spark: SparkSession, tmp_path: Path, kafka_broker: Broker, stream_name: str) -> None:
    """A Kafka source (read on executors) and a RabbitMQ stream source (a simple reader on
    the driver) share one dead-letter table."""
    topic = kafka_broker.create_topic(1)
    kafka_broker.produce(topic, [(0, value, 1_700_000_000_000 + i)
                                 for i, value in enumerate(RECORDS)])
    publish_to_stream(stream_name, RECORDS)
    out, bad = tmp_path / "out.jsonl", tmp_path / "bad.jsonl"
    dead = "bad_data = 'dead_letter', 'dead_letter.table' = 'bad'"
    sql = f"""
        CREATE TABLE k (id BIGINT NOT NULL, name TEXT) WITH (connector = 'kafka',
            type = 'source', bootstrap_servers = '{kafka_broker.address}', topic = '{topic}',
            'source.offset' = 'earliest', format = 'json', {dead});
        CREATE TABLE r (id BIGINT NOT NULL, name TEXT) WITH (connector = 'rabbitmq',
            type = 'source', host = '127.0.0.1', stream = '{stream_name}',
            'source.offset' = 'earliest', format = 'json', {dead});
        CREATE TABLE out WITH (connector = 'single_file', type = 'sink', path = '{out}',
            format = 'json');
        CREATE TABLE bad WITH (connector = 'single_file', type = 'sink', path = '{bad}',
            format = 'json');
        INSERT INTO out SELECT 'k' AS source, id FROM k UNION ALL SELECT 'r', id FROM r;
    """
    reports: list[EpochReport] = []

    def lines(path: Path) -> list[dict[str, Any]]:
        return [json.loads(line) for line in read_lines(path)] if path.exists() else []

    counters = run_pipeline(spark, sql, tmp_path / "work", timeout_s=120, reports=reports,
                            stop_when=lambda: len(lines(out)) >= 4 and len(lines(bad)) >= 4)
    assert sorted((r["source"], r["id"]) for r in lines(out)) == [
        (s, i) for s in "kr" for i in (1, 2)]
    letters = sorted((r["source"], r["position"], base64.b64decode(r["record"]))
                     for r in lines(bad))
    assert letters == [("k", "partition 0 offset 1", NOT_JSON),
                       ("k", "partition 0 offset 2", NO_ID),
                       ("r", "offset 1", NOT_JSON), ("r", "offset 2", NO_ID)]
    assert counters["rows_dead_lettered"] == 4
    assert sum(r.rows_dead_lettered for r in reports) == 4
