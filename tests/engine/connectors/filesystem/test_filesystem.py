"""The filesystem connector: files in a local folder or on S3 (a real moto server)."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError, TableConfig
from spate.engine.connectors.filesystem.object_store import PENDING_DIR
from spate.engine.connectors.filesystem.source import FRESH, FilesystemDataSource
from tests.engine.connectors.filesystem.s3_support import S3Server, serve_s3
from tests.engine.connectors.support import make_table

pytestmark = pytest.mark.e2e

COLUMNS = (ColumnDef("id", T.LongType()), ColumnDef("kind", T.StringType()),
           ColumnDef("at", T.TimestampType()), ColumnDef("price", T.DoubleType()))
SCHEMA = T.StructType([T.StructField(c.name, c.spark_type) for c in COLUMNS])
START = dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    yield from serve_s3()


def _rows(first: int, count: int) -> list[tuple[Any, ...]]:
    return [(i, "ab"[i % 2], START + dt.timedelta(minutes=30 * (i % 4)), i / 4)
            for i in range(first, first + count)]


def _frame(spark: SparkSession, first: int, count: int, tasks: int = 1) -> DataFrame:
    """The rows in ``tasks`` partitions: each partition is one writer's files."""
    return spark.createDataFrame(_rows(first, count), SCHEMA).repartition(tasks)


def _table(path: str, role: str = "sink", columns: tuple[ColumnDef, ...] = COLUMNS,
           **options: Any) -> TableConfig:
    return make_table("filesystem", role, columns, path=path, type=role, **options)


def _s3_table(s3: S3Server, path: str, role: str = "sink", **options: Any) -> TableConfig:
    settings = {**s3.options(path), "type": role,
                **{k.replace("__", "."): str(v) for k, v in options.items()}}
    return TableConfig("t", "filesystem", role, settings, COLUMNS)


def _decode(kind: str, data: bytes) -> list[dict[str, Any]]:
    if kind == "parquet":
        return pq.read_table(io.BytesIO(data)).to_pylist()
    if kind == "csv":
        return pa_csv.read_csv(io.BytesIO(data)).to_pylist()
    if kind == "avro":
        return list(fastavro.reader(io.BytesIO(data)))
    return [json.loads(line) for line in data.decode().splitlines()]


def _local_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and PENDING_DIR not in p.parts}


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["json", "parquet", "avro", "csv"])
def test_each_format_round_trips_locally_and_on_s3(spark: SparkSession, s3: S3Server,
                                                   tmp_path: Path, kind: str) -> None:
    bucket = s3.create_bucket()
    df = _frame(spark, 0, 10)
    for table in (_table(str(tmp_path / "out"), format=kind),
                  _s3_table(s3, f"s3://{bucket}/out", format=kind)):
        sink = CONNECTORS["filesystem"].create_sink(table, SCHEMA)
        sink.open(None)
        marker = sink.write_epoch(0, df)
        assert sink.epoch_bytes and sink.epoch_bytes > 0
        sink.committed(0)
        sink.close()
        assert [name for name, _ in marker["files"]] == [f"part-0000000000-000-00000.{kind}"]
    local = _local_files(tmp_path / "out")
    assert list(local) == [f"part-0000000000-000-00000.{kind}"]
    assert s3.keys(bucket) == [f"out/part-0000000000-000-00000.{kind}"]
    for data in (local[f"part-0000000000-000-00000.{kind}"],
                 s3.get(bucket, f"out/part-0000000000-000-00000.{kind}")):
        rows = _decode(kind, data)
        assert [int(r["id"]) for r in rows] == list(range(10))
        assert [r["kind"] for r in rows] == ["ab"[i % 2] for i in range(10)]
        assert [float(r["price"]) for r in rows] == [i / 4 for i in range(10)]
    # and the source reads every format back (Spark's own run: the end-to-end test)
    source = _table(str(tmp_path / "out"), "source", format=kind)
    reader = _reader(source)
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    got = [r for r in _read_batch(reader, start, end) if r["_spate_control"] is None]
    # parquet files of the table's own types are left to Spark's reader (test_spark_parquet)
    read_by_spark = CONNECTORS["filesystem"].spark_rows(spark, source, 2, start, end)
    assert (read_by_spark is not None) == (kind == "parquet")
    if read_by_spark is not None:
        got += [row.asDict() for row in read_by_spark.collect()]
    assert [r["id"] for r in got] == list(range(10))
    at = got[1]["at"]  # Spark's rows are naive, in the session's zone (UTC)
    assert (at if at.tzinfo else at.replace(tzinfo=dt.UTC)) == dt.datetime(2024, 5, 1, 10, 30,
                                                                           tzinfo=dt.UTC)


