"""The updating aggregate in the runner: flush intervals, updating_ttl expiry, and
append-only and updating queries sharing a debezium_json sink."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.engine.harness import run_pipeline

pytestmark = pytest.mark.spark

SOURCE = """
CREATE TABLE t (k TEXT, v BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{dir}/in.jsonl', format = 'json', type = 'source',
      max_lines_per_batch = '2');
CREATE TABLE out WITH (connector = 'single_file', path = '{dir}/out.jsonl',
                       format = 'debezium_json', type = 'sink');
"""


def _write(workdir: Path, rows: list[tuple[str, int, int]]) -> None:
    lines = [json.dumps({"k": k, "v": v, "ts": f"2024-01-01T00:{s // 60:02d}:{s % 60:02d}Z"})
             for k, v, s in rows]
    (workdir / "in.jsonl").write_text("\n".join(lines) + "\n")


def _out(workdir: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (workdir / "out.jsonl").read_text().splitlines()]


def test_a_long_flush_interval_merges_changes_until_the_end(spark: SparkSession,
                                                            tmp_path: Path) -> None:
    _write(tmp_path, [("a", 1, 0), ("b", 2, 1), ("a", 3, 2), ("b", 4, 3), ("a", 5, 4)])
    sql = SOURCE.format(dir=tmp_path) + "INSERT INTO out SELECT k, sum(v) AS s FROM t GROUP BY k;"
    run_pipeline(spark, sql, tmp_path, update_flush_interval_ms=3_600_000)
    # the second epoch flushes (the first with a clock), the rest merge until the end
    assert sorted(_out(tmp_path), key=json.dumps) == sorted([
        {"before": None, "after": {"k": "a", "s": 4}, "op": "c"},
        {"before": None, "after": {"k": "b", "s": 6}, "op": "c"},
        {"before": {"k": "a", "s": 4}, "after": {"k": "a", "s": 9}, "op": "u"},
    ], key=json.dumps)


def test_keys_idle_for_updating_ttl_are_withdrawn(spark: SparkSession, tmp_path: Path) -> None:
    # seconds of event time: 'a' is last seen at 1, then time moves to 100 (the
    # watermark to 99) while input goes on
    _write(tmp_path, [("a", 1, 0), ("a", 2, 1), ("b", 3, 50), ("b", 4, 100), ("b", 5, 101)])
    sql = (SOURCE.format(dir=tmp_path) + "SET updating_ttl = INTERVAL '30' SECOND;\n"
           "INSERT INTO out SELECT k, count(*) AS n FROM t GROUP BY k;")
    run_pipeline(spark, sql, tmp_path, update_flush_interval_ms=0)
    changes = _out(tmp_path)
    assert {"before": {"k": "a", "n": 2}, "after": None, "op": "d"} in changes
    assert changes[-1] == {"before": {"k": "b", "n": 2}, "after": {"k": "b", "n": 3}, "op": "u"}


def test_append_only_and_updating_queries_share_a_sink(spark: SparkSession,
                                                       tmp_path: Path) -> None:
    _write(tmp_path, [("a", 1, 0), ("b", 2, 1), ("a", 7, 2)])
    sql = (SOURCE.format(dir=tmp_path)
           + "INSERT INTO out SELECT k, count(*) AS v FROM t GROUP BY k;\n"
           + "INSERT INTO out SELECT k, v FROM t WHERE v > 5;")
    run_pipeline(spark, sql, tmp_path, update_flush_interval_ms=0)
    assert sorted(_out(tmp_path), key=json.dumps) == sorted([
        {"before": None, "after": {"k": "a", "v": 1}, "op": "c"},
        {"before": None, "after": {"k": "b", "v": 1}, "op": "c"},
        {"before": {"k": "a", "v": 1}, "after": {"k": "a", "v": 2}, "op": "u"},
        {"before": None, "after": {"k": "a", "v": 7}, "op": "c"},
    ], key=json.dumps)


def test_array_agg_keeps_decimals_exact(spark: SparkSession, tmp_path: Path) -> None:
    """An updating array_agg of DECIMALs passes through state and comes out as the
    declared DECIMALs, every digit kept (2^64 - 1 is not a double)."""
    lines = ['{"k": "a", "v": 18446744073709551615}', '{"k": "a", "v": 0}',
             '{"k": "b", "v": 9007199254740993}']
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    sql = f"""
    CREATE TABLE t (k TEXT, v BIGINT UNSIGNED) WITH (connector = 'single_file',
      path = '{tmp_path}/in.jsonl', format = 'json', type = 'source',
      max_lines_per_batch = '1');
    CREATE TABLE out WITH (connector = 'single_file', path = '{tmp_path}/out.jsonl',
      format = 'debezium_json', type = 'sink', 'json.decimal_encoding' = 'number');
    INSERT INTO out SELECT k, array_agg(v) AS vs FROM t GROUP BY k;"""
    run_pipeline(spark, sql, tmp_path, update_flush_interval_ms=0)
    changes = _out(tmp_path)
    for change in changes:  # array_agg's order is not specified
        for image in (change["before"], change["after"]):
            if image is not None:
                image["vs"].sort()
    assert sorted(changes, key=json.dumps) == sorted([
        {"before": None, "after": {"k": "a", "vs": [18446744073709551615]}, "op": "c"},
        {"before": {"k": "a", "vs": [18446744073709551615]},
         "after": {"k": "a", "vs": [0, 18446744073709551615]}, "op": "u"},
        {"before": None, "after": {"k": "b", "vs": [9007199254740993]}, "op": "c"},
    ], key=json.dumps)
