"""The benchmarks' JVM profile summary (tests.benchmarks.jvm_profile), on a real Spark
driver's Java Flight Recorder recording."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.benchmarks.jvm_profile import samples_by_category

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

_APP = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false") \\
    .config("spark.sql.adaptive.enabled", "false").getOrCreate()
spark.range(3_000_000, numPartitions=2).selectExpr("id % 1000 AS k").repartition(2) \\
    .groupBy("k").count().collect()
spark.stop()
"""


def test_a_recordings_task_samples_by_what_they_did(tmp_path: Path) -> None:
    recording = tmp_path / "run.jfr"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable,
           "JAVA_TOOL_OPTIONS": f"-XX:StartFlightRecording=settings=profile,filename={recording}"}
    subprocess.run([sys.executable, "-c", _APP], env=env, check=True, timeout=240,
                   capture_output=True)
    # The JVM writes the recording as it exits, after Python: wait until it stops growing.
    deadline, size = time.monotonic() + 60, -1
    while time.monotonic() < deadline:
        now = recording.stat().st_size if recording.exists() else 0
        if now and now == size:
            break
        size = now
        time.sleep(1)
    tasks = samples_by_category(str(recording))["Executor task launch"]
    # the job's one repartition: its tasks write and read a shuffle
    assert tasks["shuffle write"] > 0 and tasks["shuffle read"] > 0
    assert sum(tasks.values()) > tasks["other"]
