"""Time per epoch of the message-broker sinks, against a Spark user's job and a bare loop.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_broker_sinks.py -s``

Each sink (MQTT at QoS 1, a RabbitMQ queue with publisher confirms, a NATS
JetStream stream, a Redis ``string`` target, a webhook receiving JSON arrays of
100 rows: a Starlette server in a process of its own, answering at once or 5 ms
later as a receiver across a network would) writes epochs of 20,000 JSON
records from a cached Spark DataFrame of two partitions: the time of
``write_epoch``. References in the same run, on the same records:

- **spark**: what a Spark user writes without Spate, ``foreachPartition`` with
  the same client library publishing each task's rows the same way (the same
  acknowledgements waited for);
- **loop**: one client on the driver publishing the records, already encoded
  (the broker's own ceiling for one connection, no Spark at all).

Every server is the local one the tests use. Written to ``results.json`` under
``broker_sinks``; nothing is asserted.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import paho.mqtt.client as paho
import pika
import pytest
import redis
from paho.mqtt.enums import CallbackAPIVersion
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef
from tests.benchmarks.workloads import epoch_times, load_results, save_result
from tests.engine.connectors.support import make_table
from tests.ports import free_port

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.e2e, pytest.mark.timeout(3600)]

ROWS = 20_000
PARTITIONS = 2
WARM, EPOCHS = 2, 5
SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("name", T.StringType()),
                       T.StructField("amount", T.LongType())])
COLUMNS = tuple(ColumnDef(f.name, f.dataType) for f in SCHEMA.fields)
RESULTS: dict[str, Any] = load_results().get("broker_sinks", {})


@pytest.fixture(scope="module")
def rows(spark: SparkSession) -> Iterator[DataFrame]:
    frame = spark.range(0, ROWS, numPartitions=PARTITIONS).selectExpr(
        "id", "concat('name-', id) AS name", "id % 997 AS amount").cache()
    frame.count()
    yield frame
    frame.unpersist()


def _payloads(frame: DataFrame) -> list[bytes]:
    return [json.dumps(r.asDict(), separators=(",", ":")).encode() for r in frame.collect()]


def _median_ms(action: Callable[[int], Any]) -> float:
    return statistics.median(epoch_times(action, EPOCHS, WARM))


def _record(name: str, timings: dict[str, float]) -> None:
    row = {"rows": ROWS, "partitions": PARTITIONS, "median_ms": timings,
           "spate_over_spark": timings["spark"] / timings["spate"],
           "spate_over_loop": timings["loop"] / timings["spate"]}
    print(f"{name}: " + ", ".join(f"{k} {v:.0f} ms" for k, v in timings.items())
          + f" (Spate at {row['spate_over_spark']:.2f}x of the Spark job's rate)", flush=True)
    RESULTS[name] = row
    save_result("broker_sinks", RESULTS)


def _sink(connector: str, **options: str) -> Any:
    table = make_table(connector, "sink", COLUMNS, name="out", format="json", type="sink",
                       **options)
    sink = CONNECTORS[connector].create_sink(table, SCHEMA)
    sink.open(None)
    return sink


# -- MQTT -----------------------------------------------------------------------------


def _mqtt_publish(payloads: list[bytes], topic: str) -> None:
    client = paho.Client(CallbackAPIVersion.VERSION2, protocol=paho.MQTTv5)
    client.connect("127.0.0.1", 1883)
    client.loop_start()
    sent = [client.publish(topic, p, qos=1) for p in payloads]
    for info in sent:
        info.wait_for_publish(60)
    client.disconnect()
    client.loop_stop()


def _mqtt_partition(topic: str) -> Callable[[Iterator[Any]], None]:
    def publish(part: Iterator[Any]) -> None:
        _mqtt_publish([json.dumps(r.asDict(), separators=(",", ":")).encode() for r in part],
                      topic)
    return publish


def test_mqtt(rows: DataFrame) -> None:
    topic = f"spate-bench/{uuid.uuid4().hex}"
    sink = _sink("mqtt", url="tcp://127.0.0.1:1883", topic=topic, qos="1")
    payloads = _payloads(rows)
    _record("mqtt", {
        "spate": _median_ms(lambda epoch: sink.write_epoch(epoch, rows)),
        "spark": _median_ms(lambda _: rows.foreachPartition(_mqtt_partition(topic))),
        "loop": _median_ms(lambda _: _mqtt_publish(payloads, topic))})
    sink.close()


# -- RabbitMQ -------------------------------------------------------------------------


def _rabbit_publish(payloads: list[bytes], queue: str) -> None:
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", 5672))
    channel = connection.channel()
    channel.confirm_delivery()
    persistent = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent)
    for payload in payloads:
        channel.basic_publish("", queue, payload, persistent, mandatory=True)
    connection.close()


def _rabbit_partition(queue: str) -> Callable[[Iterator[Any]], None]:
    def publish(part: Iterator[Any]) -> None:
        _rabbit_publish([json.dumps(r.asDict(), separators=(",", ":")).encode()
                         for r in part], queue)
    return publish


def test_rabbitmq_queue(rows: DataFrame) -> None:
    queue = f"spate-bench-{uuid.uuid4().hex[:8]}"
    connection = pika.BlockingConnection(pika.ConnectionParameters("127.0.0.1", 5672))
    connection.channel().queue_declare(queue, arguments={"x-max-length": 1000})
    sink = _sink("rabbitmq", mode="queue", host="127.0.0.1", routing_key=queue)
    payloads = _payloads(rows)
    try:
        _record("rabbitmq_queue", {
            "spate": _median_ms(lambda epoch: sink.write_epoch(epoch, rows)),
            "spark": _median_ms(lambda _: rows.foreachPartition(_rabbit_partition(queue))),
            "loop": _median_ms(lambda _: _rabbit_publish(payloads, queue))})
    finally:
        sink.close()
        connection.channel().queue_delete(queue)
        connection.close()


# -- NATS JetStream ---------------------------------------------------------------------


async def _nats_publish(payloads: list[bytes], subject: str, stream: str) -> None:
    import nats

    client = await nats.connect("nats://127.0.0.1:4222")
    js = client.jetstream()
    window = asyncio.Semaphore(256)

    async def one(index: int, payload: bytes) -> None:
        async with window:
            await js.publish(subject, payload, stream=stream,
                             headers={"Nats-Msg-Id": f"{uuid.uuid4().hex}-{index}"})

    await asyncio.gather(*(one(i, p) for i, p in enumerate(payloads)))
    await client.close()


def _nats_partition(subject: str, stream: str) -> Callable[[Iterator[Any]], None]:
    def publish(part: Iterator[Any]) -> None:
        asyncio.run(_nats_publish([json.dumps(r.asDict(), separators=(",", ":")).encode()
                                   for r in part], subject, stream))
    return publish


async def _nats_stream(name: str, create: bool) -> None:
    import nats

    client = await nats.connect("nats://127.0.0.1:4222")
    js = client.jetstream()
    if create:
        await js.add_stream(name=name, subjects=[f"{name}.>"], max_msgs=1000)
    else:
        await js.delete_stream(name)
    await client.close()


def test_nats_jetstream(rows: DataFrame) -> None:
    stream = f"spate_bench_{uuid.uuid4().hex[:8]}"
    subject = f"{stream}.out"
    asyncio.run(_nats_stream(stream, create=True))
    sink = _sink("nats", servers="nats://127.0.0.1:4222", nats__subject=subject,
                 nats__stream=stream)
    payloads = _payloads(rows)
    try:
        _record("nats_jetstream", {
            "spate": _median_ms(lambda epoch: sink.write_epoch(epoch, rows)),
            "spark": _median_ms(lambda _: rows.foreachPartition(
                _nats_partition(subject, stream))),
            "loop": _median_ms(lambda _: asyncio.run(_nats_publish(payloads, subject,
                                                                   stream)))})
    finally:
        sink.close()
        asyncio.run(_nats_stream(stream, create=False))


# -- Redis ------------------------------------------------------------------------------


def _redis_set(records: list[tuple[str, bytes]]) -> None:
    client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
    for first in range(0, len(records), 5_000):
        pipe = client.pipeline(transaction=False)
        for key, payload in records[first:first + 5_000]:
            pipe.set(key, payload)
        pipe.execute()
    client.close()


def _redis_partition(prefix: str) -> Callable[[Iterator[Any]], None]:
    def write(part: Iterator[Any]) -> None:
        _redis_set([(f"{prefix}{r['id']}", json.dumps(r.asDict(), separators=(",", ":"))
                     .encode()) for r in part])
    return write


def test_redis_string(rows: DataFrame) -> None:
    prefix = f"spate-bench:{uuid.uuid4().hex[:8]}:"
    sink = _sink("redis", address="redis://127.0.0.1:6379/0", target="string",
                 target__key_prefix=prefix, target__key_column="id")
    records = [(f"{prefix}{r['id']}", json.dumps(r.asDict(), separators=(",", ":")).encode())
               for r in rows.collect()]
    try:
        _record("redis_string", {
            "spate": _median_ms(lambda epoch: sink.write_epoch(epoch, rows)),
            "spark": _median_ms(lambda _: rows.foreachPartition(_redis_partition(prefix))),
            "loop": _median_ms(lambda _: _redis_set(records))})
    finally:
        sink.close()
        client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
        for key in client.scan_iter(f"{prefix}*", count=5_000):
            client.delete(key)
        client.close()


# -- webhook --------------------------------------------------------------------------

#: Rows per request: 20,000 rows make 200 requests an epoch.
WEBHOOK_ROWS_PER_REQUEST = 100


@pytest.fixture(scope="module")
def webhook_url() -> Iterator[str]:
    """The receiver in a process of its own (``webhook_receiver``)."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "tests.benchmarks.webhook_receiver:app",
         "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=Path(__file__).resolve().parents[2])
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(f"{base}/count", timeout=1)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the webhook receiver did not start"
                time.sleep(0.1)
        yield f"{base}/hook"
    finally:
        server.terminate()
        server.wait(10)


