"""Parquet files a ``filesystem`` source leaves to Spark's own reader, and the rest."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, TableConfig
from spate.engine.connectors.filesystem.source import FRESH, FilesystemDataSource
from spate.engine.connectors.filesystem.spark_parquet import spark_reads
from tests.engine.connectors.support import make_table
from tests.engine.harness import run_pipeline

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()),
                    pa.field("at", pa.timestamp("us", tz="UTC"))])
AT = dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.UTC)


def _write(path: Path, **columns: Any) -> Path:
    table = {"id": pa.array([1, 2], pa.int64()), "name": ["a", "b"],
             "at": pa.array([AT, AT], pa.timestamp("us", tz="UTC"))}
    table.update(columns)
    pq.write_table(pa.table({k: v for k, v in table.items() if v is not None}), path)
    return path


def _reads(path: Path, required: frozenset[str] = frozenset({"id"})) -> bool:
    return spark_reads(str(path), path.name, SCHEMA, required)


def test_a_file_of_the_tables_own_types_goes_to_spark(tmp_path: Path) -> None:
    assert _reads(_write(tmp_path / "same.parquet"))
    assert _reads(_write(tmp_path / "millis.parquet",
                         at=pa.array([AT, AT], pa.timestamp("ms", tz="UTC"))))
    assert _reads(_write(tmp_path / "large.parquet", name=pa.array(["a", "b"],
                                                                   pa.large_string())))
    int96 = tmp_path / "int96.parquet"  # how Spark writes timestamps unless told otherwise
    pq.write_table(pq.read_table(_write(tmp_path / "plain.parquet")), int96,
                   use_deprecated_int96_timestamps=True)
    assert _reads(int96)
    extra = _write(tmp_path / "extra.parquet", more=pa.array([{"x": 1}, {"x": 2}]))
    assert _reads(extra)  # a nested column the table does not read changes nothing


@pytest.mark.parametrize("change", [
    {"id": pa.array([1, 2], pa.int32())},  # Python widens it to BIGINT
    {"id": pa.array([1, 2], pa.uint64())},
    {"name": None},  # missing: a bad file to the Python source
    {"name": pa.array([1, 2], pa.int64())},
    {"at": pa.array([AT.replace(tzinfo=None)] * 2, pa.timestamp("us"))},  # no zone
    {"at": pa.array([AT, AT], pa.timestamp("ns", tz="UTC"))},
    {"id": pa.array([1, None], pa.int64())},  # NULL in a NOT NULL column
])
def test_a_file_needing_spates_conversions_stays_with_python(tmp_path: Path,
                                                             change: dict[str, Any]) -> None:
    assert not _reads(_write(tmp_path / "other.parquet", **change))


def test_odd_names_unreadable_files_and_unknown_null_counts_stay_with_python(
        tmp_path: Path) -> None:
    assert not _reads(_write(tmp_path / "a b.parquet"))
    assert not _reads(_write(tmp_path / "a[1].parquet"))
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    assert not _reads(tmp_path / "broken.parquet")
    no_stats = tmp_path / "no-stats.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "name": ["a"],
                             "at": pa.array([AT], pa.timestamp("us", tz="UTC"))}),
                   no_stats, write_statistics=False)
    assert not _reads(no_stats)
    assert _reads(no_stats, required=frozenset())


def _source(folder: Path, **options: Any) -> TableConfig:
    columns = (ColumnDef("id", T.LongType(), nullable=False), ColumnDef("name", T.StringType()),
               ColumnDef("at", T.TimestampType()))
    return make_table("filesystem", "source", columns, path=str(folder), type="source",
                      **{"format": "parquet", **options})


@pytest.mark.spark
def test_a_batch_is_split_between_sparks_reader_and_the_python_source(
        spark: SparkSession, tmp_path: Path) -> None:
    for index in range(4):
        ids = pa.array([index * 10, index * 10 + 1], pa.int32() if index == 3 else pa.int64())
        _write(tmp_path / f"f{index}.parquet", id=ids)
    connector = CONNECTORS["filesystem"]
    table = _source(tmp_path)
    assert connector.reads_with_spark(table)
    options = connector.reader_options(table, 2)  # type: ignore[attr-defined]
    source = FilesystemDataSource(options)
    reader = source.streamReader(source.schema())
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    # The Python source decodes only the file Spark would read differently...
    python = [r for part in reader.partitions(start, end) for batch in reader.read(part)
              for r in batch.to_pylist() if r["_spate_control"] is None]
    assert [r["id"] for r in python] == [30, 31]
    # ...and the epoch reads the others with Spark's reader, dealt to the readers as the
    # Python source deals its files (f0, f2 to reader 0; f1 to reader 1).
    rows = connector.spark_rows(spark, table, 2, None, end)
    assert rows is not None
    assert rows.columns == reader.schema.fieldNames()
    got = sorted((r["id"], r["_spate_partition"], r["name"], r["at"]) for r in rows.collect())
    assert [(i, p) for i, p, _, _ in got] == [(0, 0), (1, 0), (10, 1), (11, 1), (20, 0),
                                              (21, 0)]
    assert all(at == AT.replace(tzinfo=None) or at.astimezone(dt.UTC) == AT
               for _, _, _, at in got)
    assert connector.spark_rows(spark, table, 2, end, end) is None
    assert connector.spark_rows(spark, _source(tmp_path), 2, dict(FRESH), end) is not None


def test_a_file_path_column_or_another_format_keeps_every_file_with_python(
        tmp_path: Path) -> None:
    connector = CONNECTORS["filesystem"]
    columns = (ColumnDef("id", T.LongType()), ColumnDef("f", T.StringType()))
    with_path = replace(make_table("filesystem", "source", columns, path=str(tmp_path),
                                   type="source", format="parquet"), metadata={"f": "file_path"})
    assert not connector.reads_with_spark(with_path)
    assert not connector.reads_with_spark(_source(tmp_path, format="json"))


@pytest.mark.spark
def test_a_pipeline_reads_every_file_once_across_restarts(spark: SparkSession,
                                                          tmp_path: Path) -> None:
    inbox = tmp_path / "in"
    inbox.mkdir()
    for index in range(6):
        ids = range(index * 100, index * 100 + 100)
        kind = pa.int32() if index % 3 == 2 else pa.int64()
        pq.write_table(pa.table({"id": pa.array(ids, kind), "name": [f"n{i}" for i in ids],
                                 "at": pa.array([AT] * 100, pa.timestamp("us", tz="UTC"))}),
                       inbox / f"f{index}.parquet")
    out = tmp_path / "out"
    sql = f"""
