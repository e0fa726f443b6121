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
from spate.engine.connectors.single_file.source import SingleFileDataSource, SingleFileStreamReader
from tests.engine.connectors.support import make_table, run_stream

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


def _reader(table: TableConfig) -> SingleFileStreamReader:
    source = SingleFileDataSource(CONNECTORS["single_file"].reader_options(table))
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
