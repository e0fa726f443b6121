"""The single_file source: offsets, control rows, bad data, replays on Spark."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spate.engine.connectors import (
    CONNECTORS,
    HIDDEN_CONTROL,
    HIDDEN_PARTITION,
    HIDDEN_TIMESTAMP,
    ColumnDef,
    ConnectorError,
    TableConfig,
    register_data_sources,
)
from spate.engine.connectors.core.boundary import Boundary
from spate.engine.connectors.single_file.source import (
    MIN_PART_LINES,
    SingleFileDataSource,
    SingleFileStreamReader,
    line_parts,
)
from tests.engine.connectors.support import make_table, run_stream
from tests.engine.harness import run_pipeline

COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType()),
           ColumnDef("at", T.TimestampType()))


def _write_json(path: Path, count: int, bad: dict[int, str] | None = None) -> None:
    lines = [json.dumps({"id": i, "name": f"n{i}", "at": f"2024-01-01T00:00:{i % 60:02d}Z"})
             for i in range(count)]
    for index, text in (bad or {}).items():
        lines[index] = text
    path.write_text("\n".join(lines) + "\n")


def _table(path: Path, **options: Any) -> TableConfig:
    return make_table("single_file", "source", COLUMNS, type="source", path=str(path),
                      format="json", **options)


def _reader(table: TableConfig, parallelism: int = 1) -> SingleFileStreamReader:
    source = SingleFileDataSource(CONNECTORS["single_file"].reader_options(table, parallelism))
    reader = source.streamReader(source.schema())
    assert isinstance(reader, SingleFileStreamReader)
    return reader


def _read_all(reader: SingleFileStreamReader, limit: Any) -> list[list[dict[str, Any]]]:
    """Drive the reader like Spark does; one list of rows per batch."""
    batches, start = [], reader.initialOffset()
    while (end := reader.latestOffset(start, limit)) != start:
        rows: list[dict[str, Any]] = []
        for partition in reader.partitions(start, end):
            for batch in reader.read(partition):
                rows.extend(pa.Table.from_batches([batch]).to_pylist())
        batches.append(rows)
        start = end
    return batches


def test_offsets_batches_and_one_eof(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    _write_json(path, 10)
    reader = _reader(_table(path, max_lines_per_batch=4))
    batches = _read_all(reader, reader.getDefaultReadLimit())
    assert [len(b) for b in batches] == [4, 4, 3]
    controls = [row[HIDDEN_CONTROL] for batch in batches for row in batch
                if row[HIDDEN_CONTROL] is not None]
    assert controls == ["eof"]
    assert batches[-1][-1]["id"] is None and batches[-1][-1][HIDDEN_TIMESTAMP] is None
    everything = _read_all(reader, ReadAllAvailable())
    assert len(everything) == 1 and len(everything[0]) == 11
    assert [len(b) for b in _read_all(reader, ReadMaxRows(5))] == [5, 6]


def test_empty_file_emits_only_eof(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    batches = _read_all(_reader(_table(path)), ReadAllAvailable())
    assert [[row[HIDDEN_CONTROL] for row in batch] for batch in batches] == [["eof"]]


def test_bad_data_fail_names_path_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    _write_json(path, 8, bad={5: '{"id": "six"}'})
    with pytest.raises(ConnectorError) as caught:
        _read_all(_reader(_table(path, max_lines_per_batch=3)), ReadMaxRows(3))
    assert str(path) in str(caught.value)
    assert "line 6" in str(caught.value)
    assert "bad_data = 'drop'" in str(caught.value)


def test_a_tenants_error_names_the_file_as_its_sql_did(tmp_path: Path) -> None:
    _write_json(tmp_path / "bad.jsonl", 4, bad={2: "{broken"})
    table = replace(_table(Path("bad.jsonl")), boundary=Boundary(storage_root=str(tmp_path)))
    with pytest.raises(ConnectorError) as caught:
        _read_all(_reader(table), ReadAllAvailable())
    assert "bad record in bad.jsonl at line 3" in str(caught.value)
    assert str(tmp_path) not in str(caught.value)


def test_bad_data_drop_reports_the_count(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    _write_json(path, 12, bad={1: "nope", 2: '{"name": "no id"}', 9: '{"id": 9, "at": "x"}'})
    batches = _read_all(_reader(_table(path, bad_data="drop")), ReadAllAvailable())
    rows = [row for batch in batches for row in batch]
    assert [row["id"] for row in rows if row[HIDDEN_CONTROL] is None] == \
        [0, 3, 4, 5, 6, 7, 8, 10, 11]
    assert [row[HIDDEN_CONTROL] for row in rows if row[HIDDEN_CONTROL]] == ["dropped:3", "eof"]


def test_unix_millis_source(tmp_path: Path) -> None:
    path = tmp_path / "millis.jsonl"
    path.write_text('{"id": 1, "at": 1704067200500}\n')
    batches = _read_all(_reader(_table(path, json__timestamp_format="unix_millis")),
                        ReadAllAvailable())
    assert batches[0][0]["at"] == dt.datetime(2024, 1, 1, 0, 0, 0, 500000, tzinfo=dt.UTC)


@pytest.mark.parametrize("ending", ["\n", "\r\n", ""])
def test_a_batch_is_cut_at_line_ends_into_parts_of_about_equal_bytes(
        tmp_path: Path, ending: str) -> None:
    path = tmp_path / "in.jsonl"
    lines = [f'{{"id": {i}, "pad": "{"x" * (i % 7)}"}}' for i in range(3 * MIN_PART_LINES + 5)]
    path.write_bytes((ending or "\n").join(lines).encode() + ending.encode())
    data = path.read_bytes()
    start, end = {"line": 0, "byte": 0}, {"line": len(lines), "byte": len(data)}
    bounds = line_parts(str(path), start, end, 3)
    assert bounds[0] == start and bounds[-1] == end and len(bounds) == 4
    for cut in bounds[1:-1]:
        assert data[cut["byte"] - 1:cut["byte"]] == b"\n"  # just after a line's end
        assert data[:cut["byte"]].count(b"\n") == cut["line"]
    sizes = [b["byte"] - a["byte"] for a, b in zip(bounds, bounds[1:], strict=False)]
    assert max(sizes) - min(sizes) < 100
    # never parts of fewer than MIN_PART_LINES lines, nor more parts than readers
    assert len(line_parts(str(path), start, end, 8)) == 4
    few = {"line": 2 * MIN_PART_LINES - 1, "byte": data.index(lines[2 * MIN_PART_LINES - 1]
                                                               .encode())}
    assert line_parts(str(path), start, few, 3) == [start, few]
    assert line_parts(str(path), start, end, 1) == [start, end]


def test_parallel_readers_read_every_line_once_in_parts(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    count = 2 * MIN_PART_LINES + 10
    _write_json(path, count)
    reader = _reader(_table(path, max_lines_per_batch=count), parallelism=2)
    start = reader.initialOffset()
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    partitions = reader.partitions(start, end)
    assert len(partitions) == 2
    rows = [row for partition in partitions for batch in reader.read(partition)
            for row in pa.Table.from_batches([batch]).to_pylist()]
    data = [row for row in rows if row[HIDDEN_CONTROL] is None]
    assert [row["id"] for row in data] == list(range(count))
    assert {row[HIDDEN_PARTITION] for row in data} == {0, 1}
    assert [(row[HIDDEN_PARTITION], row[HIDDEN_CONTROL]) for row in rows
            if row[HIDDEN_CONTROL]] == [(1, "eof")]


def test_a_bad_record_in_a_later_part_names_its_line_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    count = 2 * MIN_PART_LINES
    _write_json(path, count, bad={count - 3: "{broken"})
    with pytest.raises(ConnectorError) as caught:
        _read_all(_reader(_table(path, max_lines_per_batch=count), parallelism=2),
                  ReadAllAvailable())
    assert f"line {count - 2}:" in str(caught.value)


def test_rows_that_must_keep_the_files_order_have_one_reader(tmp_path: Path) -> None:
    connector = CONNECTORS["single_file"]
    path = tmp_path / "in.jsonl"
    assert connector.partition_count(_table(path), 4) == 4
    keyed = replace(_table(path), primary_key=("id",))
    assert connector.partition_count(keyed, 4) == 1
    changes = replace(make_table("single_file", "source", COLUMNS, type="source",
                                 path=str(path), format="debezium_json"), primary_key=("id",))
    assert connector.partition_count(changes, 4) == 1


def test_missing_file_is_a_located_error(tmp_path: Path) -> None:
    with pytest.raises(ConnectorError) as caught:
        CONNECTORS["single_file"].reader_options(_table(tmp_path / "nope.jsonl"))
    assert caught.value.option == "path"


@pytest.mark.spark
def test_streaming_query_reads_every_line_once(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    _write_json(path, 25)
    df = CONNECTORS["single_file"].read_stream(spark, _table(path, max_lines_per_batch=10), 4)
    assert df.columns == ["id", "name", "at", HIDDEN_PARTITION, HIDDEN_TIMESTAMP, HIDDEN_CONTROL]
    assert df.schema[HIDDEN_TIMESTAMP].dataType == T.TimestampType()
    run = run_stream(df, tmp_path / "checkpoint")
    assert run.failure is None
    assert sorted(run.batches) == [0, 1, 2]
    assert [row["id"] for row in run.data_rows()] == list(range(25))
    assert run.controls() == [(2, "eof")]
    first = run.data_rows()[0]
    assert first["at"] == dt.datetime(2024, 1, 1)  # Spark returns UTC wall time, naive
    assert first[HIDDEN_PARTITION] == 0 and first[HIDDEN_TIMESTAMP] is not None


@pytest.mark.spark
def test_replay_after_crash_reads_the_same_lines(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    _write_json(path, 20)
    table = _table(path, max_lines_per_batch=6)
    checkpoint = tmp_path / "checkpoint"
    crashed = run_stream(CONNECTORS["single_file"].read_stream(spark, table, 1), checkpoint,
                         crash_at=1)
    assert crashed.failure is not None
    resumed = run_stream(CONNECTORS["single_file"].read_stream(spark, table, 1), checkpoint)
    assert resumed.failure is None
    assert min(resumed.batches) == 1  # batch 1 was replayed from its logged offsets
    strip = ("id", "name", HIDDEN_CONTROL)
    assert [{k: r[k] for k in strip} for r in resumed.batches[1]] == \
        [{k: r[k] for k in strip} for r in crashed.batches[1]]
    ids = [r["id"] for b in (crashed.batches[0], *resumed.batches.values()) for r in b
           if r[HIDDEN_CONTROL] is None]
    assert ids == list(range(20))
    assert resumed.controls() == [(3, "eof")]


@pytest.mark.spark
def test_bad_record_fails_the_query_with_path_and_line(spark: SparkSession,
                                                       tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    _write_json(path, 5, bad={3: "{broken"})
    df = CONNECTORS["single_file"].read_stream(spark, _table(path), 1)
    run = run_stream(df, tmp_path / "checkpoint")
    assert run.failure is not None
    message = str(run.failure)
    assert "ConnectorError" in message and str(path) in message and "line 4" in message


@pytest.mark.spark
def test_registering_again_is_harmless(spark: SparkSession, tmp_path: Path) -> None:
    register_data_sources(spark)
    register_data_sources(spark)
    path = tmp_path / "in.jsonl"
    _write_json(path, 1)
    assert CONNECTORS["single_file"].read_stream(spark, _table(path), 1).isStreaming


@pytest.mark.spark
def test_windows_over_a_file_read_in_parts_are_those_of_one_reader(
        spark: SparkSession, tmp_path: Path) -> None:
    """Two readers share each batch's lines: each part is a source partition with a
    watermark of its own, and every window still counts every row of its key once."""
    count = 4 * MIN_PART_LINES + 500  # two batches, each cut in two parts
    path = tmp_path / "in.jsonl"
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    path.write_text("".join(
        json.dumps({"k": i % 50, "ts": (start + dt.timedelta(milliseconds=20 * i))
                    .strftime("%Y-%m-%dT%H:%M:%S.%fZ")}) + "\n" for i in range(count)))
    results = {}
    for parallelism in (1, 2):
        out = tmp_path / f"out{parallelism}.jsonl"
        sql = f"""
CREATE TABLE events (k BIGINT, ts TIMESTAMP NOT NULL,
                     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'single_file', path = '{path}', format = 'json', type = 'source',
      max_lines_per_batch = {count // 2});
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
                       type = 'sink');
INSERT INTO out SELECT k, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n
FROM events GROUP BY k, w;
"""
        counters = run_pipeline(spark, sql, tmp_path / f"work{parallelism}",
                                parallelism=parallelism)
        assert counters["rows_in"] == count and counters["rows_late"] == 0
        results[parallelism] = sorted(out.read_text().splitlines())
    assert sum(json.loads(line)["n"] for line in results[2]) == count
    assert results[2] == results[1]
