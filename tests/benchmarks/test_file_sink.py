"""The ``filesystem`` sink alone: an epoch's rows written as files on the executors,
against the same files written on the driver and against Spark's own writer.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_file_sink.py -s``

One epoch of ``ROWS`` rows in two partitions (the benchmarks' parallelism), four
columns (two numbers, a bucket, a text), written to a local folder as parquet and as
json lines, three ways, in alternating rounds so that the machine's noise falls on
all of them alike (after a first round not counted, which starts Python
workers):

- ``spark``: what a Spark user writes, ``df.write.parquet`` / ``df.write.json``;
- ``executors``: the sink as pipelines use it (``write_epoch`` then ``committed``):
  each task stages its own rows' files, the driver publishes them;
- ``driver``: the same files written by the same code on the driver after collecting
  the epoch with ``toArrow`` (how the sink wrote before it wrote on the executors).

The median of the rounds goes to ``results.json`` under ``file_sink``. The test
checks every row arrived; it asserts nothing about speed.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession

from spate.engine.connectors import CONNECTORS, ColumnDef
from spate.engine.connectors.filesystem.sink import _LINE, EpochFiles, FilesystemSink
from spate.engine.connectors.formats.records import record_column
from tests.benchmarks.workloads import PARALLELISM, save_result
from tests.engine.connectors.support import make_table

pytestmark = [pytest.mark.benchmark, pytest.mark.spark]

ROWS = int(os.environ.get("SPATE_BENCH_SINK_ROWS", "2000000"))
ROUNDS = int(os.environ.get("SPATE_BENCH_SINK_ROUNDS", "5"))


def _rows(spark: SparkSession) -> DataFrame:
    frame = spark.range(0, ROWS, numPartitions=PARALLELISM).selectExpr(
        "id AS counter", "id * 3 AS tripled", "id % 1000 AS bucket",
        "CAST(id AS STRING) AS label")
    return frame.cache()


def _sink(frame: DataFrame, folder: Path, kind: str) -> FilesystemSink:
    columns = tuple(ColumnDef(f.name, f.dataType) for f in frame.schema.fields)
    table = make_table("filesystem", "sink", columns, path=str(folder), type="sink",
                       format=kind)
    sink = CONNECTORS["filesystem"].create_sink(table, frame.schema)
    assert isinstance(sink, FilesystemSink)
    sink.open(None)
    return sink


def _on_executors(frame: DataFrame, folder: Path, kind: str) -> float:
    sink = _sink(frame, folder, kind)
    started = time.perf_counter()
    sink.write_epoch(0, frame)
    sink.committed(0)
    return time.perf_counter() - started


def _on_driver(frame: DataFrame, folder: Path, kind: str) -> float:
    sink = _sink(frame, folder, kind)
    started = time.perf_counter()
    rows = frame.select("*", record_column(frame, sink.spec).alias(_LINE)) if kind == "json" \
        else frame
    files = EpochFiles(sink.store, sink.layout, sink.schema, 0)(0, rows.toArrow())
    for file in files:
        sink.store.publish(0, file["name"], file["token"])
    return time.perf_counter() - started


def _spark(frame: DataFrame, folder: Path, kind: str) -> float:
    started = time.perf_counter()
    getattr(frame.write, kind)(str(folder))
    return time.perf_counter() - started


def _count(folder: Path, kind: str) -> int:
    files = [p for p in folder.rglob(f"*.{kind}") if not p.name.startswith((".", "_"))]
    if kind == "parquet":
        return sum(pq.read_metadata(p).num_rows for p in files)
    return sum(p.read_bytes().count(b"\n") for p in files)


def test_file_sink_on_executors_against_the_driver_and_sparks_writer(
        spark: SparkSession, tmp_path: Path) -> None:
    frame = _rows(spark)
    assert frame.count() == ROWS
    ways = {"spark": _spark, "executors": _on_executors, "driver": _on_driver}
    result: dict[str, dict[str, float]] = {}
    for kind in ("parquet", "json"):
        seconds: dict[str, list[float]] = {way: [] for way in ways}
        for attempt in range(ROUNDS + 1):  # the first round warms up (Python workers)
            for way, write in ways.items():
                folder = tmp_path / f"{kind}-{way}-{attempt}"
                took = write(frame, folder, kind)
                assert _count(folder, kind) == ROWS, (kind, way)
                if attempt:
                    seconds[way].append(took)
        print(kind, seconds)
        medians = {way: statistics.median(s) for way, s in seconds.items()}
        result[kind] = {
            **{f"{way}_s": round(s, 3) for way, s in medians.items()},
            "executors_rows_per_s": round(ROWS / medians["executors"]),
            "executors_vs_driver": round(medians["driver"] / medians["executors"], 2),
            "executors_vs_spark": round(medians["spark"] / medians["executors"], 2),
        }
    frame.unpersist()
    save_result("file_sink", {"rows": ROWS, "partitions": PARALLELISM, **result})
    print(result)
