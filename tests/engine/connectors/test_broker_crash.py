"""Every broker connector through a kill -9 of its job mid-stream and a restart at
another parallelism (issue #15).

One job reads all of them at once (a JVM start per job process is the expensive
part): each connector's records go through a filter into a file sink of its own.
The job is killed with SIGKILL once it has committed an epoch, more records are
produced while it is down, and it is restarted at another parallelism until every
file holds every expected record.  Exactly-once connectors must then give exactly
the expected multiset; at-least-once ones (rabbitmq queues, mqtt) every record, with
repeats only of records produced before the kill, at most once more each and no
more of them than one epoch reads (the epoch in flight when the job died).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path

import paho.mqtt.client as paho
import pika
import pytest
import redis
from paho.mqtt.enums import CallbackAPIVersion
from pyspark.sql import types as T
from rstream import Producer as StreamProducer

from spate.engine.connectors import ColumnDef
from spate.engine.connectors.mqtt import parse_table as parse_mqtt_table
from spate.engine.connectors.mqtt_client import BrokerSettings, close, connect, subscribe
from tests.engine.connectors.crash_support import last_committed, spate_run
from tests.engine.connectors.kafka_broker import Broker, kafka_broker
from tests.engine.connectors.kinesis_support import KinesisServer, serve_kinesis
from tests.engine.connectors.nats_support import (
    SERVERS,
    TestStream,
    create_stream,
    delete_stream,
    publish,
)
from tests.engine.connectors.rabbitmq_support import (
    AMQP_PORT,
    HOST,
    STREAM_PORT,
    port_answers,
    publish_to_queue,
    publish_to_stream,
)
from tests.engine.connectors.support import make_table
from tests.engine.harness import read_lines

__all__ = ["kafka_broker"]  # the fixture, imported to be found by pytest

pytestmark = pytest.mark.spark

#: Records produced before the job starts, and while it is down after the kill.
BEFORE, AFTER = 300, 100
#: The most records one epoch reads from each source (where the connector has a limit).
BATCH = 150
#: The filter of every pipeline: ids with ``id % 7 = 3`` are dropped.
KEPT = [i for i in range(BEFORE + AFTER) if i % 7 != 3]
COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType()))
MQTT_URL = "tcp://127.0.0.1:1883"
#: ``<tenant>/<pipeline>`` of the job ``spate run`` starts for ``pipeline.sql``.
OWNER = "default/pipeline"


@dataclass
class Case:
    """A connector's table in the job and how the test feeds it."""

    name: str
    exactly_once: bool
    #: the WITH options of its source table
    options: dict[str, str]
    publish: Callable[[list[bytes]], None]
    #: the most records one epoch reads from it (None: all there are)
    batch: int | None = BATCH


def _records(ids: range) -> list[bytes]:
    return [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in ids]


def _with(options: dict[str, str]) -> str:
    return ", ".join(f"'{key}' = '{value}'" for key, value in options.items())


def _kafka(broker: Broker) -> Case:
    topic = broker.create_topic(3)

    def produce(values: list[bytes]) -> None:
        broker.produce(topic, [(i % 3, v, int(time.time() * 1000)) for i, v in
                               enumerate(values)])

    return Case("kafka", True, {"connector": "kafka", "bootstrap_servers": broker.address,
                                "topic": topic, "source.offset": "earliest",
                                "max_records_per_batch": str(BATCH)}, produce)


def _mqtt() -> tuple[Case, Callable[[], None]]:
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

    return Case("mqtt", False, options, produce), drop_session


def _nats() -> tuple[Case, Callable[[], None]]:
    stream: TestStream = create_stream("crash")
    options = {"connector": "nats", "servers": SERVERS, "nats.stream": stream.name,
               "max_messages_per_batch": str(BATCH)}
    return (Case("nats", True, options, lambda values: publish(stream.subject(), values)),
            lambda: delete_stream(stream))


def _amqp() -> pika.BlockingConnection:
    return pika.BlockingConnection(pika.ConnectionParameters(HOST, AMQP_PORT))


def _rabbitmq_queue() -> tuple[Case, Callable[[], None]]:
    queue = f"spate-test-{secrets.token_hex(6)}"
    with closing(_amqp()) as connection:
        connection.channel().queue_declare(queue, durable=True)

    def delete() -> None:
        with closing(_amqp()) as connection:
            connection.channel().queue_delete(queue)

    options = {"connector": "rabbitmq", "host": HOST, "mode": "queue", "queue": queue,
               "max_messages_per_batch": str(BATCH)}
    return (Case("rabbitmq_queue", False, options,
                 lambda values: publish_to_queue(queue, values)), delete)


def _rabbitmq_stream() -> tuple[Case, Callable[[], None]]:
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
    return (Case("rabbitmq_stream", True, options,
                 lambda values: publish_to_stream(stream, values)),
            lambda: asyncio.run(delete()))


def _redis(url: str, prefix: str) -> Case:
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
    return Case("redis", True, options, produce)


