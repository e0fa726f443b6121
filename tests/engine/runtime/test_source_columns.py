"""A source's event time and watermark columns: a watermark that trails the event time
by a fixed interval is computed in microseconds, with the values Spark's interval
arithmetic gives; any other watermark expression is Spark's own."""

from __future__ import annotations

import datetime as dt

import pytest
from pyspark.sql import SparkSession

from spate.engine.planner import plan_pipeline
from spate.engine.planner.catalog import watermark_delay_us
from spate.engine.planner.plan import EVENT_TIME, WATERMARK
from spate.engine.runtime.sources import (
    EpochSources,
    SourceColumns,
    SourceMetrics,
    _tagged_union,
)
from tests.engine.harness import spark_jobs

UTC = dt.UTC
SECOND = 1_000_000


@pytest.mark.parametrize("event_time, watermark, delay", [
    ("`ts`", "ts - INTERVAL '1' SECOND", SECOND),
    ("`ts`", "`ts`", 0),
    ("`_spate_timestamp`", "`_spate_timestamp` - INTERVAL 1 SECOND", SECOND),
    ("`ts`", "TS - INTERVAL '2 minutes'", 120 * SECOND),
    ("`ts`", "ts - INTERVAL '250' MILLISECOND", 250_000),
    # not a fixed delay of whole units behind the event time: Spark computes these
    ("`ts`", "ts - INTERVAL '1.5' SECOND", None),
    ("`ts`", "ts + INTERVAL '1' SECOND", None),
    ("`ts`", "ts - INTERVAL '1' MONTH", None),
    ("`ts`", "other - INTERVAL '1' SECOND", None),
    ("`ts`", "date_trunc('MINUTE', ts)", None),
])
def test_a_watermarks_fixed_delay(event_time: str, watermark: str, delay: int | None) -> None:
    assert watermark_delay_us(event_time, watermark) == delay


@pytest.mark.spark
def test_fixed_and_other_watermarks_give_sparks_values(spark: SparkSession) -> None:
    plan = plan_pipeline("""
CREATE TABLE fixed (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)
WITH (connector = 'single_file', path = 'a.jsonl', format = 'json', type = 'source');
CREATE TABLE other (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1.5' SECOND)
WITH (connector = 'single_file', path = 'b.jsonl', format = 'json', type = 'source');
SELECT k FROM fixed UNION ALL SELECT k FROM other;
""", check_inputs=False)
    columns = SourceColumns(plan.sources, 1, watermarks=True)
    times = [dt.datetime(2024, 1, 1, 0, 0, 7, 123456, tzinfo=UTC), None,
             dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=UTC)]
    raw = spark.createDataFrame([(n, ts) for n, ts in enumerate(times)], "k BIGINT, ts TIMESTAMP")
    for name, delay in (("fixed", dt.timedelta(seconds=5)),
                        ("other", dt.timedelta(seconds=1.5))):
        frame = columns.with_event_time(raw, name)
        rows = frame.orderBy("k").select(EVENT_TIME, WATERMARK).collect()
        naive = [None if ts is None else ts.replace(tzinfo=None) for ts in times]  # as collected
        assert [(r[0], r[1]) for r in rows] == [
            (ts, None if ts is None else ts - delay) for ts in naive], name
    # the fixed delay is microseconds subtracted, not Spark's timestamp-interval arithmetic
    fixed = columns.with_event_time(raw, "fixed")._jdf.queryExecution().analyzed().toString()
    assert "INTERVAL" not in fixed and "unix_micros" in fixed


_ROW = "k BIGINT, ts TIMESTAMP, _spate_partition INT, _spate_timestamp TIMESTAMP, " \
       "_spate_control STRING"


@pytest.mark.spark
def test_several_sources_metrics_come_from_one_job_each_its_own(spark: SparkSession) -> None:
    tables = "".join(f"""
CREATE TABLE {name} (k BIGINT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'single_file', path = '{name}.jsonl', format = 'json', type = 'source');"""
                     for name in ("a", "b", "c"))
    plan = plan_pipeline(tables + "SELECT k FROM a UNION ALL SELECT k FROM b "
                         "UNION ALL SELECT k FROM c;", check_inputs=False)
    columns = SourceColumns(plan.sources, 2, watermarks=True)
    at = [dt.datetime(2024, 1, 1, 0, 0, s, tzinfo=UTC) for s in range(10)]
    frames = [
        # a: rows in both partitions, the later time of each partition counts
        spark.createDataFrame([(1, at[3], 0, at[0], None), (2, at[5], 0, at[0], None),
                               (3, at[9], 1, at[0], None)], _ROW),
        # b: one row, 3 records dropped, its input ended
        spark.createDataFrame([(4, at[2], 1, at[0], None),
                               (None, None, 0, None, "dropped:3"),
                               (None, None, 1, None, "eof")], _ROW),
        # c: nothing this epoch
        spark.createDataFrame([], _ROW),
    ]
    sources = EpochSources(plan.sources, _tagged_union(frames), columns, 0, observe=False)
    with spark_jobs(spark) as jobs:
        metrics = sources.metrics()
    assert len(jobs) == 1
    micros = [int(t.timestamp()) * SECOND - SECOND for t in at]  # the watermark: 1 s behind
    assert metrics == {
        "a": SourceMetrics(rows=3, watermarks={0: micros[5], 1: micros[9]}),
        "b": SourceMetrics(rows=1, watermarks={1: micros[2]}, finished=True, dropped=3),
        "c": SourceMetrics(rows=0),
    }
