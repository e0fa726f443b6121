"""End-to-end latency: from when a row is due at the source to when it is visible in the
sink's file, for Spate and for native Spark Structured Streaming on the same source.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_latency.py -s``

The source is ``impulse`` at 1,000 and 10,000 rows per second of wall clock: row
``c`` of a subtask is due (readable, and stamped with that event time) ``c /
rate`` seconds after the stream's start.  A thread polls the sink's file every
5 ms and notes when each line appears.

* Stateless (``SELECT counter …``): a row's latency is its appearance minus its
  due time.
* 1 s TUMBLE count: a window can be emitted only once the watermark passes its
  end, i.e. once a row ``delay`` past the end is due (the default watermark
  delay is 1 s); its latency is its appearance minus that moment.

Native Spark runs the same queries over its own ``rate`` source at the same rate
(row ``c`` stamped ``c / rate`` seconds after the source's start; Spark admits a
second's rows at a time) with its shortest trigger (the default: the next batch as
soon as one ends), writing each batch's rows to a file in ``foreachBatch`` as
Spate's ``single_file`` sink does (append, flush, fsync).  The first 5 s of each
run are not counted (warm-up).  Written to ``results.json`` under ``latency``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from spate.engine.connectors import HIDDEN_TIMESTAMP
from spate.engine.planner import plan_pipeline
from spate.engine.runtime.runner import PipelineRunner, RunOptions
from spate.statestore import StateStore, open_store
from tests.benchmarks.workloads import save_result

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.timeout(3600)]

RATES = (1_000, 10_000)
RUN_S = 30.0
WARMUP_S = 5.0
POLL_S = 0.005
#: The watermark delay both engines use (Spate's default).
DELAY_S = 1.0


class Tail:
    """Notes when each line of a growing file appears."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: list[tuple[float, dict[str, Any]]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        position, pending = 0, b""
        while not self._stop.is_set():
            if self.path.exists():
                with self.path.open("rb") as source:
                    source.seek(position)
                    chunk = source.read()
                now = time.time()
                position += len(chunk)
                pending += chunk
                *lines, pending = pending.split(b"\n")
                self.seen.extend((now, json.loads(line)) for line in lines if line)
            time.sleep(POLL_S)

    def stop(self) -> None:
        time.sleep(0.2)
        self._stop.set()
        self._thread.join()


def source_sql(rate: int) -> str:
    return f"CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '{rate}');\n"


QUERIES = {
    "stateless": "SELECT counter, subtask_index FROM ticks",
    "tumble_1s": ("SELECT w.end AS window_end, n FROM (SELECT TUMBLE(INTERVAL '1' SECOND) "
                  "AS w, count(*) AS n FROM ticks GROUP BY w)"),
}


def native_query(name: str, ticks: DataFrame) -> DataFrame:
    if name == "stateless":
        return ticks.select("counter", "subtask_index")
    return (ticks.withWatermark(HIDDEN_TIMESTAMP, f"{DELAY_S} seconds")
            .groupBy(F.window(HIDDEN_TIMESTAMP, "1 second").alias("w")).count()
            .select(F.col("w.end").alias("window_end"), F.col("count").alias("n")))


def latencies(name: str, seen: list[tuple[float, dict[str, Any]]], start_s: float,
              rate: int) -> list[float]:
    """Each counted row's latency (s); ``start_s``: the stream's start (wall clock)."""
    found = []
    for appeared, row in seen:
        if name == "stateless":
            due = start_s + row["counter"] / rate
        else:
            end = row["window_end"]
            end_s = (end if isinstance(end, int | float) else _seconds(end))
            due = end_s + DELAY_S
        if due - start_s >= WARMUP_S:
            found.append(appeared - due)
    return found