def _webhook_post(payloads: list[bytes], url: str) -> None:
    """What a user's client does: sorted rows, a JSON array of 100 per request."""
    with httpx.Client(timeout=30) as client:
        for first in range(0, len(payloads), WEBHOOK_ROWS_PER_REQUEST):
            body = b"[" + b",".join(payloads[first:first + WEBHOOK_ROWS_PER_REQUEST]) + b"]"
            client.post(url, content=body,
                        headers={"Content-Type": "application/json"}).raise_for_status()


def _webhook_partition(url: str) -> Callable[[Iterator[Any]], None]:
    def post(part: Iterator[Any]) -> None:
        _webhook_post(sorted(json.dumps(r.asDict(), separators=(",", ":")).encode()
                             for r in part), url)
    return post


@pytest.mark.parametrize("route", ["hook", "remote"])
def test_webhook(rows: DataFrame, webhook_url: str, route: str) -> None:
    """``hook``: a receiver on this machine, answering at once (its own CPU is the limit);
    ``remote``: one that answers 5 ms later, as across a network."""
    url = webhook_url.removesuffix("/hook") + f"/{route}"
    before = _received(webhook_url)
    sink = _sink("webhook", endpoint=url, max_rows_per_request=str(WEBHOOK_ROWS_PER_REQUEST))
    payloads = sorted(_payloads(rows))
    _record("webhook" if route == "hook" else "webhook_5ms_away", {
        "spate": _median_ms(lambda epoch: sink.write_epoch(epoch, rows)),
        "spark": _median_ms(lambda _: rows.foreachPartition(_webhook_partition(url))),
        "loop": _median_ms(lambda _: _webhook_post(payloads, url))})
    sink.close()
    received = _received(webhook_url) - before
    assert received == ROWS * (WARM + EPOCHS) * 3, f"the receiver got {received} rows"


def _received(webhook_url: str) -> int:
    return int(httpx.get(webhook_url.removesuffix("/hook") + "/count").text)
