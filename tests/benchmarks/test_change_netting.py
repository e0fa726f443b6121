"""What an updating sink spends each epoch netting its rows into changes
(``change_records``: the ``c``/``u``/``d`` records a ``debezium_json`` sink writes).

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_change_netting.py -s``

An epoch of an updating aggregate: per key, the withdrawal of its old row and its new
row, cached as the range tasks leave them.  Spate's netting places the rows by key in
one shuffle and runs both of its aggregations there; the baseline is the same two
aggregations as a Spark user writes them (``groupBy(key, row)``, then ``groupBy(key)``),
which Spark plans with a shuffle each.  Both write to the ``noop`` sink, alternating,
12 epochs each after 3 to warm up; the median is kept.  Written to ``results.json``
under ``change_netting``; nothing is asserted.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spate.engine.connectors.core.base import RETRACT, ROW_KEY
from spate.engine.connectors.core.changes import _change_columns, change_records
from tests.benchmarks.workloads import save_result

pytestmark = [pytest.mark.benchmark, pytest.mark.spark]

WARM_EPOCHS = 3
EPOCHS = 12
KEYS = (1_000, 100_000)


def _epoch(spark: SparkSession, keys: int) -> DataFrame:
    """Each key's old row withdrawn and its new row added, cached."""
    base = spark.range(keys).select(F.col("id").alias("k"), (F.col("id") * 2).alias("n"),
                                    F.to_json(F.struct("id")).alias(ROW_KEY))
    old = base.select("k", "n", F.lit(True).alias(RETRACT), ROW_KEY)
    new = base.select("k", (F.col("n") + 1).alias("n"), F.lit(False).alias(RETRACT), ROW_KEY)
    frame = old.unionByName(new).persist()
    frame.count()
    return frame


def _two_shuffles(frame: DataFrame) -> DataFrame:
    """The netting's aggregations without the shared placement."""
    columns = _change_columns(frame.schema)
    net = (frame.select(columns.key.alias("key"), columns.row.alias("row"),
                        columns.sign.alias("n"))
           .groupBy("key", "row").agg(F.sum("n").alias("n")).where(F.col("n") != 0))
    per_key = net.groupBy("key").agg(columns.old.alias("old"), columns.new.alias("new"))
    return per_key.select(F.explode(columns.records).alias("change")).select("change.*")


def _epoch_ms(frame: DataFrame, netting: Callable[[DataFrame], DataFrame],
              times: list[float]) -> None:
    began = time.perf_counter()
    netting(frame).write.format("noop").mode("append").save()
    times.append((time.perf_counter() - began) * 1000)


def test_change_netting(spark: SparkSession) -> None:
    figures: dict[str, dict[str, float]] = {}
    for keys in KEYS:
        frame = _epoch(spark, keys)
        spate: list[float] = []
        baseline: list[float] = []
        for epoch in range(WARM_EPOCHS + EPOCHS):
            _epoch_ms(frame, change_records, spate)
            _epoch_ms(frame, _two_shuffles, baseline)
            if epoch < WARM_EPOCHS:
                spate.clear()
                baseline.clear()
        frame.unpersist()
        figures[str(keys)] = {
            "spate_ms": round(statistics.median(spate), 1),
            "two_shuffles_ms": round(statistics.median(baseline), 1),
            "speedup": round(statistics.median(baseline) / statistics.median(spate), 2)}
    print(f"\nnetting an updating epoch's changes, ms per epoch: {figures}")
    save_result("change_netting", figures)
