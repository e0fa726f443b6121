"""End to end on the local backend: real Redis broker, a worker thread, the real job
process (``python -m spate.engine.job.main``), SQLite control database and state.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from tests.scheduler.harness import (
    Harness,
    channel_events,
    expected_bids,
    impulse_sql,
    windowed_bids_sql,
    written_lines,
)

pytestmark = [pytest.mark.e2e, pytest.mark.spark]


def output_rows(path: Path) -> list[dict[str, int]]:
    return [json.loads(line) for line in written_lines(path)]


def kill_job_process(harness: Harness, job_id: str) -> int:
    """SIGKILL the job's process group, as a crash would; the pid killed."""
    handle = harness.job(job_id).handle
    assert handle is not None
    os.killpg(int(handle["pid"]), signal.SIGKILL)
    return int(handle["pid"])


def test_a_bounded_pipeline_runs_to_finished_with_checkpoints_and_metrics(
        harness: Harness, out_dir: Path) -> None:
    pipeline_id = harness.add_pipeline(windowed_bids_sql("bids.jsonl", 1000, 4, 2000))
    out = harness.output(pipeline_id, "bids.jsonl")
    job = harness.wait_for_job(pipeline_id, ("finished", "failed"), timeout_s=240)
    assert job.state == "finished", job.failure_message
    assert [state for state, _ in harness.history(job.id)] == [
        "created", "starting", "running", "finished"]
    epochs = harness.checkpoints(job.id)
    assert epochs and epochs == list(range(epochs[0], epochs[-1] + 1))
    assert job.last_epoch == epochs[-1]
    assert job.metrics is not None and job.metrics["epoch"] == epochs[-1]
    assert {"rows_in_per_s", "rows_out_per_s", "operators"} <= set(job.metrics)
    assert job.heartbeat_at is not None and job.ended_at is not None
    assert sum(row["n"] for row in output_rows(out)) == expected_bids(1000, 4)
    # A finished pipeline stays finished: reconciling it again starts nothing.
    harness.scheduler.reconcile_pipeline(pipeline_id)
    assert len(harness.jobs(pipeline_id)) == 1


def test_an_unbounded_pipeline_stopped_in_checkpoint_mode_ends_stopped(
        harness: Harness, out_dir: Path) -> None:
    pipeline_id = harness.add_pipeline(impulse_sql("ticks.jsonl"))
    out = harness.output(pipeline_id, "ticks.jsonl")
    job = harness.wait_for("a committed epoch", lambda: next(
        (j for j in harness.jobs(pipeline_id) if j.last_epoch is not None), None), 240)
    harness.change_pipeline(pipeline_id, desired_state="stopped", stop_mode="checkpoint")
    job = harness.wait_for_job(pipeline_id, ("stopped", "failed"), timeout_s=120)
    assert job.state == "stopped", job.failure_message
    assert job.stop_mode == "checkpoint"
    history = harness.history(job.id)
    assert ("stopping", "stopping (checkpoint)") in history
    assert history[-1] == ("stopped", "stopped (checkpoint)")
    # Everything written was committed: the sink holds each counter once, in order.
    counters = [row["counter"] for row in output_rows(out)]
    assert counters == list(range(len(counters))) and counters
    harness.scheduler.reconcile_pipeline(pipeline_id)
    assert len(harness.jobs(pipeline_id)) == 1  # a stopped pipeline gets no new job


