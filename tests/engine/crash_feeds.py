"""What the crash test's job reads and writes, and how the test feeds and reads it.

One job (``test_crash.py``) holds a branch per connector under test:

* every **broker** source (kafka, mqtt, nats, rabbitmq queues and streams, redis
  streams, kinesis): its records go through a filter into a file of its own;
* a **folder of json files** read continuously, written as parquet to S3 (a real
  moto server) and as json lines to a local folder;
* a bounded **Nexmark** stream: HOP windows and SESSION windows of its bids (state
  in the store), and its auctions appended to a Delta and an Iceberg table.

A :class:`Feed` is one such branch: its SQL, how the test adds input while the job
is down, and how it reads back what the job wrote.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import secrets
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path

import paho.mqtt.client as paho
import pika
import pyarrow as pa
import pyarrow.parquet as pq
import redis
from deltalake import DeltaTable
from paho.mqtt.enums import CallbackAPIVersion
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import types as T
from rstream import Producer as StreamProducer

from spate.engine.connectors import ColumnDef
from spate.engine.connectors.filesystem.object_store import PENDING_DIR
from spate.engine.connectors.mqtt.client import BrokerSettings, close, connect, subscribe
from spate.engine.connectors.mqtt.connector import parse_table as parse_mqtt_table
from tests.engine.connectors.filesystem.s3_support import S3Server
from tests.engine.connectors.kafka.kafka_broker import Broker
from tests.engine.connectors.kinesis.kinesis_support import KinesisServer
from tests.engine.connectors.nats.nats_support import SERVERS, create_stream, delete_stream, publish
from tests.engine.connectors.rabbitmq.rabbitmq_support import (
    AMQP_PORT,
    HOST,
    STREAM_PORT,
    publish_to_queue,
    publish_to_stream,
)
from tests.engine.connectors.support import make_table
from tests.engine.harness import read_lines

#: Broker records produced before the job starts, and while it is down after a kill.
BEFORE, AFTER = 300, 100
#: The most records one epoch reads from each broker (where the connector has a limit).
BATCH = 150
#: The filter of every broker and file branch: ids with ``id % 7 = 3`` are dropped.
KEPT = [i for i in range(BEFORE + AFTER) if i % 7 != 3]
#: Json files before the start and after the first kill; records per file.
FILES_BEFORE, FILES_AFTER, PER_FILE = 6, 2, 50
KEPT_FILE_IDS = [i for i in range((FILES_BEFORE + FILES_AFTER) * PER_FILE) if i % 7 != 3]
COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType()))
MQTT_URL = "tcp://127.0.0.1:1883"
#: ``<tenant>/<pipeline>`` of the job ``spate run`` starts for ``pipeline.sql``.
OWNER = "default/pipeline"

#: Nexmark: 1,000 events per second of event time for 24 s, 4,000 an epoch, unpaced: six
#: epochs, so that both kills land while it still runs.
NEXMARK_RATE, NEXMARK_RUNTIME_S, NEXMARK_BATCH = 1_000, 24, 4_000
#: The auctions of that stream (3 in every 50 events, numbered from 1000).
AUCTIONS = list(range(1000, 1000 + NEXMARK_RATE * NEXMARK_RUNTIME_S * 3 // 50))

NEXMARK_TABLE = f"""
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '{NEXMARK_RATE}',
    runtime = '{NEXMARK_RUNTIME_S}', rate_limited = 'false',
    max_events_per_batch = '{NEXMARK_BATCH}', 'nexmark.base_time_ms' = '1700000000000');
"""

#: The stateful branch: its output must equal an uninterrupted run's.
WINDOWS = """
CREATE TABLE windows WITH (connector = 'single_file', path = '{out}/windows.jsonl',
    format = 'json', type = 'sink');
CREATE TABLE sessions WITH (connector = 'single_file', path = '{out}/sessions.jsonl',
    format = 'json', type = 'sink');