def _seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def run_spate(spark: SparkSession, name: str, rate: int) -> list[float]:
    work = Path(tempfile.mkdtemp(prefix="spate-latency-"))
    out = work / "out.jsonl"
    sql = source_sql(rate) + (
        f"CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json', "
        f"type = 'sink');\nINSERT INTO out {QUERIES[name]};\n")
    store = open_store(f"sqlite:///{work / 'state.db'}")
    runner = PipelineRunner(plan_pipeline(sql), spark, store.pipeline("bench", "latency"),
                            RunOptions(parallelism=1, checkpoint_dir=str(work / "checkpoint")))
    threading.Timer(RUN_S, runner.request_stop).start()
    try:
        seen, start_s = _tailed(work, out, runner.run, lambda: _spate_start_s(store))
    finally:
        store.close()
    return latencies(name, seen, start_s, rate)


def _spate_start_s(store: StateStore) -> float | None:
    """The impulse stream's start (its offsets' ``start_ns``), as the state store keeps it."""
    offsets = store.pipeline("bench", "latency").epoch_metadata().get("offsets") or {}
    return int(offsets["ticks"]["start_ns"]) / 1e9 if "ticks" in offsets else None


def run_native(spark: SparkSession, name: str, rate: int) -> list[float]:
    work = Path(tempfile.mkdtemp(prefix="native-latency-"))
    out = work / "out.jsonl"
    ticks = (spark.readStream.format("rate").option("rowsPerSecond", rate)
             .option("numPartitions", 1).load()
             .select(F.col("value").alias("counter"), F.lit(0).alias("subtask_index"),
                     F.col("timestamp").alias(HIDDEN_TIMESTAMP)))
    handle = out.open("ab")

    def write(batch: DataFrame, _: int) -> None:
        rows = batch.collect()
        handle.write(b"".join(json.dumps(_plain(row.asDict())).encode() + b"\n"
                              for row in rows))
        handle.flush()
        os.fsync(handle.fileno())

    def run() -> None:
        query = (native_query(name, ticks).writeStream.outputMode("append")
                 .foreachBatch(write).option("checkpointLocation", str(work / "checkpoint"))
                 .start())
        time.sleep(RUN_S)
        query.stop()

    try:
        seen, start_s = _tailed(work, out, run,
                                lambda: _rate_start_s(work / "checkpoint" / "sources" / "0"))
    finally:
        handle.close()
    return latencies(name, seen, start_s, rate)


def _tailed(work: Path, out: Path, run: Callable[[], None],
            start_of: Callable[[], float | None]
            ) -> tuple[list[tuple[float, dict[str, Any]]], float]:
    """``run()`` while a :class:`Tail` watches ``out``: the rows seen and the stream's
    start (``start_of()`` once it ran; else when ``run`` began).  ``work`` goes after."""
    tail = Tail(out)
    started = time.time()
    try:
        run()
        start_s = start_of()
    finally:
        tail.stop()
        shutil.rmtree(work, ignore_errors=True)
    return tail.seen, start_s or started


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v.timestamp() if hasattr(v, "timestamp") else v for k, v in row.items()}


def _rate_start_s(metadata: Path) -> float | None:
    """When Spark's ``rate`` source started (it logs the time, in ms, in its metadata)."""
    logged = sorted(metadata.glob("[0-9]*"), key=lambda p: int(p.name))
    return int(logged[0].read_text().splitlines()[-1]) / 1e3 if logged else None


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"rows": len(ordered), "p50_s": round(statistics.median(ordered), 3),
            "p99_s": round(ordered[int(0.99 * (len(ordered) - 1))], 3)}


RUNNERS: dict[str, Callable[[SparkSession, str, int], list[float]]] = {
    "spate": run_spate, "native": run_native}


def test_latency_against_native_spark(spark: SparkSession) -> None:
    results: dict[str, Any] = {}
    for name in QUERIES:
        for rate in RATES:
            for engine, run in RUNNERS.items():
                measured = summary(run(spark, name, rate))
                results.setdefault(name, {}).setdefault(str(rate), {})[engine] = measured
                print(f"{name:>10} {rate:>6}/s {engine:>6}: p50 {measured['p50_s']:.3f} s, "
                      f"p99 {measured['p99_s']:.3f} s ({measured['rows']} rows)", flush=True)
                assert measured["rows"] > 0
    save_result("latency", results)
