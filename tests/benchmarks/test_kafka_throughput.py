"""Kafka to Kafka: Spate's pipelines against the broker's own ceiling, in one run.

* stateless: ``SELECT ... WHERE amount >= 50`` from one topic into another
  (an exactly-once sink: one transaction per epoch);
* window: ``count(*) ... GROUP BY key, TUMBLE(10 s)`` over 1,000 keys, the
  event time being each record's Kafka timestamp.

The ceiling is what a bare confluent-kafka loop does with the same topic on
the same broker: consume every record, decode it, keep those the filter keeps
and produce them (no transactions): the least any Kafka-to-Kafka job does.
Each figure is the best of ``REPEATS`` runs, alternating; the input is
produced once.  Results go to ``docs/benchmarks/results.json`` under
``kafka``; BENCHMARKS.md quotes them.  The tests check that every run read all
its input; they assert nothing about speed.

``SPATE_TEST_KAFKA=host:port`` runs them against a real Kafka; otherwise the
session's tansu broker (in memory, on this machine's cores too) is used.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from pyspark.sql import SparkSession

from tests.benchmarks.workloads import Timing, best_run, save_result
from tests.engine.connectors.kafka.kafka_broker import Broker, kafka_broker
from tests.engine.harness import run_pipeline

__all__ = ["kafka_broker"]  # the fixture, imported to be used here

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.e2e]

#: Input records; ``SPATE_BENCH_KAFKA_EVENTS`` changes it (BENCHMARKS.md quotes 100,000 and
#: 300,000: tansu's in-memory engine slows down as its partitions grow).
EVENTS = int(os.environ.get("SPATE_BENCH_KAFKA_EVENTS", "100000"))
PARTITIONS = 3
KEYS = 1_000
REPEATS = 2
#: Event time: 100 events per second of it, so the input spans 100 ten-second windows.
BASE_MS = 1_767_225_600_000
EVENT_GAP_MS = 10
#: The stateless filter keeps half the records.
THRESHOLD = 50


def _record(i: int) -> bytes:
    return json.dumps({"id": i, "key": i % KEYS, "amount": i % 100}).encode()


@pytest.fixture(scope="module")
def source_topic(kafka_broker: Broker) -> str:
    topic = kafka_broker.create_topic(PARTITIONS)
    kafka_broker.produce(topic, [(i % PARTITIONS, _record(i), BASE_MS + i * EVENT_GAP_MS)
                                 for i in range(EVENTS)])
    return topic


def _tables(broker: Broker, source: str, sink: str, sink_columns: str) -> str:
    return f"""
CREATE TABLE events (id BIGINT, key BIGINT, amount BIGINT)
WITH (connector = 'kafka', bootstrap_servers = '{broker.address}', topic = '{source}',
      type = 'source', format = 'json', 'source.offset' = 'earliest');
CREATE TABLE out ({sink_columns})
WITH (connector = 'kafka', bootstrap_servers = '{broker.address}', topic = '{sink}',
      type = 'sink', format = 'json');
"""


def stateless_sql(broker: Broker, source: str, sink: str) -> str:
    return _tables(broker, source, sink, "id BIGINT, key BIGINT, amount BIGINT") + f"""
INSERT INTO out SELECT id, key, amount FROM events WHERE amount >= {THRESHOLD};
"""


def window_sql(broker: Broker, source: str, sink: str) -> str:
    return _tables(broker, source, sink, "key BIGINT, window_end TIMESTAMP, n BIGINT") + """
INSERT INTO out
SELECT key, w.end AS window_end, n
FROM (SELECT key, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n
      FROM events GROUP BY 1, 2);
"""


def run_spate_kafka(spark: SparkSession, sql: str) -> Timing:
    """Run ``sql`` until it has read every input record."""
    reports: list = []
    with tempfile.TemporaryDirectory(prefix="spate-kafka-bench-") as work:
        started = time.perf_counter()
        run_pipeline(spark, sql, Path(work), parallelism=PARTITIONS, reports=reports,
                     stop_when=lambda: sum(r.rows_in for r in reports) >= EVENTS,
                     timeout_s=900)
        seconds = time.perf_counter() - started
    return Timing(seconds, EVENTS, sum(r.rows_in for r in reports))


def run_bare_loop(broker: Broker, source: str) -> Timing:
    """The broker's ceiling: consume, decode, filter, produce, in one Python loop."""
    sink = broker.create_topic(PARTITIONS)
    consumer = Consumer({"bootstrap.servers": broker.address,
                         "group.id": f"bench-{secrets.token_hex(4)}",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": broker.address, "linger.ms": 5})
    started = time.perf_counter()
    consumer.assign([TopicPartition(source, p, 0) for p in range(PARTITIONS)])
    read = 0
    try:
        while read < EVENTS:
            for message in consumer.consume(10_000, timeout=0.5):
                if message.error() is not None:
                    continue
                read += 1
                if json.loads(message.value())["amount"] >= THRESHOLD:
                    producer.produce(sink, message.value())
            producer.poll(0)
        assert producer.flush(120) == 0
    finally:
        consumer.close()
    return Timing(time.perf_counter() - started, EVENTS, read)


def test_kafka_to_kafka_against_the_brokers_ceiling(spark: SparkSession, kafka_broker: Broker,
                                                    source_topic: str) -> None:
    # Warm-up: Spark's JIT and Python workers, the broker's first fetches.
    run_spate_kafka(spark, stateless_sql(kafka_broker, source_topic,
                                         kafka_broker.create_topic(PARTITIONS)))
    bare, stateless, window = [], [], []
    for _ in range(REPEATS):
        bare.append(run_bare_loop(kafka_broker, source_topic))
        stateless.append(run_spate_kafka(spark, stateless_sql(
            kafka_broker, source_topic, kafka_broker.create_topic(PARTITIONS))))
        window.append(run_spate_kafka(spark, window_sql(
            kafka_broker, source_topic, kafka_broker.create_topic(PARTITIONS))))
    ceiling = best_run(bare, EVENTS)
    result = {"events": EVENTS, "partitions": PARTITIONS, "keys": KEYS,
              "broker": "tansu (in memory)" if kafka_broker.tansu else "Apache Kafka",
              "bare_loop_events_per_s": ceiling.events_per_s}
    for name, runs in (("stateless", stateless), ("window", window)):
        best = best_run(runs, EVENTS)
        result[f"{name}_events_per_s"] = best.events_per_s
        result[f"{name}_over_ceiling"] = best.events_per_s / ceiling.events_per_s
        print(f"{name}: Spate {best.events_per_s:,.0f} ev/s, bare loop "
              f"{ceiling.events_per_s:,.0f} ev/s, x{result[f'{name}_over_ceiling']:.2f}")
    save_result("kafka", result)
