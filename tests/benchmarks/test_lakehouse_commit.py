"""Time per epoch of the ``delta`` and ``iceberg`` sinks, against bare appends and Spark.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_lakehouse_commit.py -s``

Each sink writes epochs of 10,000 and of 200,000 rows (5 columns: BIGINT, TEXT,
TIMESTAMP, DECIMAL, BOOLEAN) from a cached Spark DataFrame of two partitions:
the time of ``write_epoch`` (the Spark tasks write the data files, the driver
commits them). References in the same run: the same rows, as one Arrow table on
the driver, appended by a bare ``write_deltalake`` and by a bare pyiceberg
``Table.append``; Spark's ``toArrow`` of the DataFrame (what collecting an epoch
to the driver costs); and Spark's own Parquet writer appending the DataFrame
(what a Spark job writes without a table format). Delta on the local
filesystem; Iceberg with its SQL catalog on the local PostgreSQL and a local
warehouse. Written to ``results.json`` under ``lakehouse_commit`` and
``lakehouse_commit_200k``; nothing is asserted.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import write_deltalake
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

from spate.engine.connectors import CONNECTORS
from spate.engine.connectors.filesystem.lakehouse import lake_schema
from tests.benchmarks.workloads import epoch_times, save_result
from tests.conftest import ThrowawayPostgres
from tests.engine.connectors.filesystem.lakehouse_support import (
    COLUMNS,
    catalog_name,
    catalog_uri,
    epoch_frame,
)
from tests.engine.connectors.support import make_table

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.timeout(1800)]

WARM = 3
#: (rows per epoch, epochs timed, results.json key): a small epoch, where the fixed cost
#: per epoch shows, and a large one, where moving the rows does.
SIZES = [(10_000, 30, "lakehouse_commit"), (200_000, 10, "lakehouse_commit_200k")]


def _summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median_ms": round(statistics.median(ordered), 1),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 1)}


@pytest.mark.parametrize(("rows", "epochs", "key"), SIZES, ids=["10k", "200k"])
def test_lakehouse_commit_latency(spark: SparkSession, tmp_path: Path,
                                  throwaway_postgres: ThrowawayPostgres, rows: int,
                                  epochs: int, key: str) -> None:
    def _timed_epochs(action: Callable[[int], Any]) -> list[float]:
        return epoch_times(action, epochs, WARM)

    frame = epoch_frame(spark, range(rows)).repartition(2).cache()
    frame.count()
    arrow = frame.toArrow().cast(lake_schema(COLUMNS))
    uri, name = catalog_uri(throwaway_postgres.create()), catalog_name()
    results: dict[str, dict[str, float]] = {}

    delta = CONNECTORS["delta"].create_sink(make_table(
        "delta", "sink", COLUMNS, name="bench", path=str(tmp_path / "delta")), None)  # type: ignore[arg-type]
    delta.pipeline = "bench/delta"
    delta.open(None)
    results["delta_sink"] = _summary(_timed_epochs(lambda e: delta.write_epoch(e, frame)))
    delta.close()
    bare_delta = str(tmp_path / "bare_delta")
    results["delta_bare"] = _summary(_timed_epochs(
        lambda e: write_deltalake(bare_delta, arrow, mode="append")))

    options = {"catalog.uri": uri, "catalog.name": name,
               "catalog.warehouse": str(tmp_path / "warehouse"), "namespace": "bench",
               "table_name": "sink"}
    iceberg = CONNECTORS["iceberg"].create_sink(make_table(
        "iceberg", "sink", COLUMNS, name="bench", **options), None)  # type: ignore[arg-type]
    iceberg.pipeline = "bench/iceberg"
    iceberg.open(None)
    results["iceberg_sink"] = _summary(_timed_epochs(lambda e: iceberg.write_epoch(e, frame)))
    iceberg.close()
    catalog = SqlCatalog(name, uri=uri, warehouse=f"file://{tmp_path / 'warehouse'}")
    try:
        bare = catalog.create_table(("bench", "bare"), arrow.schema)
        results["iceberg_bare"] = _summary(_timed_epochs(lambda e: bare.append(arrow)))
    finally:
        catalog.engine.dispose()
    collect = _summary(_timed_epochs(lambda e: frame.toArrow()))
    results["spark_to_arrow"] = collect
    # What a Spark user's job writes per epoch without a table format: Parquet files.
    parquet = str(tmp_path / "spark_parquet")
    results["spark_parquet"] = _summary(_timed_epochs(
        lambda e: frame.write.mode("append").parquet(parquet)))
    save_result(key, {"epochs": epochs, "rows": rows, **results})
    for key, value in results.items():
        print(f"{key:16} median {value['median_ms']:8.1f} ms   p95 {value['p95_ms']:8.1f} ms")
