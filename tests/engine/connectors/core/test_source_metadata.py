"""METADATA FROM columns of the broker sources other than kafka
(test_kafka_metadata.py), end to end against the real servers."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import paho.mqtt.client as paho
import pytest
import redis
from paho.mqtt.enums import CallbackAPIVersion
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import ColumnDef
from spate.engine.connectors.mqtt.client import BrokerSettings, close, connect, subscribe
from spate.engine.connectors.mqtt.connector import parse_table as parse_mqtt_table
from tests.conftest import redis_key_prefix
from tests.engine.connectors.kinesis.kinesis_support import KinesisServer, serve_kinesis
from tests.engine.connectors.nats.nats_support import SERVERS, create_stream, delete_stream, publish
from tests.engine.connectors.support import make_table
from tests.engine.harness import read_lines, run_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.spark]


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    yield from redis_key_prefix(redis_url)


def test_a_redis_stream_source_fills_entry_ids_and_the_stream_name(
        spark: SparkSession, redis_url: str, prefix: str, tmp_path: Path) -> None:
    stream = f"{prefix}events"
    client = redis.Redis.from_url(redis_url)
    ids = [client.xadd(stream, {"value": json.dumps({"n": n})}).decode() for n in range(4)]
    client.close()
    out = tmp_path / "out.jsonl"
    sql = f"""
        CREATE TABLE events (n BIGINT, entry TEXT METADATA FROM 'id',
                             s TEXT GENERATED ALWAYS AS (metadata('stream')))
            WITH (connector = 'redis', type = 'source', address = '{redis_url}',
                  stream = '{stream}', format = 'json', 'source.offset' = 'earliest');
        CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink',
                               format = 'json');
        INSERT INTO out SELECT n, entry, s FROM events;
    """
    run_pipeline(spark, sql, tmp_path, stop_when=lambda: len(read_lines(out)) >= 4)
    rows = sorted((json.loads(line) for line in read_lines(out)), key=lambda r: r["n"])
    assert rows == [{"n": n, "entry": ids[n], "s": stream} for n in range(4)]


def test_an_mqtt_source_fills_each_messages_topic(spark: SparkSession, tmp_path: Path) -> None:
    base, client_prefix = f"spate-test/{uuid.uuid4().hex}", f"t{uuid.uuid4().hex[:8]}"
    options = {"url": "tcp://127.0.0.1:1883", "topic": f"{base}/#",
               "client_prefix": client_prefix}
    # The session run_pipeline's runner opens (its tenant and pipeline's own), opened
    # first: a fresh subscription sees nothing published before it.
    table = replace(make_table("mqtt", "source", (ColumnDef("n", T.LongType()),), name="src",
                               type="source", format="json", **options), owner="default/test")
    parsed = parse_mqtt_table(table)
    broker = BrokerSettings("127.0.0.1", 1883)
    session = connect(broker, parsed.client_id, what="test", persistent=True, manual_ack=True)
    subscribe(session, broker, parsed.topic, parsed.qos, "test")
    close(session)
    try:
        publisher = paho.Client(CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
        publisher.connect("127.0.0.1", 1883)
        publisher.loop_start()
        for info in [publisher.publish(f"{base}/{'ab'[n % 2]}", json.dumps({"n": n}), qos=1)
                     for n in range(4)]:
            info.wait_for_publish(5)
        publisher.disconnect()
        publisher.loop_stop()
        out = tmp_path / "out.jsonl"
        with_list = ", ".join(f"'{k}' = '{v}'" for k, v in options.items())
        sql = f"""
            CREATE TABLE src (t TEXT METADATA FROM 'topic', n BIGINT)
                WITH (connector = 'mqtt', type = 'source', format = 'json', {with_list});
            CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink',
                                   format = 'json');
            INSERT INTO out SELECT n, t FROM src;
        """
        run_pipeline(spark, sql, tmp_path, stop_when=lambda: len(read_lines(out)) >= 4,
                     timeout_s=60)
        rows = sorted((json.loads(line) for line in read_lines(out)), key=lambda r: r["n"])
        assert rows == [{"n": n, "t": f"{base}/{'ab'[n % 2]}"} for n in range(4)]
    finally:
        close(connect(broker, parsed.client_id, what="cleanup", persistent=False))


@pytest.fixture
def kinesis_server() -> Iterator[KinesisServer]:
    yield from serve_kinesis()


def test_a_kinesis_source_fills_shard_sequence_number_and_partition_key(
        spark: SparkSession, kinesis_server: KinesisServer, tmp_path: Path) -> None:
    stream = kinesis_server.create_stream(shards=2)
    kinesis_server.put_raw(stream, [json.dumps({"n": n}).encode() for n in range(4)],
                           [f"key{n}" for n in range(4)])
    client = kinesis_server.client()
    expected = {}  # n -> (shard, sequence number), read shard by shard
    for shard in client.list_shards(StreamName=stream)["Shards"]:
        iterator = client.get_shard_iterator(StreamName=stream, ShardId=shard["ShardId"],
                                             ShardIteratorType="TRIM_HORIZON")
        for record in client.get_records(ShardIterator=iterator["ShardIterator"])["Records"]:
            expected[json.loads(record["Data"])["n"]] = (shard["ShardId"],
                                                         record["SequenceNumber"])
    options = ", ".join(f"'{k}' = '{v}'" for k, v in
                        kinesis_server.options(stream, **{"source.offset": "earliest"}).items())
    out = tmp_path / "out.jsonl"
    sql = f"""
        CREATE TABLE events (n BIGINT, shard TEXT METADATA FROM 'shard_id',
                             seq TEXT METADATA FROM 'sequence_number',
                             pk TEXT METADATA FROM 'partition_key')
            WITH (connector = 'kinesis', type = 'source', format = 'json', {options});
        CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink',
                               format = 'json');
        INSERT INTO out SELECT n, shard, seq, pk FROM events;
    """
    run_pipeline(spark, sql, tmp_path, parallelism=2,
                 stop_when=lambda: len(read_lines(out)) >= 4)
    rows = sorted((json.loads(line) for line in read_lines(out)), key=lambda r: r["n"])
    assert rows == [{"n": n, "shard": expected[n][0], "seq": expected[n][1], "pk": f"key{n}"}
                    for n in range(4)]


def test_a_nats_jetstream_source_fills_each_messages_subject(spark: SparkSession,
                                                             tmp_path: Path) -> None:
    stream = create_stream("meta")
    try:
        for n in range(4):
            publish(stream.subject("ab"[n % 2]), [json.dumps({"n": n}).encode()])
        out = tmp_path / "out.jsonl"
        sql = f"""
            CREATE TABLE events (n BIGINT, s TEXT METADATA FROM 'subject')
                WITH (connector = 'nats', type = 'source', servers = '{SERVERS}',
                      'nats.stream' = '{stream.name}', format = 'json');
            CREATE TABLE out WITH (connector = 'single_file', path = '{out}', type = 'sink',
                                   format = 'json');
            INSERT INTO out SELECT n, s FROM events;
        """
        run_pipeline(spark, sql, tmp_path, stop_when=lambda: len(read_lines(out)) >= 4)
        rows = sorted((json.loads(line) for line in read_lines(out)), key=lambda r: r["n"])
        assert rows == [{"n": n, "s": stream.subject("ab"[n % 2])} for n in range(4)]
    finally:
        delete_stream(stream)