INSERT INTO windows
SELECT bucket, w.end AS window_end, n, total, top
FROM (SELECT bid.auction % 7 AS bucket, HOP(INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS w,
             count(*) AS n, sum(bid.price) AS total, max(bid.price) AS top
      FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2);
INSERT INTO sessions
SELECT bucket, s.start AS session_start, s.end AS session_end, bids
FROM (SELECT bid.bidder % 500 AS bucket, SESSION(INTERVAL '200' MILLISECOND) AS s,
             count(*) AS bids
      FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2);
"""

LAKEHOUSE = """
CREATE TABLE lake_delta (id BIGINT, seller BIGINT, initial_bid BIGINT, date_time TIMESTAMP)
    WITH (connector = 'delta', path = '{delta}');
CREATE TABLE lake_iceberg (id BIGINT, seller BIGINT, initial_bid BIGINT, date_time TIMESTAMP)
    WITH (connector = 'iceberg', 'catalog.uri' = '{uri}', 'catalog.name' = '{catalog}',
          'catalog.warehouse' = '{warehouse}', namespace = 'crash', table_name = 'auctions');
INSERT INTO lake_delta SELECT auction.id, auction.seller, auction.initial_bid,
    auction.datetime FROM nexmark WHERE auction IS NOT NULL;
INSERT INTO lake_iceberg SELECT auction.id, auction.seller, auction.initial_bid,
    auction.datetime FROM nexmark WHERE auction IS NOT NULL;
"""


def windows_sql(out: Path) -> str:
    """The Nexmark source and its stateful branch alone (the reference run's pipeline)."""
    return NEXMARK_TABLE + WINDOWS.format(out=out)


# -- brokers --------------------------------------------------------------------------------


@dataclass
class BrokerCase:
    """A broker's source table in the job and how the test feeds it."""

    name: str
    exactly_once: bool
    #: the WITH options of its source table
    options: dict[str, str]
    publish: Callable[[list[bytes]], None]
    #: the most records one epoch reads from it (None: all there are)
    batch: int | None = BATCH
    cleanup: Callable[[], None] = lambda: None

    def sql(self, out: Path) -> str:
        options = {"type": "source", "format": "json"} | self.options
        with_ = ", ".join(f"'{key}' = '{value}'" for key, value in options.items())
        return (f"CREATE TABLE src_{self.name} (id BIGINT NOT NULL, name TEXT) WITH ({with_});\n"
                f"CREATE TABLE out_{self.name} WITH (connector = 'single_file', type = 'sink', "
                f"format = 'json', path = '{self.output(out)}');\n"
                f"INSERT INTO out_{self.name} SELECT id FROM src_{self.name} "
                f"WHERE id % 7 <> 3;\n")

    def output(self, out: Path) -> Path:
        return out / f"{self.name}.jsonl"

    def ids(self, out: Path) -> list[int]:
        return [json.loads(line)["id"] for line in read_lines(self.output(out))]


def records(ids: range) -> list[bytes]:
    return [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in ids]


def kafka_case(broker: Broker) -> BrokerCase:
    topic = broker.create_topic(3)

    def produce(values: list[bytes]) -> None:
        broker.produce(topic, [(i % 3, v, int(time.time() * 1000)) for i, v in
                               enumerate(values)])

    return BrokerCase("kafka", True, {"connector": "kafka", "bootstrap_servers": broker.address,
                                      "topic": topic, "source.offset": "earliest",
                                      "max_records_per_batch": str(BATCH)}, produce)


def mqtt_case() -> BrokerCase:
    topic, prefix = f"spate-test/{secrets.token_hex(8)}", f"t{secrets.token_hex(4)}"
    options = {"connector": "mqtt", "url": MQTT_URL, "topic": topic, "client_prefix": prefix,
               "max_messages_per_batch": str(BATCH)}
    settings = {k: v for k, v in options.items() if k != "connector"}
    table = replace(make_table("mqtt", "source", COLUMNS, name="src_mqtt", type="source",
                               format="json", **settings), owner=OWNER)
    parsed = parse_mqtt_table(table)
    broker = BrokerSettings("127.0.0.1", 1883)
    # The job's session, opened before it first runs: a fresh subscription sees nothing
    # published earlier.
    client = connect(broker, parsed.client_id, what="test", persistent=True, manual_ack=True)
    subscribe(client, broker, parsed.topic, parsed.qos, "test")
    close(client)

    def produce(values: list[bytes]) -> None:
        publisher = paho.Client(CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
        publisher.connect("127.0.0.1", 1883)
        publisher.loop_start()
        try:
            for info in [publisher.publish(topic, v, qos=1) for v in values]:
                info.wait_for_publish(10)
        finally:
            publisher.disconnect()
            publisher.loop_stop()

    def drop_session() -> None:
        close(connect(broker, parsed.client_id, what="cleanup", persistent=False))

    return BrokerCase("mqtt", False, options, produce, cleanup=drop_session)


def nats_case() -> BrokerCase:
    stream = create_stream("crash")
    options = {"connector": "nats", "servers": SERVERS, "nats.stream": stream.name,
               "max_messages_per_batch": str(BATCH)}
    return BrokerCase("nats", True, options, lambda values: publish(stream.subject(), values),
                      cleanup=lambda: delete_stream(stream))


def _amqp() -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(HOST, AMQP_PORT))


def rabbitmq_queue_case() -> BrokerCase:
    queue = f"spate-test-{secrets.token_hex(6)}"
    with closing(_amqp()) as connection:
        connection.channel().queue_declare(queue, durable=True)

    def delete() -> None:
        with closing(_amqp()) as connection:
            connection.channel().queue_delete(queue)

    options = {"connector": "rabbitmq", "host": HOST, "mode": "queue", "queue": queue,
               "max_messages_per_batch": str(BATCH)}
    return BrokerCase("rabbitmq_queue", False, options,
                      lambda values: publish_to_queue(queue, values), cleanup=delete)


def rabbitmq_stream_case() -> BrokerCase:
    stream = f"spate-test-{secrets.token_hex(6)}"

    async def create() -> None:
        async with StreamProducer(HOST, STREAM_PORT, username="guest",
                                  password="guest") as producer:
            await producer.create_stream(stream)

    async def delete() -> None:
        async with StreamProducer(HOST, STREAM_PORT, username="guest",
                                  password="guest") as producer:
            await producer.delete_stream(stream, missing_ok=True)

    asyncio.run(create())
    options = {"connector": "rabbitmq", "host": HOST, "stream": stream,
               "source.offset": "earliest", "max_messages_per_batch": str(BATCH)}
    return BrokerCase("rabbitmq_stream", True, options,
                      lambda values: publish_to_stream(stream, values),
                      cleanup=lambda: asyncio.run(delete()))


def redis_case(url: str, prefix: str) -> BrokerCase:
    stream = f"{prefix}crash"

    def produce(values: list[bytes]) -> None:
        client = redis.Redis.from_url(url)
        try:
            pipe = client.pipeline()
            for value in values:
                pipe.xadd(stream, {"value": value})
            pipe.execute()
        finally:
            client.close()

    options = {"connector": "redis", "address": url, "stream": stream,
               "source.offset": "earliest", "max_entries_per_batch": str(BATCH)}
    return BrokerCase("redis", True, options, produce)


def kinesis_case(server: KinesisServer) -> BrokerCase:
    stream = server.create_stream(shards=2)

    def produce(values: list[bytes]) -> None:
        server.put_raw(stream, values, [str(i) for i in range(len(values))])

    return BrokerCase("kinesis", True, {"connector": "kinesis",
                                        **server.options(stream, **{"source.offset": "earliest"})},
                      produce, batch=None)


# -- files ----------------------------------------------------------------------------------


@dataclass
class FileFeed:
    """A folder of parquet files in, parquet on S3 and json lines in a local folder out.

    Every other file holds ``id`` as a 32-bit integer, which the table declares BIGINT:
    the Python source decodes (and widens) those, Spark's parquet reader reads the
    others (``engine/connectors/filesystem/spark_parquet.py``), kills or not."""

    inbox: Path
    local_out: Path
    s3: S3Server
    bucket: str

    def sql(self) -> str:
        with_s3 = ", ".join(f"'{k}' = '{v}'" for k, v in
                            self.s3.options(f"s3://{self.bucket}/out").items())
        return (f"CREATE TABLE src_files (id BIGINT NOT NULL, name TEXT) WITH ("
                f"connector = 'filesystem', type = 'source', format = 'parquet', "
                f"path = '{self.inbox}', source.mode = 'continuous', "
                f"source.poll_interval = '100ms', source.max_files_per_batch = '2');\n"
                f"CREATE TABLE to_s3 WITH (connector = 'filesystem', type = 'sink', "
                f"format = 'parquet', {with_s3});\n"
                f"CREATE TABLE to_local WITH (connector = 'filesystem', type = 'sink', "
                f"format = 'json', path = '{self.local_out}', rolling_policy.max_records = '40');\n"
                "INSERT INTO to_s3 SELECT id, name FROM src_files WHERE id % 7 <> 3;\n"
                "INSERT INTO to_local SELECT id FROM src_files WHERE id % 7 <> 3;\n")

    def write(self, indexes: range) -> None:
        for index in indexes:
            ids = range(index * PER_FILE, (index + 1) * PER_FILE)
            rows = pa.table({"id": pa.array(ids, pa.int32() if index % 2 else pa.int64()),
                             "name": [f"n{i}" for i in ids]})
            staging = self.inbox / f".in-{index:03d}.parquet"  # hidden while written, renamed
            pq.write_table(rows, staging)
            os.replace(staging, self.inbox / f"in-{index:03d}.parquet")

    def s3_ids(self) -> list[int]:
        ids: list[int] = []
        for key in self.s3.keys(self.bucket, "out/"):
            table = pq.read_table(io.BytesIO(self.s3.get(self.bucket, key)))
            ids.extend(table.column("id").to_pylist())
        return ids

    def local_ids(self) -> list[int]:
        ids: list[int] = []
        for path in sorted(self.local_out.rglob("*.json")):
            if PENDING_DIR not in path.parts:
                ids.extend(json.loads(line)["id"] for line in path.read_text().splitlines())
        return ids

    def s3_names(self) -> list[str]:
        return self.s3.keys(self.bucket)

    def local_names(self) -> list[str]:
        return sorted(str(p.relative_to(self.local_out)) for p in self.local_out.rglob("*")
                      if p.is_file())


# -- lakehouse ------------------------------------------------------------------------------


@dataclass
class Lakehouse:
    """The Delta table's folder and the Iceberg table's catalog."""

    delta: Path
    uri: str
    catalog: str
    warehouse: Path

    def sql(self) -> str:
        return LAKEHOUSE.format(delta=self.delta, uri=self.uri, catalog=self.catalog,
                                warehouse=self.warehouse)

    def delta_ids(self) -> list[int]:
        if not (self.delta / "_delta_log").is_dir():
            return []
        return list(DeltaTable(str(self.delta)).to_pyarrow_table().column("id").to_pylist())

    def iceberg_ids(self) -> list[int]:
        catalog = SqlCatalog(self.catalog, uri=self.uri, warehouse=f"file://{self.warehouse}")
        try:
            if not catalog.table_exists(("crash", "auctions")):
                return []
            table = catalog.load_table(("crash", "auctions"))
            return list(table.scan().to_arrow().column("id").to_pylist())
        finally:
            catalog.engine.dispose()