@pytest.mark.spark
def test_each_task_writes_its_own_rows_as_its_own_files(spark: SparkSession, s3: S3Server,
                                                        tmp_path: Path) -> None:
    bucket = s3.create_bucket()
    df = spark.createDataFrame(_rows(0, 40), SCHEMA).repartitionByRange(3, "id")
    for table, published in (
            (_table(str(tmp_path / "out"), format="parquet"),
             lambda: sorted(_local_files(tmp_path / "out"))),
            (_s3_table(s3, f"s3://{bucket}/out", format="parquet"),
             lambda: s3.keys(bucket))):
        sink = CONNECTORS["filesystem"].create_sink(table, SCHEMA)
        sink.open(None)
        marker = sink.write_epoch(7, df)
        names = [name for name, _ in marker["files"]]
        assert names == [f"part-0000000007-{task:03d}-00000.parquet" for task in range(3)]
        assert published() == []  # the tasks staged them; the commit publishes
        sink.committed(7)
    files = _local_files(tmp_path / "out")
    assert sorted(files) == names
    assert s3.keys(bucket) == [f"out/{name}" for name in names]
    # each file holds one task's range of ids, and every row is there once
    ranges = [[r["id"] for r in _decode("parquet", files[name])] for name in names]
    assert sorted(i for ids in ranges for i in ids) == list(range(40))
    assert all(max(a) < min(b) for a, b in zip(ranges, ranges[1:], strict=False))
    assert [[r["id"] for r in _decode("parquet", s3.get(bucket, f"out/{n}"))]
            for n in names] == ranges


@pytest.mark.spark
def test_json_files_follow_the_tables_json_options(spark: SparkSession,
                                                   tmp_path: Path) -> None:
    table = _table(str(tmp_path / "out"), format="json",
                   **{"json.timestamp_format": "unix_millis"})
    sink = CONNECTORS["filesystem"].create_sink(table, SCHEMA)
    sink.open(None)
    sink.write_epoch(1, _frame(spark, 0, 2))
    sink.committed(1)
    (data,) = _local_files(tmp_path / "out").values()
    rows = _decode("json", data)
    assert [r["at"] for r in rows] == [int(START.timestamp() * 1000),
                                       int(START.timestamp() * 1000) + 30 * 60_000]
    assert [r["id"] for r in rows] == [0, 1] and set(rows[0]) == {"id", "kind", "at", "price"}


@pytest.mark.spark
def test_partitioning_and_rolling_lay_out_directories(spark: SparkSession, s3: S3Server,
                                                      tmp_path: Path) -> None:
    bucket = s3.create_bucket()
    options = {"format": "json", "partitioning__fields": "kind",
               "partitioning__time_pattern": "%Y/%m/%d/%H", "rolling_policy__max_records": "3"}
    df = _frame(spark, 0, 16)  # per hour and kind: 4 rows -> files of 3 and 1
    for table in (_table(str(tmp_path / "out"), **options),
                  _s3_table(s3, f"s3://{bucket}/p", **options)):
        sink = CONNECTORS["filesystem"].create_sink(table, SCHEMA)
        sink.open(None)
        sink.write_epoch(3, df)
        sink.committed(3)
    expected = [f"2024/05/01/{hour}/kind={kind}/part-0000000003-000-{seq:05d}.json"
                for seq, (hour, kind) in enumerate(
                    (h, k) for h in ("10", "11") for k in "ab" for _ in range(2))]
    assert sorted(_local_files(tmp_path / "out")) == sorted(expected)
    assert s3.keys(bucket) == sorted(f"p/{name}" for name in expected)
    files = _local_files(tmp_path / "out")
    sizes = sorted(len(_decode("json", files[name])) for name in expected)
    assert sizes == [1, 1, 1, 1, 3, 3, 3, 3]
    for name, data in files.items():
        kind = name.split("kind=")[1][0]
        assert {r["kind"] for r in _decode("json", data)} == {kind}


