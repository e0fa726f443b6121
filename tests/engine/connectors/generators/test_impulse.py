"""The impulse source: pacing, one schedule shared by the subtasks (rescale-safe), event
times, bounded end; its rows computed by Spark from their numbers."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import SparkSession

from spate.engine.connectors import CONNECTORS, HIDDEN_CONTROL, HIDDEN_PARTITION, HIDDEN_TIMESTAMP
from spate.engine.connectors.core.base import ConnectorError, stream_schema
from spate.engine.connectors.generators.impulse import COLUMNS, MAX_ROWS_PER_BATCH
from tests.engine.connectors.support import make_table

START_MS = 1_700_000_000_000
START_NS = START_MS * 1_000_000
IMPULSE = CONNECTORS["impulse"]


def _advance(start: dict[str, Any] | None, now_ms: int, parallelism: int = 1,
             **options: Any) -> dict[str, Any]:
    result: dict[str, Any] = IMPULSE.advance(make_table("impulse", **options), parallelism,
                                             start, now_ms)
    return result


def test_rate_limit_follows_the_wall_clock() -> None:
    start = _advance(None, START_MS, 2, event_rate=10)  # 10 rows/s in all, 5 per subtask
    assert start == {"start_ns": START_NS, "next": 1, "eof": False}  # row 0 is due at once
    assert _advance(start, START_MS + 500, 2, event_rate=10)["next"] == 6  # 0, 0.1 … 0.5 s
    assert _advance(start, START_MS + 10**9, 2, event_rate=10)["next"] == 1 + MAX_ROWS_PER_BATCH
    # Nothing new due: the same offset, so the batch holds no row.
    assert _advance(start, START_MS + 50, 2, event_rate=10) == start


def test_bounded_by_message_count_in_all() -> None:
    start = {"start_ns": START_NS, "next": 0, "eof": False}
    end = _advance(start, START_MS + 1000, 3, event_rate=1e9, message_count=10)
    assert end == {"start_ns": START_NS, "next": 10, "eof": True}
    assert _advance(end, START_MS + 5000, 3, event_rate=1e9, message_count=10) == end


def _rows(spark: SparkSession, start: dict[str, Any] | None, end: dict[str, Any],
          parallelism: int = 1, **options: Any) -> list[dict[str, Any]]:
    frame = IMPULSE.rows(spark, make_table("impulse", **options), parallelism, start, end)
    assert frame.schema == stream_schema(COLUMNS)
    return [row.asDict() for row in frame.collect()]


@pytest.mark.spark
def test_rows_are_dealt_to_subtasks_and_the_last_batch_ends_the_input(
        spark: SparkSession) -> None:
    start = {"start_ns": START_NS, "next": 4, "eof": False}
    end = {"start_ns": START_NS, "next": 10, "eof": True}
    rows = _rows(spark, start, end, 3, event_rate=1e9, message_count=10)
    data = [r for r in rows if r[HIDDEN_CONTROL] is None]
    assert sorted((r["counter"], r["subtask_index"], r[HIDDEN_PARTITION]) for r in data) == [
        (n, n % 3, n % 3) for n in range(4, 10)]
    [control] = [r for r in rows if r[HIDDEN_CONTROL] is not None]
    assert control == {"counter": None, "subtask_index": None, HIDDEN_PARTITION: 0,
                       HIDDEN_TIMESTAMP: None, HIDDEN_CONTROL: "eof"}
    # A batch after the end holds nothing, not a second end.
    assert _rows(spark, end, end, 3, event_rate=1e9, message_count=10) == []


@pytest.mark.spark
def test_event_times(spark: SparkSession) -> None:
    start = {"start_ns": START_NS + 123_456, "next": 0, "eof": False}
    spaced = _rows(spark, None, dict(start, next=3, eof=True), 1, event_rate=100,
                   event_time_interval=1_000_000, message_count=3)
    stamps = [r[HIDDEN_TIMESTAMP] for r in spaced if r[HIDDEN_CONTROL] is None]
    # µs, rounded down from the nanosecond start: 1 ms apart
    assert [round(s.timestamp() * 1e6) - START_NS // 1000 for s in stamps] == [123, 1123, 2123]
    paced = _rows(spark, None, dict(start, next=5), 2, event_rate=3)  # due every 1/3 s
    offsets_us = sorted(round(r[HIDDEN_TIMESTAMP].timestamp() * 1e6) - START_NS // 1000
                        for r in paced)
    # start + floor(n × 1e9 / 3) ns, in µs rounded down
    assert offsets_us == [(123_456 + int(n * (1e9 / 3))) // 1000 for n in range(5)]


def _timeline(spark: SparkSession, parallelisms: list[int], batches: int
              ) -> list[tuple[int, float]]:
    """(counter, event time) of every row read in a first batch at the start, then
    ``batches`` batches a second apart, the parallelism changing between batches as
    ``parallelisms`` says (a rescale: the offset the last batch committed is where the
    next starts)."""
    offset: dict[str, Any] | None = None
    rows = []
    for batch in range(batches + 1):
        parallelism = parallelisms[batch % len(parallelisms)]
        end = _advance(offset, START_MS + max(batch * 1000 - 1, 0), parallelism,
                       event_rate=10)
        rows += [(r["counter"], r[HIDDEN_TIMESTAMP].timestamp() - START_MS / 1e3)
                 for r in _rows(spark, offset, end, parallelism, event_rate=10)]
        offset = end
    return sorted(rows)


@pytest.mark.spark
def test_a_rescale_changes_no_row_and_no_event_time(spark: SparkSession) -> None:
    """The schedule is global: rescaling 1 → 2 → 3 → 1 mid-stream emits exactly the rows,
    at exactly the event times, of a run that never rescaled (no gap, no repeat)."""
    steady = _timeline(spark, [1], 8)
    assert [counter for counter, _ in steady] == list(range(80))
    assert [(c, round(t, 3)) for c, t in steady[:2]] == [(0, 0.0), (1, 0.1)]
    assert _timeline(spark, [1, 2, 3, 1], 8) == steady
    assert _timeline(spark, [3], 8) == steady


def test_an_offset_counted_per_subtask_is_read_as_rows_in_all() -> None:
    """Offsets written before the schedule was global counted rows per subtask."""
    old = {"start_ns": START_NS, "counter": 4, "eof": False}
    assert _advance(old, START_MS + 999, 2, event_rate=10) == {
        "start_ns": START_NS, "next": 10, "eof": False}
    assert IMPULSE.batch_facts(make_table("impulse", event_rate=10), 2, old,
                               {"start_ns": START_NS, "next": 10, "eof": False}).rows == 2


@pytest.mark.spark
def test_offsets_tell_a_batchs_rows_and_its_end(spark: SparkSession) -> None:
    """What the runner takes instead of counting rows (Connector.batch_facts)."""
    options = {"event_rate": 1e9, "message_count": 7}
    table = make_table("impulse", **options)
    start = {"start_ns": START_NS, "next": 0, "eof": False}
    middle = dict(start, next=6)
    end = _advance(middle, START_MS + 1000, 3, **options)
    for first, last in ((None, middle), (middle, end)):
        rows = _rows(spark, first, last, 3, **options)
        facts = IMPULSE.batch_facts(table, 3, first, last)
        assert facts.rows == sum(1 for r in rows if r[HIDDEN_CONTROL] is None)
        assert facts.finished == any(r[HIDDEN_CONTROL] == "eof" for r in rows)
    assert facts.finished


def test_an_offset_of_another_connector_is_refused() -> None:
    nexmark_offset = {"start_wall_ns": 5, "base_ns": 10**9, "next": 42, "eof": False}
    with pytest.raises(ConnectorError, match="source 'ticks' cannot resume"):
        IMPULSE.advance(make_table("impulse", name="ticks", event_rate=10), 1,
                        nexmark_offset, START_MS)


def _compilations(spark: SparkSession) -> int:
    """How many classes Spark's whole-stage code generation has compiled in this JVM."""
    metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


@pytest.mark.spark
def test_a_batch_compiles_no_code_of_its_own(spark: SparkSession) -> None:
    """A batch's bounds are data, not literals in the generated code: epochs after the
    first reuse its compiled classes instead of generating, compiling and loading new ones
    (an epoch's fixed cost, and a JVM that fills with classes)."""
    offset: dict[str, Any] = {"start_ns": START_NS, "next": 0, "eof": False}
    for _ in range(2):  # the first batches compile the plan's code
        end = dict(offset, next=offset["next"] + 7)
        _rows(spark, offset, end, 2, event_rate=1e9)
        offset = end
    before = _compilations(spark)
    for size in (3, 11, 5, 20, 1):
        end = dict(offset, next=offset["next"] + size)
        rows = _rows(spark, offset, end, 2, event_rate=1e9)
        assert sorted(r["counter"] for r in rows) == list(range(offset["next"], end["next"]))
        offset = end
    assert _compilations(spark) == before