CREATE TABLE src (id BIGINT NOT NULL, name TEXT, at TIMESTAMP) WITH (connector = 'filesystem',
    type = 'source', format = 'parquet', path = '{inbox}', source.max_files_per_batch = '2');
CREATE TABLE sink WITH (connector = 'filesystem', type = 'sink', format = 'parquet',
    path = '{out}');
INSERT INTO sink SELECT id, name FROM src WHERE id % 2 = 0;
"""
    first = run_pipeline(spark, sql, tmp_path / "work", parallelism=2, stop_after_epochs=2)
    assert 0 < first["rows_in"] < 600
    total = run_pipeline(spark, sql, tmp_path / "work", parallelism=2)  # counters carry on
    assert total["rows_in"] == 600
    ids = pq.read_table(out).column("id").to_pylist()
    assert sorted(ids) == list(range(0, 600, 2))


@pytest.mark.spark
def test_two_parquet_sources_of_one_pipeline_each_read_their_own_files(
        spark: SparkSession, tmp_path: Path) -> None:
    for name, first in (("a", 0), ("b", 1000)):
        (tmp_path / name).mkdir()
        ids = range(first, first + 50)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64()),
                                 "name": [f"{name}{i}" for i in ids]}),
                       tmp_path / name / "f.parquet")
    out = tmp_path / "out"
    sql = f"""
CREATE TABLE a (id BIGINT, name TEXT) WITH (connector = 'filesystem', type = 'source',
    format = 'parquet', path = '{tmp_path / "a"}');
CREATE TABLE b (id BIGINT, name TEXT) WITH (connector = 'filesystem', type = 'source',
    format = 'parquet', path = '{tmp_path / "b"}');
CREATE TABLE sink WITH (connector = 'filesystem', type = 'sink', format = 'parquet',
    path = '{out}');
INSERT INTO sink SELECT id, name FROM a WHERE id % 2 = 0;
INSERT INTO sink SELECT id, name FROM b WHERE id % 5 = 0;
"""
    counters = run_pipeline(spark, sql, tmp_path / "work", parallelism=2)
    assert counters["rows_in"] == 100
    rows = sorted(pq.read_table(out).to_pylist(), key=lambda r: r["id"])
    assert rows == [{"id": i, "name": f"a{i}"} for i in range(0, 50, 2)] + \
        [{"id": i, "name": f"b{i}"} for i in range(1000, 1050, 5)]