@pytest.mark.spark
def test_a_crash_before_the_commit_publishes_nothing_and_reopening_finishes(
        spark: SparkSession, s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.create_bucket()
    for table, listed in (
            (_table(str(tmp_path / "out"), format="parquet"),
             lambda: sorted(_local_files(tmp_path / "out"))),
            (_s3_table(s3, f"s3://{bucket}/x", format="parquet"),
             lambda: [k.removeprefix("x/") for k in s3.keys(bucket)])):
        connector = CONNECTORS["filesystem"]
        sink = connector.create_sink(table, SCHEMA)
        sink.open(None)
        first = sink.write_epoch(0, _frame(spark, 0, 5))
        sink.committed(0)
        sink.write_epoch(1, _frame(spark, 5, 5))  # crash: never committed
        assert listed() == ["part-0000000000-000-00000.parquet"]
        sink = connector.create_sink(table, SCHEMA)
        sink.open(first)  # the engine's last commit was epoch 0
        second = sink.write_epoch(1, _frame(spark, 5, 5))
        # crash after the engine committed epoch 1, before committed(1)
        assert listed() == ["part-0000000000-000-00000.parquet"]
        sink = connector.create_sink(table, SCHEMA)
        sink.open(second)
        sink.open(second)  # idempotent
        assert listed() == ["part-0000000000-000-00000.parquet",
                            "part-0000000001-000-00000.parquet"]
    assert not (tmp_path / "out" / PENDING_DIR).exists()
    assert s3.uploads(bucket) == []
    rows = pq.read_table(tmp_path / "out").to_pylist()
    assert sorted(r["id"] for r in rows) == list(range(10))


def _reader(table: TableConfig, parallelism: int = 2) -> Any:
    options = CONNECTORS["filesystem"].reader_options(table, parallelism)  # type: ignore[attr-defined]
    source = FilesystemDataSource(options)
    schema = source.schema()
    return source.streamReader(schema)


def _read_batch(reader: Any, start: dict[str, Any], end: dict[str, Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            rows.extend(batch.to_pylist())
    return rows


def test_one_shot_reads_a_tree_of_files_once_skipping_hidden_ones(tmp_path: Path) -> None:
    root = tmp_path / "in"
    (root / "day=1").mkdir(parents=True)
    (root / "day=2" / "deep").mkdir(parents=True)
    (root / "a.json").write_text('{"id": 1, "kind": "x"}\n{"id": 2, "kind": "y"}\n')
    (root / "day=1" / "b.json").write_text('{"id": 3, "kind": "x"}\n')
    (root / "day=2" / "deep" / "c.json").write_text('{"id": 4, "kind": "z"}\n')
    (root / "_SUCCESS").write_text("")
    (root / ".d.json.pending").write_text('{"id": 99}\n')
    table = make_table("filesystem", "source", COLUMNS[:2], path=str(root), format="json",
                       type="source",
                       bad_data="drop")
    table = TableConfig(table.name, table.connector, table.role, table.options,
                        (*COLUMNS[:2], ColumnDef("file", T.StringType())),
                        metadata={"file": "file_path"})
    assert CONNECTORS["filesystem"].is_bounded(table)
    reader = _reader(table)
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    assert end["files"] == 3 and end["eof"] and end["bytes"] > 0
    rows = _read_batch(reader, start, end)
    data = sorted((r["id"], r["file"], r["_spate_partition"]) for r in rows
                  if r["_spate_control"] is None)
    assert [(i, f) for i, f, _ in data] == [(1, "a.json"), (2, "a.json"), (3, "day=1/b.json"),
                                            (4, "day=2/deep/c.json")]
    assert {p for _, _, p in data} == {0, 1}  # files dealt to both readers
    assert [r["_spate_control"] for r in rows if r["_spate_control"]] == ["eof"]
    assert reader.latestOffset(end, None) == end
    assert CONNECTORS["filesystem"].batch_bytes(table, start, end) == end["bytes"]


def test_continuous_picks_up_files_added_later_on_s3(s3: S3Server) -> None:
    bucket = s3.create_bucket()
    client = s3.client()
    client.put_object(Bucket=bucket, Key="in/1.json", Body=b'{"id": 1}\n{"id": 2}\n')
    table = _s3_table(s3, f"s3://{bucket}/in", "source", format="json",
                      source__mode="continuous", source__poll_interval="1 ms")
    assert not CONNECTORS["filesystem"].is_bounded(table)
    reader = _reader(table, 1)
    start = reader.initialOffset()
    first = reader.latestOffset(start, None)
    assert [r["id"] for r in _read_batch(reader, start, first)] == [1, 2]
    assert reader.latestOffset(first, None) == first  # nothing new, no eof
    client.put_object(Bucket=bucket, Key="in/2.json", Body=b'{"id": 3}\nbroken\n')
    second = reader.latestOffset(first, None)
    assert second["files"] == 2 and not second["eof"]
    with pytest.raises(ConnectorError, match="bad record in 2.json") as caught:
        _read_batch(reader, first, second)
    assert caught.value.option == "bad_data"
    assert "profile-secret" not in json.dumps(reader.settings["store"]["s3"]["bucket"])


def _watched(reader: Any, table: TableConfig, offset: dict[str, Any]) -> tuple[bool | None, Any]:
    """The idle watcher's answer at ``offset``, and the offset the reader's next listing
    reaches from there."""
    return (CONNECTORS["filesystem"].has_input_after(table, 1, offset),
            reader.latestOffset(offset, None))


def test_the_idle_watcher_sees_files_past_the_committed_offset(s3: S3Server,
                                                                tmp_path: Path) -> None:
    root = tmp_path / "in"
    root.mkdir()
    bucket = s3.create_bucket()
    client = s3.client()
    # Polled every microsecond: each question lists (the next test shows the interval).
    local = _table(str(root), "source", format="json", source__mode="continuous",
                   source__poll_interval="1 us")
    on_s3 = _s3_table(s3, f"s3://{bucket}/in", "source", format="json",
                      source__mode="continuous", source__poll_interval="1 us")

    def put_local(name: str, data: bytes) -> None:
        (root / name).write_bytes(data)

    def put_s3(name: str, data: bytes) -> None:
        client.put_object(Bucket=bucket, Key=f"in/{name}", Body=data)

    for table, put in ((local, put_local), (on_s3, put_s3)):
        reader = _reader(table, 1)
        start = reader.initialOffset()
        assert _watched(reader, table, start) == (False, start), "an empty folder"
        put("1.json", b'{"id": 1}\n')
        answer, read = _watched(reader, table, start)
        assert answer is True and read["files"] == 1
        assert _watched(reader, table, read) == (False, read)
        # A writer's staging files and markers are not input, for the watcher either.
        put("_SUCCESS", b"")
        put(".2.json.pending", b'{"id": 2}\n')
        assert _watched(reader, table, read) == (False, read)
        put("2.json", b'{"id": 2}\n')
        answer, then = _watched(reader, table, read)
        assert answer is True and then["files"] == 2
        assert [r["id"] for r in _read_batch(reader, read, then)] == [2]
        assert _watched(reader, table, then) == (False, then)
    # A folder that is not there has no input yet; an unreachable bucket says so.
    assert CONNECTORS["filesystem"].has_input_after(
        _table(str(tmp_path / "none"), "source", format="json", source__mode="continuous"),
        1, dict(FRESH)) is False
    with pytest.raises(ConnectorError, match="does not exist"):
        CONNECTORS["filesystem"].has_input_after(
            _s3_table(s3, "s3://no-such-bucket-here/in", "source", format="json",
                      source__mode="continuous"), 1, dict(FRESH))


def test_the_idle_watcher_lists_no_more_often_than_the_source_polls(tmp_path: Path) -> None:
    connector = CONNECTORS["filesystem"]
    root = tmp_path / "in"
    root.mkdir()
    (root / "1.json").write_text('{"id": 1}\n')
    hourly = _table(str(root), "source", format="json", source__mode="continuous",
                    source__poll_interval="1 h")
    reader = _reader(hourly, 1)
    read = reader.latestOffset(reader.initialOffset(), None)
    assert connector.has_input_after(hourly, 1, read) is False
    (root / "2.json").write_text('{"id": 2}\n')
    assert connector.has_input_after(hourly, 1, read) is False, "listed again within the hour"
    assert connector.has_input_after(hourly, 1, dict(FRESH)) is True, "another offset is listed"
    often = _table(str(root), "source", format="json", source__mode="continuous",
                   source__poll_interval="1 us")
    assert connector.has_input_after(often, 1, read) is True
    assert connector.has_input_after(hourly, 1, read) is True, "found: no quiet listing left"


def test_a_one_shot_source_has_input_until_it_ended(tmp_path: Path) -> None:
    connector = CONNECTORS["filesystem"]
    root = tmp_path / "in"
    root.mkdir()
    (root / "1.json").write_text('{"id": 1}\n')
    table = _table(str(root), "source", format="json")
    reader = _reader(table, 1)
    start = reader.initialOffset()
    assert connector.has_input_after(table, 1, start) is True
    end = reader.latestOffset(start, None)
    assert end["eof"] and connector.has_input_after(table, 1, end) is False
    (root / "2.json").write_text('{"id": 2}\n')
    assert connector.has_input_after(table, 1, end) is False, "an ended source reads no more"
    assert connector.has_input_after(_table(str(root), format="json"), 1, end) is None, \
        "a sink"


def test_options_are_checked_with_the_option_at_fault(tmp_path: Path) -> None:
    connector = CONNECTORS["filesystem"]
    cases = {
        "format": {"format": "xml"},
        "rolling_policy.file_size": {"format": "json", "rolling_policy.file_size": "big"},
        "partitioning.fields": {"format": "json", "partitioning.fields": "nope"},
        "aws_region": {"format": "json", "aws_region": "us-east-1"},
    }
    for option, options in cases.items():
        settings = {"path": str(tmp_path), "type": "sink", **options}
        table = TableConfig("t", "filesystem", "sink", settings, COLUMNS)
        with pytest.raises(ConnectorError) as caught:
            connector.validate(table)
        assert caught.value.option == option, option
    s3_table = TableConfig("t", "filesystem", "sink", {"path": "s3://bucket/x", "type": "sink",
                                                       "format": "json", "aws_region": "us-east-1"},
                           COLUMNS)
    with pytest.raises(ConnectorError, match="access_key_id"):
        connector.validate(s3_table)


def test_reach_lists_the_prefix_with_the_profiles_keys(s3: S3Server, tmp_path: Path) -> None:
    bucket = s3.create_bucket()
    s3.client().put_object(Bucket=bucket, Key="in/1.json", Body=b"{}\n")
    connector = CONNECTORS["filesystem"]
    answer = connector.reach(s3.options(f"s3://{bucket}/in"), None,
                             TableConfig("t", "filesystem", "source", {}, ()).boundary)
    assert answer is not None and f"s3://{bucket}/in" in answer and "1 object" in answer
    with pytest.raises(ConnectorError, match="does not exist") as caught:
        connector.reach(s3.options("s3://no-such-bucket-here/in"), None,
                        TableConfig("t", "filesystem", "source", {}, ()).boundary)
    assert "profile-secret" not in str(caught.value)
    os.makedirs(tmp_path / "d")
    assert "directory" in (connector.reach({"path": str(tmp_path / "d")}, None,
                                           TableConfig("t", "filesystem", "source", {},
                                                       ()).boundary) or "")
