"""Spark's Python processes import PySpark's compiled files, not its zip
(spate.engine.worker_site.sitecustomize)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from spate.engine.spark import WORKER_SITE
from spate.engine.worker_site.sitecustomize import zips_last

pytestmark = pytest.mark.spark


def test_spark_zips_go_last_and_everything_else_keeps_its_order() -> None:
    path = ["/spark/python/lib/pyspark.zip", "/spark/python/lib/py4j-src.zip", "/work",
            "/lib/python311.zip", "/site-packages"]
    assert zips_last(path) == ["/work", "/lib/python311.zip", "/site-packages",
                                "/spark/python/lib/pyspark.zip",
                                "/spark/python/lib/py4j-src.zip"]


def test_a_task_imports_pyspark_from_its_installed_files(spark: SparkSession) -> None:
    def where(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import pyspark

        for batch in batches:
            yield pd.DataFrame({"file": [pyspark.__file__] * len(batch)})

    files = {row.file for row in spark.range(2).mapInPandas(where, "file string").collect()}
    assert files and not any(".zip" in f for f in files), files


def test_a_python_data_source_is_planned_with_pyspark_from_its_installed_files(
        spark: SparkSession) -> None:
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    class Where(DataSource):
        @classmethod
        def name(cls) -> str:
            return "spate_test_where"

        def schema(self) -> str:
            import pyspark

            return f"`{pyspark.__file__}` string"

        def reader(self, schema: object) -> DataSourceReader:
            return _Reader()

    class _Reader(DataSourceReader):
        def partitions(self) -> list[InputPartition]:
            return [InputPartition(0)]

        def read(self, partition: InputPartition) -> Iterator[tuple[str]]:
            yield ("x",)

    spark.dataSource.register(Where)
    planned_in = spark.read.format("spate_test_where").load().columns[0]
    assert planned_in.endswith(".py") and ".zip" not in planned_in, planned_in


def test_the_drivers_python_processes_run_the_worker_site(spark: SparkSession) -> None:
    """The Python processes the driver's JVM starts (the data source look-up, read
    planning, a streaming source's runner) inherit its environment, not
    ``spark.executorEnv``: the JVM itself has the worker site on its path, and this
    process's own path is as it was."""
    gateway = spark.sparkContext._gateway  # noqa: SLF001 - the JVM's process
    environ = Path(f"/proc/{gateway.proc.pid}/environ").read_bytes().split(b"\0")
    paths = [entry.split(b"=", 1)[1].decode() for entry in environ
             if entry.startswith(b"PYTHONPATH=")]
    assert paths and str(WORKER_SITE) in paths[0].split(os.pathsep)
    assert str(WORKER_SITE) not in os.environ.get("PYTHONPATH", "")
