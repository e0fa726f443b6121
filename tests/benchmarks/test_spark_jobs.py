"""The benchmarks' summary of a run's Spark jobs (tests.benchmarks.spark_jobs), on a real
Spark driver's event log."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.benchmarks.spark_jobs import event_log_env, read_jobs, summarize

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

_APP = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false") \\
    .config("spark.sql.adaptive.enabled", "false").getOrCreate()
spark.range(1000, numPartitions=3).count()
spark.range(10).repartition(2).collect()
spark.stop()
"""


def test_a_drivers_jobs_are_read_from_its_event_log(tmp_path: Path) -> None:
    env = event_log_env(tmp_path / "run", {**os.environ, "PYSPARK_PYTHON": sys.executable})
    subprocess.run([sys.executable, "-c", _APP], env=env, check=True, timeout=240,
                   capture_output=True)
    logs = list((tmp_path / "run" / "events").glob("*"))
    assert len(logs) == 1
    jobs, length = read_jobs(logs[0])
    assert [job.action for job in jobs] == ["count", "collect"]
    assert all(0 < job.start_s <= job.end_s <= length for job in jobs)
    assert jobs[0].stages == 2 and jobs[0].tasks == 4  # 3 partial counts, then the sum
    assert jobs[1].stages == 2 and jobs[1].tasks == 4  # 2 partitions, then 2 again
    assert all(job.task_s > 0 for job in jobs)
    summary = summarize(logs[0])
    assert summary.splitlines()[-1].startswith("2 jobs, ")