def test_a_killed_job_resumes_and_a_rescale_replaces_it_exactly_once(
        harness: Harness, out_dir: Path) -> None:
    # 20 s of events at their real rate: the rescale below lands before the end even
    # when the restarted attempt catches up quickly after the kill.
    pipeline_id = harness.add_pipeline(windowed_bids_sql("bids.jsonl", 1000, 20, 2000))
    out = harness.output(pipeline_id, "bids.jsonl")
    first = harness.wait_for("a committed epoch", lambda: next(
        (j for j in harness.jobs(pipeline_id) if j.last_epoch is not None), None), 240)
    killed_pid = kill_job_process(harness, first.id)
    # The checkpoint task reads the newest committed epoch from the state store.
    last_before_kill = harness.scheduler.checkpoint(first.id)
    assert last_before_kill is not None

    # The reconciler sees the process gone, waits its backoff and starts attempt 1,
    # which resumes after the last committed epoch.
    resumed = harness.wait_for("the restarted attempt to commit", lambda: (
        job if (job := harness.job(first.id)).attempt == 1 and job.state == "running"
        and (job.last_epoch or -1) > last_before_kill else None), 240)
    assert resumed.handle is not None and resumed.handle["pid"] != killed_pid
    states = [state for state, _ in harness.history(first.id)]
    assert states[:4] == ["created", "starting", "running", "restarting"]
    assert states[4:6] == ["starting", "running"]
    events = channel_events(Path(resumed.channel_url.removeprefix("file://")))
    runnings = [i for i, e in enumerate(events) if e["type"] == "status"
                and e["state"] == "running"]
    after_restart = [e["epoch"] for e in events[runnings[1]:] if e["type"] == "epoch"]
    assert after_restart[0] == last_before_kill + 1  # resumed, not started over

    # Rescale: the job stops at a checkpoint and a new job takes over at parallelism 2.
    harness.change_pipeline(pipeline_id, parallelism=2)
    second = harness.wait_for_job(pipeline_id, ("finished", "failed"), index=1, timeout_s=300)
    assert second.state == "finished", second.failure_message
    assert second.parallelism == 2
    first = harness.job(first.id)
    assert first.state == "stopped" and first.stop_mode == "checkpoint"
    assert ("stopping", "stopping (checkpoint)") in harness.history(first.id)
    assert harness.checkpoints(second.id)[0] > (first.last_epoch or 0)

    rows = output_rows(out)
    windows = [row["window_end"] for row in rows]
    assert len(windows) == len(set(windows))  # no window written twice
    assert sum(row["n"] for row in rows) == expected_bids(1000, 20)  # no bid lost or doubled


def test_a_job_that_keeps_dying_fails_after_its_restart_budget(
        harness: Harness, out_dir: Path) -> None:
    pipeline_id = harness.add_pipeline(impulse_sql("ticks.jsonl"))
    launched = harness.wait_for("the first launch", lambda: next(
        (j for j in harness.jobs(pipeline_id) if j.handle), None), 60)
    kill_job_process(harness, launched.id)
    relaunched = harness.wait_for("the restart", lambda: (
        job if (job := harness.job(launched.id)).attempt == 1 and job.handle else None), 60)
    kill_job_process(harness, relaunched.id)
    failed = harness.wait_for_job(pipeline_id, ("failed",), timeout_s=60)
    assert failed.id == launched.id
    assert failed.failure_message is not None
    assert "the job's process is gone" in failed.failure_message
    assert "restart budget of 1 spent" in failed.failure_message
    assert harness.history(failed.id)[-1] == ("failed", failed.failure_message)
    # A failed pipeline waits for a restart request; then it runs again, as a new job,
    # until a forced stop kills it.
    harness.scheduler.reconcile_pipeline(pipeline_id)
    assert len(harness.jobs(pipeline_id)) == 1
    harness.change_pipeline(pipeline_id, restart_generation=1)
    again = harness.wait_for_job(pipeline_id, ("starting", "running"), index=1, timeout_s=60)
    assert again.restart_generation == 1 and again.attempt == 0
    harness.change_pipeline(pipeline_id, desired_state="stopped", stop_mode="force")
    killed = harness.wait_for_job(pipeline_id, ("stopped",), index=1, timeout_s=60)
    assert harness.history(killed.id)[-1] == ("stopped", "stopped by force")
    assert harness.scheduler.backend.is_alive(killed.handle or {}) is False
