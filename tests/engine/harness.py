"""Runs a pipeline in-process on the shared test SparkSession."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from engine.planner import plan_pipeline
from engine.runtime.runner import EpochReport, PipelineRunner, RunOptions
from statestore import open_store


def run_pipeline(spark: SparkSession, sql: str, workdir: Path, *, parallelism: int = 1,
                 state_url: str | None = None, pipeline: str = "test",
                 reports: list[EpochReport] | None = None) -> dict[str, int]:
    """Plan and run ``sql`` to completion; returns the pipeline's counters."""
    plan = plan_pipeline(sql)
    state_url = state_url or f"sqlite:///{workdir / 'state.db'}"
    store = open_store(state_url)
    try:
        options = RunOptions(parallelism=parallelism,
                             checkpoint_dir=str(workdir / "checkpoint"),
                             on_epoch=reports.append if reports is not None else None)
        runner = PipelineRunner(plan, spark, store.pipeline("default", pipeline), options)
        assert runner.run(), "pipeline did not finish"
        return dict(runner.counters)
    finally:
        store.close()


def read_lines(path: Path) -> list[str]:
    """The lines of an output file, sorted (epoch boundaries may reorder them)."""
    return sorted(line for line in path.read_text().splitlines() if line)
