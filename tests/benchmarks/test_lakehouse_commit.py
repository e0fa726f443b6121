"""Commit latency per epoch of the ``delta`` and ``iceberg`` sinks, against a bare append.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_lakehouse_commit.py -s``

Each sink writes ``EPOCHS`` epochs of ``ROWS`` rows (5 columns: BIGINT, TEXT,
TIMESTAMP, DECIMAL, BOOLEAN) from a cached Spark DataFrame: the time of
``write_epoch`` (collecting the epoch as Arrow on the driver, reading nothing
back, one append commit). As the reference, in the same run, the same Arrow
table is appended ``EPOCHS`` times by a bare ``write_deltalake`` to another
table, and by a bare pyiceberg ``Table.append`` to another table of the same
catalog. Delta on the local filesystem; Iceberg with its SQL catalog on the
local PostgreSQL and a local warehouse. Written to ``results.json`` under
``lakehouse_commit``; nothing is asserted.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from deltalake import write_deltalake
from pyiceberg.catalog.sql import SqlCatalog
from pyspark.sql import SparkSession

from spate.engine.connectors import CONNECTORS
from spate.engine.connectors.filesystem.lakehouse import lake_schema
from tests.benchmarks.workloads import save_result
from tests.conftest import ThrowawayPostgres
from tests.engine.connectors.filesystem.lakehouse_support import (
    COLUMNS,
    catalog_name,
    catalog_uri,
    epoch_frame,
)
from tests.engine.connectors.support import make_table

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.timeout(1800)]

EPOCHS, ROWS, WARM = 30, 10_000, 3


def _timed(action: Callable[[int], Any]) -> list[float]:
    for epoch in range(WARM):
        action(epoch)
    times = []
    for epoch in range(WARM, WARM + EPOCHS):
        start = time.perf_counter()
        action(epoch)
        times.append((time.perf_counter() - start) * 1000)
    return times


def _summary(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    return {"median_ms": round(statistics.median(ordered), 1),
            "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))], 1)}


def test_lakehouse_commit_latency(spark: SparkSession, tmp_path: Path,
                                  throwaway_postgres: ThrowawayPostgres) -> None:
    frame = epoch_frame(spark, range(ROWS)).cache()
    frame.count()
    arrow = frame.toArrow().cast(lake_schema(COLUMNS))
    uri, name = catalog_uri(throwaway_postgres.create()), catalog_name()
    results: dict[str, dict[str, float]] = {}

    delta = CONNECTORS["delta"].create_sink(make_table(
        "delta", "sink", COLUMNS, name="bench", path=str(tmp_path / "delta")), None)  # type: ignore[arg-type]
    delta.pipeline = "bench/delta"
    delta.open(None)
    results["delta_sink"] = _summary(_timed(lambda e: delta.write_epoch(e, frame)))
    delta.close()
    bare_delta = str(tmp_path / "bare_delta")
    results["delta_bare"] = _summary(_timed(
        lambda e: write_deltalake(bare_delta, arrow, mode="append")))

    options = {"catalog.uri": uri, "catalog.name": name,
               "catalog.warehouse": str(tmp_path / "warehouse"), "namespace": "bench",
               "table_name": "sink"}
    iceberg = CONNECTORS["iceberg"].create_sink(make_table(
        "iceberg", "sink", COLUMNS, name="bench", **options), None)  # type: ignore[arg-type]
    iceberg.pipeline = "bench/iceberg"
    iceberg.open(None)
    results["iceberg_sink"] = _summary(_timed(lambda e: iceberg.write_epoch(e, frame)))
    iceberg.close()
    catalog = SqlCatalog(name, uri=uri, warehouse=f"file://{tmp_path / 'warehouse'}")
    try:
        bare = catalog.create_table(("bench", "bare"), arrow.schema)
        results["iceberg_bare"] = _summary(_timed(lambda e: bare.append(arrow)))
    finally:
        catalog.engine.dispose()
    collect = _summary(_timed(lambda e: frame.toArrow()))
    results["spark_to_arrow"] = collect
    save_result("lakehouse_commit", {"epochs": EPOCHS, "rows": ROWS, **results})
    for key, value in results.items():
        print(f"{key:16} median {value['median_ms']:8.1f} ms   p95 {value['p95_ms']:8.1f} ms")
