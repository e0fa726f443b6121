"""Crash test: a pipeline killed with SIGKILL at random moments, resumed each
time (at changing parallelism), ends with the same output as an uninterrupted
run — exactly-once through the state store and the idempotent file sink."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from spate.statestore import open_store
from tests.engine.harness import read_lines

pytestmark = pytest.mark.spark

PIPELINE = """
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '2000', runtime = '24',
    rate_limited = 'false', max_events_per_batch = '4000',
    'nexmark.base_time_ms' = '1700000000000');
CREATE TABLE windows WITH (connector = 'single_file', path = '{{ OUT_DIR }}/windows.jsonl',
    format = 'json', type = 'sink');
CREATE TABLE sessions WITH (connector = 'single_file', path = '{{ OUT_DIR }}/sessions.jsonl',
    format = 'json', type = 'sink');
INSERT INTO windows
SELECT bucket, w.end AS window_end, n, total, top
FROM (SELECT bid.auction % 7 AS bucket, HOP(INTERVAL '2' SECOND, INTERVAL '10' SECOND) AS w,
             count(*) AS n, sum(bid.price) AS total, max(bid.price) AS top
      FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2);
INSERT INTO sessions
SELECT bucket, s.start AS session_start, s.end AS session_end, bids
FROM (SELECT bid.bidder % 500 AS bucket, SESSION(INTERVAL '200' MILLISECOND) AS s,
             count(*) AS bids
      FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2);
"""


def _spate_run(workdir: Path, parallelism: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ, OUT_DIR=str(workdir / "out"), SPATE_LOG="WARNING")
    (workdir / "out").mkdir(exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "spate.api.cli", "run", str(workdir / "pipeline.sql"),
         "--parallelism", str(parallelism), "--state", f"sqlite:///{workdir / 'state.db'}",
         "--checkpoint", str(workdir / "checkpoint")],
        cwd=Path(__file__).resolve().parents[2], env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _finish(process: subprocess.Popen[bytes]) -> None:
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 0, stderr.decode()[-3000:]


def _committed(workdir: Path) -> tuple[int | None, bool]:
    """The last committed epoch and whether the pipeline had finished."""
    with open_store(f"sqlite:///{workdir / 'state.db'}") as store:
        state = store.pipeline("default", "pipeline")
        last = state.last_committed_epoch()
        return last, bool(last is not None and state.epoch_metadata().get("finished"))


def _wait_for_progress(workdir: Path, process: subprocess.Popen[bytes],
                       timeout_s: float = 240.0) -> bool:
    """Wait until ``process`` commits a new epoch; False if it ended first."""
    start, _ = _committed(workdir) if (workdir / "state.db").exists() else (None, False)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and process.poll() is None:
        if (workdir / "state.db").exists():
            last, finished = _committed(workdir)
            if finished:
                return False
            if last is not None and (start is None or last > start):
                return True
        time.sleep(0.2)
    return process.poll() is None


def test_sigkill_and_resume_gives_the_uninterrupted_output(tmp_path: Path) -> None:
    reference, crashed = tmp_path / "reference", tmp_path / "crashed"
    for workdir in (reference, crashed):
        workdir.mkdir()
        (workdir / "pipeline.sql").write_text(PIPELINE)
    _finish(_spate_run(reference, parallelism=2))
    final_epoch, _ = _committed(reference)

    chooser = random.Random(20261122)
    mid_run_kills = 0
    for parallelism in (1, 3):
        process = _spate_run(crashed, parallelism)
        # Kill at a random moment after this run has committed an epoch of its own, so
        # the kill lands mid-run however slowly Spark starts on a loaded machine.
        if not _wait_for_progress(crashed, process):
            break
        time.sleep(chooser.uniform(0.0, 3.0))
        if process.poll() is not None:
            break
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        last, finished = _committed(crashed)
        if last is not None and not finished:
            mid_run_kills += 1
    _finish(_spate_run(crashed, parallelism=2))

    assert mid_run_kills >= 1, "no kill landed between the first and the last epoch"
    assert _committed(crashed) == (final_epoch, True)
    for name in ("windows.jsonl", "sessions.jsonl"):
        expected = read_lines(reference / "out" / name)
        assert expected, f"reference run wrote no {name}"
        assert read_lines(crashed / "out" / name) == expected, name
