"""What a small pipeline costs per epoch, and per second: Spate's epochs back to back,
paced (rate-adaptive, the default), on a fixed 1 s trigger, and native Spark.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_epoch_cost.py -s``

Every case reads 10 rows/s for a warm-up and then a measured window: Spate's
``impulse`` into ``blackhole``, and what a Spark user would write for the same,
the built-in ``rate`` source into the ``noop`` sink.  CPU is that of the whole
process tree (this process with its driver JVM and Spark's Python workers) over
the window, sampled every 0.5 s so a worker that ends keeps what it used.  All
cases share one Spark application, one after another, so the JVM's compiler
warm-up falls mostly on the first.  Written to ``results.json``
under ``epoch_cost``; nothing is asserted.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest
from pyspark.sql import SparkSession

from spate.engine.defaults import DEFAULT_EPOCH_MAX_DELAY_MS
from spate.engine.planner import plan_pipeline
from spate.engine.runtime.pacing import Pacing, pacing_for
from spate.engine.runtime.reports import EpochReport
from spate.engine.runtime.runner import PipelineRunner, RunOptions
from spate.statestore import open_store
from tests.benchmarks.workloads import save_result

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.timeout(3600)]

RATE = 10
WARM_S = 40.0
MEASURE_S = 40.0

SQL = f"""
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '{RATE}');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter, subtask_index FROM ticks;
"""


class TreeCpu:
    """CPU seconds of this process and its descendants, sampled every 0.5 s so that a
    process that ends keeps the CPU it had used (its last sample)."""

    def __init__(self) -> None:
        self._seen: dict[tuple[int, float], float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            self.sample()

    def sample(self) -> float:
        me = psutil.Process()
        for process in (me, *me.children(recursive=True)):
            try:
                times = process.cpu_times()
                key = (process.pid, process.create_time())
            except psutil.Error:
                continue
            self._seen[key] = max(self._seen.get(key, 0.0), times.user + times.system)
        return sum(self._seen.values())

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def measure(start: Callable[[], Callable[[], int]]) -> dict[str, float]:
    """``start()`` begins a run and returns a function counting its epochs so far;
    CPU and epochs over the window after the warm-up."""
    epochs = start()
    time.sleep(WARM_S)
    tree = TreeCpu()
    try:
        cpu, count, began = tree.sample(), epochs(), time.monotonic()
        time.sleep(MEASURE_S)
        wall = time.monotonic() - began
        ran = epochs() - count
        cores = (tree.sample() - cpu) / wall
    finally:
        tree.stop()
    return {"cores": round(cores, 3), "epochs_per_s": round(ran / wall, 2),
            "cpu_ms_per_epoch": round(cores * wall / ran * 1000) if ran else None}


def spate_case(spark: SparkSession, work: Path, trigger: str | None,
               pacing: Pacing | None) -> dict[str, float]:
    store = open_store(f"sqlite:///{work / 'state.db'}")
    reports: list[EpochReport] = []
    runner = PipelineRunner(plan_pipeline(SQL), spark, store.pipeline("bench", "ticks"),
                            RunOptions(checkpoint_dir=str(work / "checkpoint"),
                                       trigger_interval=trigger, pacing=pacing,
                                       on_epoch=reports.append))
    thread = threading.Thread(target=runner.run)

    def start() -> Callable[[], int]:
        thread.start()
        return lambda: len(reports)

    try:
        return measure(start)
    finally:
        runner.request_stop()
        thread.join()
        store.close()


def native_case(spark: SparkSession, work: Path) -> dict[str, float]:
    query: Any = None

    def start() -> Callable[[], int]:
        nonlocal query
        query = (spark.readStream.format("rate").option("rowsPerSecond", RATE).load()
                 .writeStream.format("noop").trigger(processingTime="1 second")
                 .option("checkpointLocation", str(work / "checkpoint")).start())
        return lambda: int((query.lastProgress or {}).get("batchId", -1)) + 1

    try:
        return measure(start)
    finally:
        if query is not None:
            query.stop()


def test_epoch_cost(spark: SparkSession) -> None:
    cases: dict[str, Callable[[Path], dict[str, float]]] = {
        "spate_back_to_back": lambda w: spate_case(spark, w, None, None),
        "spate_paced": lambda w: spate_case(spark, w, None,
                                            pacing_for(DEFAULT_EPOCH_MAX_DELAY_MS)),
        "spate_trigger_1s": lambda w: spate_case(spark, w, "1 second", None),
        "native_trigger_1s": lambda w: native_case(spark, w),
    }
    results = {}
    for name, case in cases.items():
        work = Path(tempfile.mkdtemp(prefix="spate-epoch-cost-"))
        try:
            results[name] = case(work)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print(name, results[name])
    save_result("epoch_cost", {"rate": RATE, "warm_s": WARM_S, "measure_s": MEASURE_S,
                               **results})
