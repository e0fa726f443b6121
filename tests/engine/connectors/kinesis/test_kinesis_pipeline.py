"""Kinesis pipelines end to end on the engine, against moto's Kinesis server: a source
over several shards stopped and resumed exactly once, and a sink read back."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.engine.connectors.kinesis.kinesis_support import KinesisServer, serve_kinesis
from tests.engine.harness import read_lines, run_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.spark]


@pytest.fixture(scope="module")
def kinesis_server() -> Iterator[KinesisServer]:
    yield from serve_kinesis()


def _with(options: dict[str, str]) -> str:
    return ", ".join(f"'{key}' = '{value}'" for key, value in options.items())


def _lines_reach(path: Path, count: int) -> bool:
    return len(read_lines(path)) >= count


def test_source_stops_and_resumes_exactly_once(spark: SparkSession, tmp_path: Path,
                                               kinesis_server: KinesisServer) -> None:
    stream = kinesis_server.create_stream(shards=3)
    out = tmp_path / "out.jsonl"
    source = _with(kinesis_server.options(stream, **{"source.offset": "earliest"}))
    sql = f"""
CREATE TABLE events (id BIGINT NOT NULL, name TEXT)
WITH (connector = 'kinesis', type = 'source', format = 'json', {source});
CREATE TABLE out WITH (connector = 'single_file', type = 'sink', format = 'json',
                       path = '{out}');
INSERT INTO out SELECT id, upper(name) AS name FROM events;
"""
    rows: list[dict[str, Any]] = [{"id": i, "name": f"n{i}"} for i in range(60)]
    kinesis_server.put_json(stream, rows[:30])
    run_pipeline(spark, sql, tmp_path, parallelism=2, stop_when=lambda: _lines_reach(out, 30))
    first = read_lines(out)
    kinesis_server.put_json(stream, rows[30:])
    run_pipeline(spark, sql, tmp_path, parallelism=2, stop_when=lambda: _lines_reach(out, 60))
    expected = sorted(json.dumps({"id": r["id"], "name": r["name"].upper()},
                                 separators=(",", ":")) for r in rows)
    assert len(first) == 30
    assert read_lines(out) == expected


def test_sinks_put_every_row_keyed_by_key_field_or_hash(
        spark: SparkSession, tmp_path: Path, kinesis_server: KinesisServer) -> None:
    keyed, hashed = kinesis_server.create_stream(shards=2), kinesis_server.create_stream(1)
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": i, "city": f"c{i % 7}"}) + "\n"
                              for i in range(1200)))
    sql = f"""
CREATE TABLE rows (id BIGINT, city TEXT)
WITH (connector = 'single_file', type = 'source', format = 'json', path = '{source}');
CREATE TABLE by_city WITH (connector = 'kinesis', type = 'sink', format = 'json',
                           {_with(kinesis_server.options(keyed, key_field="city"))});
CREATE TABLE spread WITH (connector = 'kinesis', type = 'sink', format = 'json',
                          {_with(kinesis_server.options(hashed))});
INSERT INTO by_city SELECT id, city FROM rows;
INSERT INTO spread SELECT id FROM rows WHERE id < 3;
"""
    run_pipeline(spark, sql, tmp_path)
    records = kinesis_server.read_all(keyed)
    decoded = [json.loads(r["Data"]) for r in records]
    assert sorted(d["id"] for d in decoded) == list(range(1200))
    assert all(r["PartitionKey"] == d["city"] for r, d in zip(records, decoded, strict=True))
    keys = {r["Data"]: r["PartitionKey"] for r in kinesis_server.read_all(hashed)}
    assert keys == {f'{{"id":{i}}}'.encode(): hashlib.md5(f'{{"id":{i}}}'.encode()).hexdigest()
                    for i in range(3)}
