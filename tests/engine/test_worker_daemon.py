"""Spark's Python workers import PySpark's compiled files, not its zip
(spate.engine.worker_daemon)."""

from __future__ import annotations

from collections.abc import Iterator

import pandas as pd
import pytest
from pyspark.sql import SparkSession

from spate.engine.worker_daemon import _zips_last

pytestmark = pytest.mark.spark


def test_spark_zips_go_last_and_everything_else_keeps_its_order() -> None:
    path = ["/spark/python/lib/pyspark.zip", "/spark/python/lib/py4j-src.zip", "/work",
            "/lib/python311.zip", "/site-packages"]
    assert _zips_last(path) == ["/work", "/lib/python311.zip", "/site-packages",
                                "/spark/python/lib/pyspark.zip",
                                "/spark/python/lib/py4j-src.zip"]


def test_a_task_imports_pyspark_from_its_installed_files(spark: SparkSession) -> None:
    def where(batches: Iterator[pd.DataFrame]) -> Iterator[pd.DataFrame]:
        import pyspark

        for batch in batches:
            yield pd.DataFrame({"file": [pyspark.__file__] * len(batch)})

    files = {row.file for row in spark.range(2).mapInPandas(where, "file string").collect()}
    assert files and not any(".zip" in f for f in files), files
