"""Moving and rescaling a pipeline with 200 MB of state in PostgreSQL: time from the
stop to the first committed epoch on the new parallelism or cluster, and the bytes
that epoch read from the store against the state's size.

A job's state stays in the store; a rescaled or moved job's tasks start with cold
caches and read only the keys their epoch touches.  Phases run in processes of
their own (:mod:`tests.benchmarks.move_job`): built and rescaled on local Spark,
then moved to a standalone cluster of two 1-core workers with a new, empty
checkpoint folder.  Figures go to ``results.json`` under ``move_rescale``;
nothing is asserted about speed.

    SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_move_rescale.py -s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.test_scaling import two_workers  # noqa: F401  (a fixture)
from tests.benchmarks.workloads import save_result
from tests.conftest import ThrowawayPostgres

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.timeout(7200)]

REPOSITORY = Path(__file__).resolve().parents[2]


def _phase(*args: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "tests.benchmarks.move_job", *args],
                          cwd=REPOSITORY, capture_output=True, text=True, timeout=3600,
                          env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_move_and_rescale_with_200_mb_of_state(two_workers: str,  # noqa: F811
                                               throwaway_postgres: ThrowawayPostgres,
                                               tmp_path: Path) -> None:
    state_url = throwaway_postgres.create()
    built = _phase("build", "local[2]", state_url, str(tmp_path))
    moved = _phase("move", two_workers, state_url, str(tmp_path), str(built["stopped_at_ms"]))
    result = {"build": built["build"], "rescale": built["rescale"], "move": moved["move"]}
    for name in ("rescale", "move"):
        phase = result[name]
        assert phase["state_bytes"] >= 200 * 1024 * 1024
        print(f"{name}: stop -> first commit {phase['stop_to_first_commit_s']:.1f} s, "
              f"first epoch read {phase['first_epoch_remote_bytes'] / 2**20:.1f} MiB of "
              f"{phase['state_bytes'] / 2**20:.0f} MiB of state "
              f"({phase['first_epoch_rows']:,} rows)", flush=True)
    save_result("move_rescale", result)
