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
from spate.engine.runtime.sources import SourceColumns

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