def _kinesis(server: KinesisServer) -> Case:
    stream = server.create_stream(shards=2)

    def produce(values: list[bytes]) -> None:
        server.put_raw(stream, values, [str(i) for i in range(len(values))])

    return Case("kinesis", True, {"connector": "kinesis",
                                  **server.options(stream, **{"source.offset": "earliest"})},
                produce, batch=None)


@dataclass
class CrashRun:
    """What the job wrote per connector, and whether the kill landed mid-stream."""

    cases: dict[str, Case]
    lines: dict[str, list[str]]
    killed_at_epoch: int | None
    stderr: str


def _out(workdir: Path, name: str) -> Path:
    return workdir / "out" / f"{name}.jsonl"


def _pipeline(cases: list[Case], workdir: Path) -> str:
    statements = []
    for case in cases:
        options = {"type": "source", "format": "json"} | case.options
        statements.append(
            f"CREATE TABLE src_{case.name} (id BIGINT NOT NULL, name TEXT) "
            f"WITH ({_with(options)});\n"
            f"CREATE TABLE out_{case.name} WITH (connector = 'single_file', type = 'sink', "
            f"format = 'json', path = '{_out(workdir, case.name)}');\n"
            f"INSERT INTO out_{case.name} SELECT id FROM src_{case.name} WHERE id % 7 <> 3;\n")
    return "".join(statements)


def _complete(workdir: Path, cases: list[Case]) -> bool:
    return all(set(_ids(read_lines(_out(workdir, c.name)))) >= set(KEPT) for c in cases)


def _ids(lines: list[str]) -> list[int]:
    return [json.loads(line)["id"] for line in lines]


@pytest.fixture(scope="module")
def crash_run(kafka_broker: Broker, redis_url: str,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[CrashRun]:
    workdir = tmp_path_factory.mktemp("broker-crash")
    (workdir / "out").mkdir()
    cleanups: list[Callable[[], None]] = []
    kinesis = serve_kinesis()
    prefix = f"spate-test-{secrets.token_hex(6)}:"
    try:
        cases = [_kafka(kafka_broker), _redis(redis_url, prefix), _kinesis(next(kinesis))]
        for make in (_mqtt, _nats, _rabbitmq_queue, _rabbitmq_stream):
            if make in (_rabbitmq_queue, _rabbitmq_stream) and not port_answers(
                    AMQP_PORT if make is _rabbitmq_queue else STREAM_PORT):
                continue
            case, cleanup = make()
            cases.append(case)
            cleanups.append(cleanup)
        for case in cases:
            case.publish(_records(range(BEFORE)))
        (workdir / "pipeline.sql").write_text(_pipeline(cases, workdir))

        first = spate_run(workdir, parallelism=1)
        deadline = time.monotonic() + 180
        while last_committed(workdir) is None and first.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        killed_at = last_committed(workdir)
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
        _, first_err = first.communicate(timeout=60)
        complete_at_kill = _complete(workdir, cases)

        for case in cases:
            case.publish(_records(range(BEFORE, BEFORE + AFTER)))
        second = spate_run(workdir, parallelism=2)
        deadline = time.monotonic() + 180
        while not _complete(workdir, cases) and second.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)  # a duplicate would show up in the next epochs
        if second.poll() is None:
            second.send_signal(signal.SIGTERM)  # a clean stop: the file sinks hold commits only
        _, second_err = second.communicate(timeout=120)
        yield CrashRun(
            cases={c.name: c for c in cases},
            lines={c.name: read_lines(_out(workdir, c.name)) for c in cases},
            killed_at_epoch=None if complete_at_kill else killed_at,
            stderr=(first_err + second_err).decode(errors="replace")[-4000:])
    finally:
        kinesis.close()
        client = redis.Redis.from_url(redis_url)
        keys = list(client.scan_iter(match=f"{prefix}*"))
        if keys:
            client.delete(*keys)
        client.close()
        for cleanup in cleanups:
            cleanup()


@pytest.mark.parametrize("name", ["kafka", "mqtt", "nats", "rabbitmq_queue", "rabbitmq_stream",
                                  "redis", "kinesis"])
def test_a_kill_mid_stream_and_a_restart_at_another_parallelism(crash_run: CrashRun,
                                                                name: str) -> None:
    if name not in crash_run.cases:
        pytest.skip(f"the {name} server does not answer here")
    assert crash_run.killed_at_epoch is not None, \
        f"the kill did not land mid-stream: {crash_run.stderr}"
    case = crash_run.cases[name]
    counts = Counter(_ids(crash_run.lines[name]))
    missing = sorted(set(KEPT) - set(counts))
    assert not missing, f"{name} lost {len(missing)} records, e.g. {missing[:5]}: " \
                        f"{crash_run.stderr}"
    assert set(counts) == set(KEPT)
    repeated = {i: n for i, n in counts.items() if n > 1}
    if case.exactly_once:
        assert not repeated, f"{name} wrote {len(repeated)} records twice, e.g. " \
                             f"{sorted(repeated)[:5]}"
        return
    # At least once: only the epoch in flight at the kill comes again, once.
    assert all(i < BEFORE for i in repeated), sorted(repeated)
    assert max(repeated.values(), default=1) <= 2
    assert case.batch is not None and len(repeated) <= case.batch, len(repeated)

