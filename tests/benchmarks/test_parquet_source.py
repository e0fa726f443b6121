"""A ``filesystem`` source of parquet files: Spark's own reader against the Python source's
decoder, and against a Spark user's batch job.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_parquet_source.py -s``

``ROWS`` rows in ten parquet files written by Spark (five columns: three numbers, a
text, a timestamp), read by a pipeline that filters and projects them into
``blackhole`` at parallelism 2, three ways, in alternating rounds after a warm-up
round:

- ``native``: a Spark user's job, ``spark.read.parquet`` + the same filter and
  projection + the ``noop`` writer;
- ``spark_reader``: the pipeline as it runs (the files have the table's own types,
  so Spark's parquet reader reads them: ``engine/connectors/filesystem/spark_parquet.py``);
- ``python_decoder``: the same pipeline with Spark's reader turned off, so the
  Python source decodes every file with pyarrow, as it did before.

Whole runs (planning, the streaming query's start, its epochs, the commit) and the
epochs alone. The medians go to ``results.json`` under ``parquet_source``. The test
checks every row arrived; it asserts nothing about speed.
"""

from __future__ import annotations

import os
import statistics
import time
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from spate.engine.connectors.filesystem.connector import FilesystemConnector
from spate.engine.runtime.reports import EpochReport
from tests.benchmarks.workloads import PARALLELISM, save_result
from tests.engine.harness import run_pipeline

pytestmark = [pytest.mark.benchmark, pytest.mark.spark]

ROWS = int(os.environ.get("SPATE_BENCH_PARQUET_ROWS", "4000000"))
ROUNDS = int(os.environ.get("SPATE_BENCH_PARQUET_ROUNDS", "3"))


def _sql(folder: Path) -> str:
    return f"""
CREATE TABLE src (counter BIGINT, tripled BIGINT, bucket BIGINT, label TEXT, ts TIMESTAMP)
WITH (connector = 'filesystem', type = 'source', path = '{folder}', format = 'parquet');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter, label FROM src WHERE bucket < 500;
"""


def test_parquet_source_with_sparks_reader_against_the_python_decoder(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "in"
    spark.range(0, ROWS, numPartitions=10).selectExpr(
        "id AS counter", "id * 3 AS tripled", "id % 1000 AS bucket",
        "CAST(id AS STRING) AS label", "timestamp_micros(1700000000000000 + id * 1000) AS ts",
    ).write.parquet(str(folder))
    reader_settings = FilesystemConnector._reader_settings  # noqa: SLF001 - the switch

    def python_only(self: FilesystemConnector, *args: Any) -> Any:
        settings, schema = reader_settings(self, *args)
        return {**settings, "spark_parquet": False}, schema

    def spate(mode: str, workdir: Path) -> tuple[float, float]:
        if mode == "python_decoder":
            monkeypatch.setattr(FilesystemConnector, "_reader_settings", python_only)
        reports: list[EpochReport] = []
        started = time.perf_counter()
        counters = run_pipeline(spark, _sql(folder), workdir, parallelism=PARALLELISM,
                                reports=reports, timeout_s=1800)
        took = time.perf_counter() - started
        monkeypatch.setattr(FilesystemConnector, "_reader_settings", reader_settings)
        assert counters["rows_in"] == ROWS and counters["rows_out"] == ROWS // 2
        return took, sum(r.duration_s for r in reports)

    def native() -> float:
        started = time.perf_counter()
        spark.read.parquet(str(folder)).where("bucket < 500").select(
            "counter", "label").write.format("noop").mode("overwrite").save()
        return time.perf_counter() - started

    runs: dict[str, list[float]] = {"native": [], "spark_reader": [], "python_decoder": []}
    epochs: dict[str, list[float]] = {"spark_reader": [], "python_decoder": []}
    for attempt in range(ROUNDS + 1):  # the first round warms up
        measured = {"native": (native(), 0.0)}
        for mode in ("spark_reader", "python_decoder"):
            measured[mode] = spate(mode, tmp_path / f"{mode}{attempt}")
        if attempt:
            for mode, (took, in_epochs) in measured.items():
                runs[mode].append(took)
                if mode in epochs:
                    epochs[mode].append(in_epochs)
    print({"runs": runs, "epochs": epochs})
    median = {mode: statistics.median(s) for mode, s in runs.items()}
    result = {
        "rows": ROWS, "parallelism": PARALLELISM,
        **{f"{mode}_s": round(s, 3) for mode, s in median.items()},
        **{f"{mode}_epochs_s": round(statistics.median(s), 3) for mode, s in epochs.items()},
        "spark_reader_vs_python_decoder": round(
            median["python_decoder"] / median["spark_reader"], 2),
        "spark_reader_vs_native": round(median["native"] / median["spark_reader"], 2),
    }
    save_result("parquet_source", result)
    print(result)
