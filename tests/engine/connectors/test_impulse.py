"""The impulse source: pacing, one schedule shared by the subtasks (rescale-safe), event
times, bounded end."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spate.engine.connectors import CONNECTORS, HIDDEN_CONTROL, HIDDEN_PARTITION, HIDDEN_TIMESTAMP
from spate.engine.connectors.impulse import ImpulseDataSource, ImpulseStreamReader
from tests.engine.connectors.support import make_table, run_stream

START_NS = 1_700_000_000_000_000_000


def _reader(parallelism: int, **options: Any) -> ImpulseStreamReader:
    table = make_table("impulse", **options)
    source = ImpulseDataSource(CONNECTORS["impulse"].reader_options(table, parallelism))
    reader = source.streamReader(source.schema())
    assert isinstance(reader, ImpulseStreamReader)
    reader.clock_ns = lambda: START_NS
    return reader


def _rows(reader: ImpulseStreamReader, start: dict[str, Any],
          end: dict[str, Any]) -> list[dict[str, Any]]:
    return [row for partition in reader.partitions(start, end)
            for batch in reader.read(partition)
            for row in pa.Table.from_batches([batch]).to_pylist()]


def test_rate_limit_follows_the_wall_clock() -> None:
    reader = _reader(2, event_rate=10)  # 10 rows/s in all, 5 per subtask
    start = reader.initialOffset()
    assert start == {"start_ns": START_NS, "next": 0, "eof": False}
    reader.clock_ns = lambda: START_NS + 500_000_000
    assert reader.latestOffset(start, ReadAllAvailable())["next"] == 6  # due: 0, 0.1 … 0.5 s
    assert reader.latestOffset(start, ReadMaxRows(2))["next"] == 2
    reader.clock_ns = lambda: START_NS + 10**15  # 1e6 s behind: capped per batch
    assert reader.latestOffset(start, reader.getDefaultReadLimit())["next"] == 1_000_000


def test_bounded_by_message_count_in_all() -> None:
    reader = _reader(3, event_rate=1e9, message_count=10)
    start = reader.initialOffset()
    reader.clock_ns = lambda: START_NS + 10**9
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["next"] == 10 and end["eof"]
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    rows = _rows(reader, start, end)
    data = [(r["subtask_index"], r["counter"]) for r in rows if r[HIDDEN_CONTROL] is None]
    assert sorted(data, key=lambda row: row[1]) == [(n % 3, n) for n in range(10)]
    assert all(r[HIDDEN_PARTITION] == r["subtask_index"] for r in rows
               if r[HIDDEN_CONTROL] is None)
    assert [r[HIDDEN_CONTROL] for r in rows if r[HIDDEN_CONTROL]] == ["eof"]


def _timeline(parallelisms: list[int], batches: int) -> list[tuple[int, float]]:
    """(counter, event time) of every row read in ``batches`` batches a second apart,
    the parallelism changing between batches as ``parallelisms`` says (a rescale: a
    new reader resumes from the offset the old one committed)."""
    offset: dict[str, Any] | None = None
    rows = []
    for batch in range(batches):
        reader = _reader(parallelisms[batch % len(parallelisms)], event_rate=10)
        if offset is None:
            offset = reader.initialOffset()
        reader.clock_ns = lambda batch=batch: START_NS + (batch + 1) * 10**9 - 1
        end = reader.latestOffset(offset, ReadAllAvailable())
        rows += [(r["counter"], r[HIDDEN_TIMESTAMP].timestamp() - START_NS / 1e9)
                 for r in _rows(reader, offset, end) if r[HIDDEN_CONTROL] is None]
        offset = end
    return sorted(rows)


def test_a_rescale_changes_no_row_and_no_event_time() -> None:
    """The schedule is global: rescaling 1 → 2 → 3 → 1 mid-stream emits exactly the rows,
    at exactly the event times, of a run that never rescaled (no gap, no repeat)."""
    steady = _timeline([1], 8)
    assert [counter for counter, _ in steady] == list(range(80))
    assert _timeline([1, 2, 3, 1], 8) == steady
    assert _timeline([3], 8) == steady


def test_an_offset_counted_per_subtask_is_read_as_rows_in_all() -> None:
    """Offsets written before the schedule was global counted rows per subtask."""
    reader = _reader(2, event_rate=10)
    old = {"start_ns": START_NS, "counter": 4, "eof": False}
    reader.clock_ns = lambda: START_NS + 10**9 - 1
    assert reader.latestOffset(old, ReadAllAvailable()) == {
        "start_ns": START_NS, "next": 10, "eof": False}
    assert CONNECTORS["impulse"].batch_facts(make_table("impulse", event_rate=10), 2, old,
                                             {"start_ns": START_NS, "next": 10,
                                              "eof": False}).rows == 2


def test_offsets_tell_a_batchs_rows_and_its_end() -> None:
    """What the runner takes instead of counting rows (Connector.batch_facts)."""
    table = make_table("impulse", event_rate=1e9, message_count=7)
    reader = _reader(3, event_rate=1e9, message_count=7)
    start = reader.initialOffset()
    reader.clock_ns = lambda: START_NS + 10**9
    middle = reader.latestOffset(start, ReadMaxRows(6))
    end = reader.latestOffset(middle, ReadAllAvailable())
    for first, last in ((None, middle), (middle, end)):
        rows = _rows(reader, first or start, last)
        facts = CONNECTORS["impulse"].batch_facts(table, 3, first, last)
        assert facts is not None
        assert facts.rows == sum(1 for r in rows if r[HIDDEN_CONTROL] is None)
        assert facts.finished == any(r[HIDDEN_CONTROL] == "eof" for r in rows)
    assert facts.finished


def test_event_times() -> None:
    spaced = _reader(1, event_rate=100, event_time_interval=1_000_000, message_count=3)
    start = spaced.initialOffset()
    rows = _rows(spaced, start, dict(start, next=3, eof=True))
    stamps = [r[HIDDEN_TIMESTAMP].timestamp() for r in rows if r[HIDDEN_CONTROL] is None]
    assert [round((s - START_NS / 1e9) * 1e3) for s in stamps] == [0, 1, 2]  # 1 ms apart
    paced = _reader(2, event_rate=4)  # 4 rows/s in all: due every 0.25 s
    rows = _rows(paced, start, dict(start, next=5))
    stamps = sorted({r[HIDDEN_TIMESTAMP].timestamp() - START_NS / 1e9 for r in rows})
    assert stamps == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_the_first_batch_is_dated_by_the_logged_end_offset() -> None:
    """Spark asks for a fresh initial offset when it plans the first batch; a later
    clock reading there must not move the batch's event times (a replay would move
    them again)."""
    reader = _reader(1, event_rate=10, message_count=2)
    logged_start = reader.initialOffset()
    reader.clock_ns = lambda: START_NS + 10**9
    end = reader.latestOffset(logged_start, ReadAllAvailable())
    reader.clock_ns = lambda: START_NS + 7 * 10**9  # the first batch is planned later
    rows = _rows(reader, reader.initialOffset(), end)
    stamps = [r[HIDDEN_TIMESTAMP].timestamp() for r in rows if r[HIDDEN_CONTROL] is None]
    assert [round(s - START_NS / 1e9, 1) for s in stamps] == [0.0, 0.1]


@pytest.mark.spark
def test_streaming_query_until_eof(spark: SparkSession, tmp_path: Path) -> None:
    table = make_table("impulse", event_rate=1_000_000, message_count=100)
    df = CONNECTORS["impulse"].read_stream(spark, table, 2)
    assert df.columns == ["counter", "subtask_index", HIDDEN_PARTITION, HIDDEN_TIMESTAMP,
                          HIDDEN_CONTROL]
    run = run_stream(df, tmp_path / "checkpoint", available_now=False)
    assert run.failure is None
    data = sorted((r["counter"], r["subtask_index"]) for r in run.data_rows())
    assert data == [(n, n % 2) for n in range(100)]
    assert [control for _, control in run.controls()] == ["eof"]
