"""Runs a pipeline in-process on the shared test SparkSession."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

from pyspark.sql import SparkSession

from engine.planner import plan_pipeline
from engine.runtime.runner import EpochReport, PipelineRunner, RunOptions
from statestore import open_store


def run_pipeline(spark: SparkSession, sql: str, workdir: Path, *, parallelism: int = 1,
                 state_url: str | None = None, pipeline: str = "test",
                 reports: list[EpochReport] | None = None,
                 stop_when: Callable[[], bool] | None = None,
                 timeout_s: float = 180.0) -> dict[str, int]:
    """Plan and run ``sql``; returns the pipeline's counters.

    Without ``stop_when`` the pipeline must finish by itself (bounded input);
    with it, the pipeline is stopped once ``stop_when()`` holds.
    """
    plan = plan_pipeline(sql)
    state_url = state_url or f"sqlite:///{workdir / 'state.db'}"
    store = open_store(state_url)
    try:
        options = RunOptions(parallelism=parallelism,
                             checkpoint_dir=str(workdir / "checkpoint"),
                             on_epoch=reports.append if reports is not None else None)
        runner = PipelineRunner(plan, spark, store.pipeline("default", pipeline), options)
        if stop_when is None:
            assert runner.run(), "pipeline did not finish"
        else:
            _run_until(runner, stop_when, timeout_s)
        return dict(runner.counters)
    finally:
        store.close()


def _run_until(runner: PipelineRunner, stop_when: Callable[[], bool], timeout_s: float) -> None:
    failure: list[BaseException] = []

    def target() -> None:
        try:
            runner.run()
        except BaseException as error:  # noqa: BLE001 - re-raised in the test thread
            failure.append(error)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not stop_when() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    reached = stop_when()
    runner.request_stop()
    thread.join(60)
    if failure:
        raise failure[0]
    assert reached, "the stop condition was not reached in time"


def read_lines(path: Path) -> list[str]:
    """The lines of an output file, sorted (epoch boundaries may reorder them)."""
    if not path.exists():
        return []
    return sorted(line for line in path.read_text().splitlines() if line)
