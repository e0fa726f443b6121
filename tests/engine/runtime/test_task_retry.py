"""A state task's Python worker killed mid-epoch: Spark retries the task, and the
retried attempt's output and state are as if the first had never run.

The driver script runs in its own process because task retries need a Spark
master that allows them (``local[2,4]``: two cores, four attempts per task, as
a cluster's default ``spark.task.maxFailures``), which the shared test session
is not.  In the killed run every window task of epoch 1 commits its range's
writes to the store and then kills its own Python worker before returning its
rows; Spark sees the worker crash and runs the task again.  The output must
equal an uninterrupted run's, row for row.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.engine.harness import run_pipeline

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

PIPELINE = """
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '2000', runtime = '6',
    rate_limited = 'false', max_events_per_batch = '3000',
    'nexmark.base_time_ms' = '1700000000000');
CREATE TABLE counts WITH (connector = 'single_file', path = '{out}', format = 'json',
    type = 'sink');
INSERT INTO counts
SELECT auction, w.end AS window_end, n, top
FROM (SELECT bid.auction AS auction, TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n,
             max(bid.price) AS top
      FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2);
"""

DRIVER = textwrap.dedent('''
    import os, signal, sys
    from pathlib import Path

    from pyspark import TaskContext

    import spate.engine.runtime.window as window
    from spate.engine.planner import plan_pipeline
    from spate.engine.runtime.runner import PipelineRunner, RunOptions
    from spate.engine.spark import build_spark
    from spate.statestore import open_store

    work, kill = Path(sys.argv[1]), sys.argv[2] == "kill"
    attempts = work / "attempts"
    attempts.mkdir()

    class KilledOnce(window.WindowColumnsRange):
        """The window's range work; in epoch 1 a first attempt commits, then dies."""

        def __call__(self, partials, state, writer, epoch, stats):
            result = super().__call__(partials, state, writer, epoch, stats)
            task = TaskContext.get()
            (attempts / f"{epoch.number}-{task.partitionId()}-{task.attemptNumber()}").touch()
            if epoch.number == 1 and task.attemptNumber() == 0:
                writer.commit()
                os.kill(os.getpid(), signal.SIGKILL)
            return result

    if kill:
        window.WindowColumnsRange = KilledOnce
    spark = build_spark("local[2,4]", "spate-task-retry")
    plan = plan_pipeline(Path(sys.argv[3]).read_text())
    store = open_store(f"sqlite:///{work / 'state.db'}")
    runner = PipelineRunner(plan, spark, store.pipeline("t", "p"),
                            RunOptions(parallelism=2, checkpoint_dir=str(work / "checkpoint")))
    assert runner.run(), "the pipeline did not finish"
    store.close()
    spark.stop()
''')


def _run(work: Path, kill: bool) -> list[dict[str, object]]:
    """The pipeline run by the driver script, its tasks killed once in epoch 1 if ``kill``."""
    work.mkdir()
    out = work / "counts.jsonl"
    (work / "pipeline.sql").write_text(PIPELINE.format(out=out))
    (work / "driver.py").write_text(DRIVER)
    finished = subprocess.run(
        [sys.executable, str(work / "driver.py"), str(work), "kill" if kill else "keep",
         str(work / "pipeline.sql")], capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]
    return sorted((json.loads(line) for line in out.read_text().splitlines()),
                  key=lambda row: json.dumps(row, sort_keys=True))


def _uninterrupted(spark: SparkSession, work: Path) -> list[dict[str, object]]:
    """The same pipeline, nothing killed, in the shared session (where no task is
    retried, which an uninterrupted run does not need)."""
    work.mkdir()
    out = work / "counts.jsonl"
    run_pipeline(spark, PIPELINE.format(out=out), work, parallelism=2)
    return sorted((json.loads(line) for line in out.read_text().splitlines()),
                  key=lambda row: json.dumps(row, sort_keys=True))


def test_a_killed_state_task_is_retried_with_the_same_result(spark: SparkSession,
                                                            tmp_path: Path) -> None:
    killed = _run(tmp_path / "killed", kill=True)
    attempts = {p.name for p in (tmp_path / "killed" / "attempts").iterdir()}
    assert {"1-0-0", "1-0-1", "1-1-0", "1-1-1"} <= attempts, \
        f"each task of epoch 1 should have run twice: {sorted(attempts)}"
    expected = _uninterrupted(spark, tmp_path / "plain")
    assert len(expected) > 1000, "too few windows to mean anything"
    assert killed == expected
