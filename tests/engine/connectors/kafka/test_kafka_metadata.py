"""A kafka source's METADATA FROM columns, end to end against the real broker."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from confluent_kafka import Producer
from pyspark.sql import SparkSession

from tests.engine.connectors.kafka.kafka_broker import Broker, kafka_broker
from tests.engine.harness import read_lines, run_pipeline

pytestmark = pytest.mark.e2e

__all__ = ["kafka_broker"]  # the fixture, imported to be found by pytest

BASE_MS = 1_700_000_000_000


def test_metadata_columns_carry_each_records_offset_partition_key_and_headers(
        spark: SparkSession, kafka_broker: Broker, tmp_path: Path) -> None:
    topic = kafka_broker.create_topic(2)
    producer = Producer({"bootstrap.servers": kafka_broker.address, "linger.ms": 0,
                         "batch.num.messages": 1})
    for i in range(6):
        headers = [("h", f"v{i}".encode()), ("h", b"\xff")] if i % 2 else None
        producer.produce(topic, json.dumps({"id": i}).encode(), key=f"k{i}".encode(),
                         partition=i % 2, timestamp=BASE_MS + i, headers=headers)
        producer.flush(30)
    out = tmp_path / "out.jsonl"
    sql = f"""
        CREATE TABLE src (
            id BIGINT,
            p INT METADATA FROM 'partition',
            o BIGINT METADATA FROM 'offset_id',
            t TEXT METADATA FROM 'topic',
            at TIMESTAMP METADATA FROM 'timestamp',
            k TEXT GENERATED ALWAYS AS (metadata('key')),
            raw_key BYTEA METADATA FROM 'key',
            hs ARRAY<STRUCT<key TEXT, value BYTEA>> METADATA FROM 'headers'
        ) WITH (connector = 'kafka', bootstrap_servers = '{kafka_broker.address}',
                topic = '{topic}', type = 'source', format = 'json',
                'source.offset' = 'earliest');
        CREATE TABLE out (id BIGINT, p INT, o BIGINT, t TEXT, at TIMESTAMP, k TEXT,
                          raw_key BYTEA, hs ARRAY<STRUCT<key TEXT, value BYTEA>>)
            WITH (connector = 'single_file', path = '{out}', type = 'sink', format = 'json');
        INSERT INTO out SELECT id, p, o, t, at, k, raw_key, hs FROM src;
    """
    run_pipeline(spark, sql, tmp_path, parallelism=2, stop_when=lambda: len(read_lines(out)) >= 6)
    rows = sorted((json.loads(line) for line in read_lines(out)), key=lambda r: r["id"])
    assert [r["id"] for r in rows] == list(range(6))
    for row in rows:
        i = row["id"]
        assert (row["p"], row["o"], row["t"], row["k"]) == (i % 2, i // 2, topic, f"k{i}")
        assert row["at"].startswith("2023-11-14T22:13:20.00" + str(i))
        assert base64.b64decode(row["raw_key"]) == f"k{i}".encode()
        expected = [{"key": "h", "value": f"v{i}".encode()}, {"key": "h", "value": b"\xff"}] \
            if i % 2 else []
        assert [{"key": h["key"], "value": base64.b64decode(h["value"])}
                for h in row["hs"] or []] == expected
