"""One stream into four sinks: Spate against a Spark user's ``foreachBatch``.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_sink_fanout.py -s``

A pipeline often sends one stream to several places.  Here four queries read the
same bounded Nexmark stream (200,000 events, 10,000 an epoch: 20 epochs) and each
writes its own ``filesystem`` sink (JSON lines, written by the Spark tasks); Spate
writes an epoch's sinks one after another.  The reference is what a Spark user
writes for four outputs of one stream: ``foreachBatch`` caching the batch and
writing it four times with Spark's own JSON writer.  Whole runs, best of two each,
alternating; written to ``results.json`` under ``sink_fanout``; nothing is asserted.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest
from pyspark.sql import DataFrame, SparkSession

from tests.benchmarks.workloads import (
    Stream,
    Timing,
    _nexmark,
    _until_read,
    best_run,
    run_spate,
    save_result,
)

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.timeout(3600)]

STREAM = Stream(events=200_000, event_rate=10_000, batch=10_000)
#: (sink, the rows it takes): four filters of the stream, as a Spark user writes them too
OUTPUTS = [
    ("bids", "bid IS NOT NULL", "bid.auction AS auction, bid.price AS price"),
    ("dear_bids", "bid IS NOT NULL AND bid.price > 1000",
     "bid.auction AS auction, bid.bidder AS bidder"),
    ("auctions", "auction IS NOT NULL", "auction.id AS id, auction.seller AS seller"),
    ("persons", "person IS NOT NULL", "person.id AS id, person.city AS city"),
]


def _spate_sql(out: Path) -> str:
    sql = STREAM.table_sql()
    for name, where, select in OUTPUTS:
        sql += (f"CREATE TABLE {name}_out WITH (connector = 'filesystem', type = 'sink', "
                f"format = 'json', path = '{out / name}');\n"
                f"INSERT INTO {name}_out SELECT {select} FROM nexmark WHERE {where};\n")
    return sql


def _native(spark: SparkSession, out: Path) -> Timing:
    work = Path(tempfile.mkdtemp(prefix="native-fanout-"))

    def write(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        for name, where, select in OUTPUTS:
            (batch.where(where).selectExpr(*select.split(", "))
             .write.mode("append").json(str(out / name)))
        batch.unpersist()

    try:
        started = time.perf_counter()
        running = (_nexmark(spark, STREAM).writeStream.foreachBatch(write)
                   .option("checkpointLocation", str(work / "checkpoint")).start())
        rows_in = _until_read(running, STREAM.events)
        return Timing(time.perf_counter() - started, STREAM.events, rows_in)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def test_four_sinks_of_one_stream(spark: SparkSession) -> None:
    runs: dict[str, list[Timing]] = {"spate": [], "native": []}
    for _ in range(2):
        for case in runs:
            out = Path(tempfile.mkdtemp(prefix="fanout-out-"))
            try:
                runs[case].append(_native(spark, out) if case == "native"
                                  else run_spate(spark, _spate_sql(out), STREAM.events))
            finally:
                shutil.rmtree(out, ignore_errors=True)
    best = {case: best_run(timings, STREAM.events) for case, timings in runs.items()}
    result: dict[str, object] = {
        case: {"seconds": round(t.seconds, 2), "events_per_s": round(t.events_per_s)}
        for case, t in best.items()}
    result["spate_over_native_speed"] = round(best["native"].seconds / best["spate"].seconds, 2)
    print(result)
    save_result("sink_fanout", result)
