"""Sinks: single_file markers and truncation, encodings, stdout, blackhole, preview."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError, Sink, TableConfig
from spate.engine.connectors.builtin.preview import END_OF_STREAM, channel, discard
from tests.engine.connectors.support import make_table, run_stream

pytestmark = pytest.mark.spark

SCHEMA = T.StructType([T.StructField("id", T.LongType()), T.StructField("name", T.StringType()),
                       T.StructField("at", T.TimestampType())])


def _frame(spark: SparkSession, ids: range) -> DataFrame:
    return spark.sql(
        f"SELECT id, IF(id % 2 = 0, concat('n', id), NULL) AS name, "
        f"timestamp_micros(1704067200000000 + id * 1001) AS at "
        f"FROM range({ids.start}, {ids.stop}) ORDER BY id").coalesce(1)


def _file_table(path: Path, **options: Any) -> TableConfig:
    return make_table("single_file", "sink", type="sink", path=str(path), **options)


def _sink(table: TableConfig, schema: T.StructType = SCHEMA) -> Sink:
    return CONNECTORS[table.connector].create_sink(table, schema)


def test_markers_truncate_so_replays_never_duplicate(spark: SparkSession,
                                                     tmp_path: Path) -> None:
    path = tmp_path / "out" / "rows.jsonl"
    sink = _sink(_file_table(path, format="json"))
    sink.open(None)
    markers = [sink.write_epoch(epoch, _frame(spark, range(epoch * 3, epoch * 3 + 3)))
               for epoch in range(3)]
    sink.close()
    assert markers[-1] == {"bytes": path.stat().st_size}
    assert markers[0]["bytes"] < markers[1]["bytes"] < markers[2]["bytes"]
    reopened = _sink(_file_table(path, format="json"))
    reopened.open(markers[0])  # crash after epoch 0 committed: epochs 1, 2 are replayed
    assert path.stat().st_size == markers[0]["bytes"]
    for epoch in (1, 2):
        assert reopened.write_epoch(epoch, _frame(spark, range(epoch * 3, epoch * 3 + 3))) == \
            markers[epoch]
    reopened.close()
    ids = [json.loads(line)["id"] for line in path.read_text().splitlines()]
    assert ids == list(range(9))
    fresh = _sink(_file_table(path, format="json"))
    fresh.open(None)
    assert path.stat().st_size == 0
    fresh.close()


def test_an_empty_epoch_after_a_crashed_attempt_marks_the_truncated_length(
        spark: SparkSession, tmp_path: Path) -> None:
    """A crashed attempt appended an epoch and never committed it; the next attempt's
    first epoch writes nothing to this sink (an at-least-once broker redelivers later).
    Its marker is the file's length, not where the crashed attempt stopped."""
    path = tmp_path / "rows.jsonl"
    crashed = _sink(_file_table(path, format="json"))
    crashed.open(None)
    crashed.write_epoch(0, _frame(spark, range(0, 3)))  # killed before the commit
    again = _sink(_file_table(path, format="json"))
    again.open(None)
    assert again.write_epoch(0, _frame(spark, range(0, 0))) == {"bytes": 0}
    again.close()
    resumed = _sink(_file_table(path, format="json"))
    resumed.open({"bytes": 0})
    resumed.close()


def test_json_encoding_keeps_nulls_and_timestamps(spark: SparkSession, tmp_path: Path) -> None:
    lines = {}
    for timestamp_format in ("rfc3339", "unix_millis"):
        path = tmp_path / f"{timestamp_format}.jsonl"
        sink = _sink(_file_table(path, format="json", json__timestamp_format=timestamp_format))
        sink.open(None)
        sink.write_epoch(0, _frame(spark, range(0, 2)))
        sink.close()
        lines[timestamp_format] = path.read_text().splitlines()
    assert lines["rfc3339"] == [
        '{"id":0,"name":"n0","at":"2024-01-01T00:00:00.000000Z"}',
        '{"id":1,"name":null,"at":"2024-01-01T00:00:00.001001Z"}']
    assert lines["unix_millis"][1] == '{"id":1,"name":null,"at":1704067200001}'


def test_raw_string_sink_and_its_schema_rule(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "raw.txt"
    value = T.StructType([T.StructField("value", T.StringType())])
    sink = _sink(_file_table(path, format="raw_string"), value)
    sink.open(None)
    rows = spark.sql("SELECT * FROM VALUES ('a b'), (NULL), ('{\"x\":1}') AS t(value)")
    sink.write_epoch(0, rows)
    sink.close()
    assert path.read_text() == 'a b\n\n{"x":1}\n'
    with pytest.raises(ConnectorError, match="value TEXT"):
        _sink(_file_table(path, format="raw_string"), SCHEMA)


def test_reopen_beyond_the_file_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "short.jsonl"
    path.write_text("{}\n")
    with pytest.raises(ConnectorError, match="changed outside Spate"):
        _sink(_file_table(path, format="json")).open({"bytes": 100})


def test_stdout_sink_prints_one_record_per_line(spark: SparkSession,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    sink = _sink(make_table("stdout", "sink", format="json"))
    sink.open(None)
    assert sink.write_epoch(0, _frame(spark, range(0, 3))) is None
    sink.close()
    printed = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["id"] for line in printed] == [0, 1, 2]


def test_blackhole_computes_and_discards(spark: SparkSession) -> None:
    sink = _sink(make_table("blackhole", "sink"))
    sink.open(None)
    failing = spark.sql("SELECT raise_error('computed') AS x FROM range(1)")
    with pytest.raises(Exception, match="computed"):
        sink.write_epoch(0, failing)
    assert sink.write_epoch(1, _frame(spark, range(0, 10))) is None
    sink.close()


def test_preview_queues_rows_per_epoch_then_the_end(spark: SparkSession) -> None:
    table = TableConfig(name="preview-test", connector="preview", role="sink", options={},
                        columns=())
    sink = _sink(table)
    sink.open(None)
    sink.write_epoch(0, _frame(spark, range(0, 2)))
    sink.write_epoch(0, _frame(spark, range(0, 2)))  # replayed in-process: delivered once
    sink.write_epoch(1, _frame(spark, range(2, 2)))
    sink.close()
    queue = channel("preview-test")
    first = queue.get_nowait()
    assert [row["id"] for row in first] == [0, 1] and first[1]["name"] is None
    assert queue.get_nowait() == []
    assert queue.get_nowait() is END_OF_STREAM
    assert queue.empty()
    discard("preview-test")


def test_what_the_json_sink_writes_the_json_source_reads(spark: SparkSession,
                                                         tmp_path: Path) -> None:
    path = tmp_path / "roundtrip.jsonl"
    sink = _sink(_file_table(path, format="json"))
    sink.open(None)
    frame = _frame(spark, range(0, 5))
    sink.write_epoch(0, frame)
    sink.close()
    columns = tuple(ColumnDef(f.name, f.dataType) for f in SCHEMA.fields)
    source = make_table("single_file", "source", columns, type="source", path=str(path),
                        format="json")
    read_back = run_stream(CONNECTORS["single_file"].read_stream(spark, source, 1),
                           tmp_path / "checkpoint")
    assert [{k: row[k] for k in ("id", "name", "at")} for row in read_back.data_rows()] == \
        [row.asDict() for row in frame.collect()]
