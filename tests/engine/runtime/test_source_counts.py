"""A stateless pipeline's rows in and end of input come from its sources' offsets
(nothing counts them row by row): the counts must equal what was read, over
several epochs, two sources, and a resume from the state store with a new
checkpoint folder (whose first batch starts at the stored offsets)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.engine.runtime.reports import EpochReport
from tests.engine.harness import read_lines, run_pipeline

pytestmark = pytest.mark.spark

PIPELINE = """
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '1000', runtime = '6',
    rate_limited = 'false', max_events_per_batch = '1000',
    'nexmark.base_time_ms' = '1700000000000');
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '1000000000',
    message_count = '1400');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
    type = 'sink');
INSERT INTO out SELECT bid.auction AS n FROM nexmark WHERE bid IS NOT NULL;
INSERT INTO out SELECT counter AS n FROM ticks;
"""


def test_rows_in_and_the_end_come_from_offsets_across_a_resume(spark: SparkSession,
                                                                tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    sql = PIPELINE.format(out=out)
    reports: list[EpochReport] = []
    run_pipeline(spark, sql, tmp_path, parallelism=2, reports=reports, stop_after_epochs=2)
    assert not reports[-1].finished, "the first run should stop midway"
    shutil.rmtree(tmp_path / "checkpoint")  # the second run starts from the stored offsets
    counters = run_pipeline(spark, sql, tmp_path, parallelism=2, reports=reports)
    assert reports[-1].finished
    # 6,000 Nexmark events and 1,400 counters from the impulse source's 2 subtasks
    assert counters["rows_in"] == sum(r.rows_in for r in reports) == 6_000 + 1_400
    assert counters["rows_out"] == len(read_lines(out))
    per_source = {}
    for report in reports:
        for operator in report.operators:
            if operator.kind == "source":
                per_source[operator.operator] = (per_source.get(operator.operator, 0)
                                                 + (operator.rows_out or 0))
    assert per_source == {"source:nexmark": 6_000, "source:ticks": 1_400}


def test_bytes_read_and_written_are_the_files_bytes_across_a_resume(spark: SparkSession,
                                                                    tmp_path: Path) -> None:
    source, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(f'{{"n": {n}, "pad": "{"x" * (n % 7)}"}}\n' for n in range(2500)))
    sql = f"""
    CREATE TABLE lines (n BIGINT, pad TEXT) WITH (connector = 'single_file',
        path = '{source}', format = 'json', type = 'source', max_lines_per_batch = '1000');
    CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
        type = 'sink');
    INSERT INTO out SELECT n FROM lines WHERE n % 2 = 0;
    """
    reports: list[EpochReport] = []
    run_pipeline(spark, sql, tmp_path, reports=reports, stop_after_epochs=1)
    assert not reports[-1].finished, "the first run should stop midway"
    shutil.rmtree(tmp_path / "checkpoint")  # the second run starts from the stored offsets
    run_pipeline(spark, sql, tmp_path, reports=reports)
    assert reports[-1].finished and len(reports) >= 3
    assert sum(report.bytes_in for report in reports) == source.stat().st_size
    assert sum(report.bytes_out for report in reports) == out.stat().st_size > 0


def test_a_stateful_pipeline_reports_the_state_the_store_holds(spark: SparkSession,
                                                                tmp_path: Path) -> None:
    sql = f"""
    CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '1000', runtime = '6',
        rate_limited = 'false', max_events_per_batch = '1000',
        'nexmark.base_time_ms' = '1700000000000');
    CREATE TABLE out WITH (connector = 'single_file', path = '{tmp_path / "out.jsonl"}',
        format = 'json', type = 'sink');
    INSERT INTO out
    SELECT bucket, w.end AS window_end, n
    FROM (SELECT bid.auction % 500 AS bucket, TUMBLE(INTERVAL '10' SECOND) AS w,
                 count(*) AS n
          FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2);
    """
    reports: list[EpochReport] = []
    run_pipeline(spark, sql, tmp_path, reports=reports, stop_after_epochs=2)
    # Measured at the first commit (then every few minutes): the open windows' counts.
    assert reports[0].state_held_bytes > 0
    assert all(report.state_held_bytes == reports[0].state_held_bytes for report in reports)
