"""SQL pipelines over the real NATS server on 127.0.0.1:4222: a JetStream source that
stops and resumes from its state store, a core subject source, a JetStream sink."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.engine.connectors.nats.nats_support import (
    SERVERS,
    TestStream,
    js_stream,
    publish,
    publish_core,
    stream_payloads,
    unique,
)
from tests.engine.harness import read_lines, run_pipeline

__all__ = ["js_stream"]  # the fixture, imported to be used here

pytestmark = pytest.mark.spark


def _records(ids: range) -> list[bytes]:
    return [json.dumps({"id": i, "name": f"n{i}"}).encode() for i in ids]


def _lines(ids: range) -> list[str]:
    return sorted(json.dumps({"id": i, "name": f"n{i}"}, separators=(",", ":")) for i in ids)


def test_a_jetstream_source_resumes_with_every_message_exactly_once(
        spark: SparkSession, tmp_path: Path, js_stream: TestStream) -> None:
    out = tmp_path / "out.jsonl"
    sql = f"""
    CREATE TABLE events (id BIGINT NOT NULL, name TEXT) WITH (connector = 'nats',
        type = 'source', servers = '{SERVERS}', 'nats.stream' = '{js_stream.name}',
        format = 'json', max_messages_per_batch = '3');
    CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
        type = 'sink');
    INSERT INTO out SELECT id, name FROM events;
    """
    publish(js_stream.subject(), _records(range(5)))
    run_pipeline(spark, sql, tmp_path, stop_when=lambda: len(read_lines(out)) >= 5)
    assert read_lines(out) == _lines(range(5))
    publish(js_stream.subject(), _records(range(5, 12)))
    shutil.rmtree(tmp_path / "checkpoint")  # resume from the offsets the state store kept
    run_pipeline(spark, sql, tmp_path, stop_when=lambda: len(read_lines(out)) >= 12)
    assert read_lines(out) == _lines(range(12))


def test_a_core_subject_source_receives_what_is_published_while_it_runs(
        spark: SparkSession, tmp_path: Path) -> None:
    out, subject = tmp_path / "out.jsonl", unique("core")
    sql = f"""
    CREATE TABLE events WITH (connector = 'nats', type = 'source', servers = '{SERVERS}',
        'nats.subject' = '{subject}', format = 'raw_string');
    CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
        type = 'sink');
    INSERT INTO out SELECT value FROM events;
    """
    stop = threading.Event()

    def keep_publishing() -> None:
        count = 0
        while not stop.wait(0.1):
            publish_core(subject, [f"m{count:05d}".encode()])
            count += 1

    publisher = threading.Thread(target=keep_publishing, daemon=True)
    publisher.start()
    try:
        run_pipeline(spark, sql, tmp_path, stop_when=lambda: len(read_lines(out)) >= 3)
    finally:
        stop.set()
        publisher.join()
    values = [json.loads(line)["value"] for line in out.read_text().splitlines()]
    assert len(values) >= 3 and values == sorted(set(values))  # in order, none twice
    assert all(v.startswith("m") and len(v) == 6 for v in values)


def test_a_pipeline_writes_each_row_once_into_a_jetstream_sink(
        spark: SparkSession, tmp_path: Path, js_stream: TestStream) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text("".join(line + "\n" for line in _lines(range(6))))
    sql = f"""
    CREATE TABLE lines (id BIGINT, name TEXT) WITH (connector = 'single_file',
        path = '{source}', format = 'json', type = 'source', max_lines_per_batch = '4');
    CREATE TABLE out WITH (connector = 'nats', type = 'sink', servers = '{SERVERS}',
        'nats.subject' = '{js_stream.subject("out")}', 'nats.stream' = '{js_stream.name}',
        format = 'json');
    INSERT INTO out SELECT id * 10 AS id, name FROM lines;
    """
    run_pipeline(spark, sql, tmp_path)
    written = [json.loads(p) for p in stream_payloads(js_stream)]
    rows = [{"id": 10 * i, "name": f"n{i}"} for i in range(6)]
    # each row once, epoch after epoch (4 lines, then 2); within an epoch the tasks
    # publish side by side
    assert [sorted(part, key=lambda r: r["id"]) for part in (written[:4], written[4:])] \
        == [rows[:4], rows[4:]]
