"""Runs a pipeline in-process on the shared test SparkSession."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from spate.engine.defaults import DEFAULT_FLUSH_INTERVAL_MS
from spate.engine.planner import plan_pipeline
from spate.engine.runtime.reports import EpochReport
from spate.engine.runtime.runner import PipelineRunner, RunOptions
from spate.engine.udf import UdfRegistry
from spate.statestore import open_store


def run_pipeline(spark: SparkSession, sql: str, workdir: Path, *, parallelism: int = 1,
                 state_url: str | None = None, pipeline: str = "test",
                 reports: list[EpochReport] | None = None,
                 stop_when: Callable[[], bool] | None = None,
                 stop_after_epochs: int | None = None,
                 udfs: UdfRegistry | None = None,
                 update_flush_interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS,
                 timeout_s: float = 180.0) -> dict[str, int]:
    """Plan and run ``sql``; returns the pipeline's counters.

    Without ``stop_when`` or ``stop_after_epochs`` the pipeline must finish by
    itself (bounded input).  With ``stop_when`` it is stopped once
    ``stop_when()`` holds; with ``stop_after_epochs`` it is stopped by
    ``request_stop()`` as soon as this run has committed that many epochs
    (a bounded pipeline may finish first: see the reports' ``finished``).
    The state (``state_url``, by default a file in ``workdir``) and the Spark
    checkpoint (in ``workdir``) persist: calling again with the same
    ``workdir`` resumes the pipeline, at any parallelism.  ``udfs``: the
    pipeline's Python UDFs (:func:`spate.engine.udf.load_udfs`).
    """
    plan = plan_pipeline(sql, udfs=udfs)
    state_url = state_url or f"sqlite:///{workdir / 'state.db'}"
    store = open_store(state_url)
    committed: list[EpochReport] = []

    def on_epoch(report: EpochReport) -> None:
        committed.append(report)
        if reports is not None:
            reports.append(report)
        # Requested from the epoch's own callback, the stop takes hold before
        # Spark can start another epoch.
        if stop_after_epochs is not None and len(committed) >= stop_after_epochs:
            runner.request_stop()

    try:
        options = RunOptions(parallelism=parallelism,
                             checkpoint_dir=str(workdir / "checkpoint"), on_epoch=on_epoch,
                             update_flush_interval_ms=update_flush_interval_ms)
        runner = PipelineRunner(plan, spark, store.pipeline("default", pipeline), options)
        if stop_when is None and stop_after_epochs is None:
            assert runner.run(), "pipeline did not finish"
        else:
            _run_until(runner, stop_when, timeout_s)
        return dict(runner.counters)
    finally:
        store.close()


def _run_until(runner: PipelineRunner, stop_when: Callable[[], bool] | None,
               timeout_s: float) -> None:
    """Run in a thread until it ends by itself or ``stop_when()`` holds, then stop it."""
    failure: list[BaseException] = []

    def target() -> None:
        try:
            runner.run()
        except BaseException as error:  # noqa: BLE001 - re-raised in the test thread
            failure.append(error)

    def reached() -> bool:
        return stop_when() if stop_when is not None else not thread.is_alive()

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not reached() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    done = reached()
    runner.request_stop()
    thread.join(60)
    if failure:
        raise failure[0]
    assert done, "the stop condition was not reached in time"


def read_lines(path: Path) -> list[str]:
    """The lines of an output file, sorted (epoch boundaries may reorder them)."""
    if not path.exists():
        return []
    return sorted(line for line in path.read_text().splitlines() if line)


@contextmanager
def spark_jobs(spark: SparkSession) -> Iterator[list[int]]:
    """The ids of the Spark jobs started inside the block (filled in at its end)."""
    group = f"spate-test-{secrets.token_hex(4)}"
    spark.sparkContext.setJobGroup(group, "counted")
    started: list[int] = []
    try:
        yield started
    finally:
        started.extend(spark.sparkContext.statusTracker().getJobIdsForGroup(group))
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
