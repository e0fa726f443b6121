"""Reconcile decisions: desired state and observations in, actions out (no I/O)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.scheduler.reconcile import (
    AskToStop,
    Cancel,
    Fail,
    Kill,
    KillUnit,
    MarkStopped,
    Observation,
    RestartPolicy,
    Resubmit,
    ScheduleRestart,
    StartJob,
    StopJob,
    Submit,
    decide_job,
    decide_pipeline,
    starts_without_state,
)
from tests.scheduler.factories import NOW, job, pipeline

POLICY = RestartPolicy(budget=3, backoff_s=2, backoff_max_s=10, heartbeat_timeout_s=30,
                       stop_timeout_s=60)
ALIVE = Observation(alive=True, silent_s=1, in_state_s=5)
GONE = Observation(alive=False, silent_s=1, in_state_s=5)


# -- jobs -----------------------------------------------------------------------

def test_a_created_job_is_submitted_unless_a_stop_came_first() -> None:
    assert decide_job(job(state="created"), None, NOW, POLICY) == Submit()
    assert isinstance(decide_job(job(state="created", stop_mode="checkpoint"), None, NOW,
                                 POLICY), Cancel)


def test_a_live_job_is_left_alone() -> None:
    assert decide_job(job(), ALIVE, NOW, POLICY) is None
    assert decide_job(job(state="starting"), ALIVE, NOW, POLICY) is None


def test_terminal_jobs_need_nothing() -> None:
    for state in ("stopped", "finished", "failed"):
        assert decide_job(job(state=state), GONE, NOW, POLICY) is None


def test_a_dead_process_restarts_after_doubling_backoff_then_fails_with_the_last_error() -> None:
    delays = []
    for attempt in range(3):
        action = decide_job(job(attempt=attempt), GONE, NOW, POLICY)
        assert isinstance(action, ScheduleRestart)
        assert f"restart {attempt + 1} of 3" in action.message
        delays.append(action.delay_s)
    assert delays == [2, 4, 8]
    spent = decide_job(job(attempt=3, last_error="boom: disk full"), GONE, NOW, POLICY)
    assert isinstance(spent, Fail)
    assert spent.message.startswith("boom: disk full")
    assert "restart budget of 3 spent" in spent.message


def test_backoff_is_capped() -> None:
    assert POLICY.backoff(10) == 10


def test_a_silent_process_counts_as_dead_even_if_its_pid_lives() -> None:
    hung = Observation(alive=True, silent_s=31, in_state_s=100)
    action = decide_job(job(), hung, NOW, POLICY)
    assert isinstance(action, ScheduleRestart) and "no heartbeat for 31 s" in action.message
    # Unknown liveness (another host): only the heartbeat decides.
    assert decide_job(job(), Observation(alive=None, silent_s=5, in_state_s=5), NOW,
                      POLICY) is None


def test_a_restarting_job_waits_for_its_backoff() -> None:
    waiting = job(state="restarting", attempt=1, next_attempt_at=NOW + timedelta(seconds=3))
    assert decide_job(waiting, None, NOW, POLICY) is None
    assert decide_job(waiting, None, NOW + timedelta(seconds=3), POLICY) == Resubmit(2)
    stopped = decide_job(job(state="restarting", stop_mode="immediate"), None, NOW, POLICY)
    assert isinstance(stopped, Cancel)


def test_previews_are_never_restarted() -> None:
    action = decide_job(job(kind="preview", pipeline_id=None), GONE, NOW, POLICY)
    assert isinstance(action, Fail) and action.message.startswith("preview failed")


def test_stop_modes() -> None:
    assert decide_job(job(stop_mode="graceful"), ALIVE, NOW, POLICY) == AskToStop("graceful")
    assert decide_job(job(state="stopping", stop_mode="graceful"), ALIVE, NOW, POLICY) is None
    assert isinstance(decide_job(job(stop_mode="force"), ALIVE, NOW, POLICY), Kill)
    assert isinstance(decide_job(job(state="stopping", stop_mode="checkpoint"), GONE, NOW,
                                 POLICY), MarkStopped)
    late = Observation(alive=True, silent_s=1, in_state_s=61)
    timed_out = decide_job(job(state="stopping", stop_mode="checkpoint"), late, NOW, POLICY)
    assert isinstance(timed_out, Kill) and not timed_out.again


def test_a_forced_stop_is_over_only_when_the_process_is_seen_gone() -> None:
    first = decide_job(job(stop_mode="force"), ALIVE, NOW, POLICY)
    assert isinstance(first, Kill) and not first.again, "killed, and the job goes stopping"
    killing = job(state="stopping", stop_mode="force")
    again = decide_job(killing, ALIVE, NOW, POLICY)
    assert isinstance(again, Kill) and again.again, "the kill is repeated while it lives"
    unknown = Observation(alive=None, silent_s=100, in_state_s=5)
    assert isinstance(decide_job(killing, unknown, NOW, POLICY), Kill), (
        "a process that cannot be seen is not taken for gone")
    assert decide_job(killing, GONE, NOW, POLICY) == MarkStopped("stopped by force")
    assert decide_job(job(stop_mode="force"), GONE, NOW, POLICY) == MarkStopped(
        "stopped by force")
    for alive in (True, None):
        late = Observation(alive=alive, silent_s=1, in_state_s=POLICY.kill_timeout_s + 1)
        assert isinstance(decide_job(killing, late, NOW, POLICY), KillUnit)


def test_a_process_state_needs_an_observation() -> None:
    with pytest.raises(ValueError, match="observation"):
        decide_job(job(), None, NOW, POLICY)


@given(attempt=st.integers(0, 50), budget=st.integers(0, 20),
       backoff=st.floats(0, 100), cap=st.floats(0, 1000))
def test_restarts_never_exceed_the_budget_and_waits_never_the_cap(
        attempt: int, budget: int, backoff: float, cap: float) -> None:
    policy = RestartPolicy(budget=budget, backoff_s=backoff, backoff_max_s=cap)
    action = decide_job(job(attempt=attempt), GONE, NOW, policy)
    if attempt >= budget:
        assert isinstance(action, Fail)
    else:
        assert isinstance(action, ScheduleRestart)
        assert 0 <= action.delay_s <= cap
        assert action.delay_s == min(backoff * 2.0 ** attempt, cap)


# -- pipelines --------------------------------------------------------------------

def test_a_pipeline_that_wants_to_run_gets_one_job() -> None:
    assert decide_pipeline(pipeline(), []) == [StartJob("the pipeline was started")]
    assert decide_pipeline(pipeline(), [job()]) == []


def test_finished_and_failed_pipelines_stay_so_until_a_restart() -> None:
    for state in ("finished", "failed"):
        assert decide_pipeline(pipeline(), [job(state=state)]) == []
        assert decide_pipeline(pipeline(restart_generation=1), [job(state=state)]) == [
            StartJob("a restart was requested")]
    assert decide_pipeline(pipeline(), [job(state="stopped")]) == [
        StartJob("the pipeline was started again")]


def test_stopping_a_pipeline_stops_its_jobs_in_its_mode() -> None:
    stopped = pipeline(desired_state="stopped", stop_mode="immediate")
    assert decide_pipeline(stopped, [job()]) == [StopJob("j1", "immediate",
                                                         "the pipeline was stopped")]
    assert decide_pipeline(stopped, [job(stop_mode="immediate")]) == []
    # Force overrides a gentler stop already asked; the reverse does not.
    forced = pipeline(desired_state="stopped", stop_mode="force")
    assert decide_pipeline(forced, [job(stop_mode="checkpoint")])[0].mode == "force"
    assert decide_pipeline(stopped, [job(stop_mode="force")]) == []
    assert decide_pipeline(stopped, [job(state="stopped")]) == []


@pytest.mark.parametrize(("changes", "reason"), [
    ({"restart_generation": 1}, "a restart was requested"),
    ({"parallelism": 2}, "rescale from parallelism 1 to 2"),
    ({"checkpoint_interval_ms": 500}, "the checkpoint interval changed"),
])
def test_restart_and_rescale_replace_the_job_after_a_checkpoint_stop(
        changes: dict[str, int], reason: str) -> None:
    wanted = pipeline(**changes)
    assert decide_pipeline(wanted, [job()]) == [StopJob("j1", "checkpoint", reason)]
    # Asked once: wait for it to end, then a new job starts.
    assert decide_pipeline(wanted, [job(stop_mode="checkpoint", state="stopping")]) == []
    assert decide_pipeline(wanted, [job(state="stopped")]) == [StartJob(reason)]


def test_a_move_replaces_the_job_after_a_checkpoint_stop_and_starts_it_on_the_cluster(
        ) -> None:
    moved = pipeline(cluster="b")
    reason = "move from cluster a to b"
    assert decide_pipeline(moved, [job(cluster="a")]) == [StopJob("j1", "checkpoint", reason)]
    assert decide_pipeline(moved, [job(cluster="a", stop_mode="checkpoint",
                                       state="stopping")]) == []
    assert decide_pipeline(moved, [job(cluster="a", state="stopped")]) == [StartJob(reason)]
    # Once the job runs there, nothing more is needed.
    assert decide_pipeline(moved, [job("j2", cluster="b"), job(cluster="a", state="stopped")
                                   ]) == []


def test_a_pipeline_never_moved_stays_wherever_its_job_runs() -> None:
    assert decide_pipeline(pipeline(), [job(cluster="b")]) == []
    assert decide_pipeline(pipeline(), [job(cluster="b", state="finished")]) == []


def test_a_pipeline_that_ended_elsewhere_starts_on_the_cluster_it_was_moved_to() -> None:
    for state in ("finished", "failed"):
        assert decide_pipeline(pipeline(cluster="b"), [job(cluster="a", state=state)]) == [
            StartJob("move from cluster a to b")]
        # Ended on the cluster it was moved to: it stays so until a restart.
        assert decide_pipeline(pipeline(cluster="b"), [job(cluster="b", state=state)]) == []


def test_a_stopped_pipeline_is_not_moved_while_it_stops() -> None:
    stopped = pipeline(cluster="b", desired_state="stopped", stop_mode="checkpoint")
    assert decide_pipeline(stopped, [job(cluster="a", state="stopped")]) == []
    assert decide_pipeline(stopped, [job(cluster="a")]) == [
        StopJob("j1", "checkpoint", "the pipeline was stopped")]


def test_an_extra_live_job_is_stopped() -> None:
    actions = decide_pipeline(pipeline(), [job("j2"), job("j1")])
    assert actions == [StopJob("j1", "checkpoint", "a newer job of the pipeline runs")]


def test_previews_do_not_count_as_pipeline_jobs() -> None:
    assert decide_pipeline(pipeline(), [job(kind="preview")]) == [
        StartJob("the pipeline was started")]


def test_only_the_first_launch_after_a_restart_without_state_drops_state() -> None:
    wanted = pipeline(restart_generation=2, restart_with_state=False)
    new = job("j2", state="created", restart_generation=2)
    assert starts_without_state(new, job("j1", restart_generation=1), wanted)
    assert not starts_without_state(new, job("j1", restart_generation=2), wanted)
    assert not starts_without_state(
        new, job("j1", restart_generation=1), pipeline(restart_generation=2))
    assert not starts_without_state(
        job("j2", attempt=1, restart_generation=2), job("j1", restart_generation=1), wanted)
    assert not starts_without_state(job("j0"), None, pipeline())


@given(st.lists(st.sampled_from(["created", "starting", "running", "stopping", "restarting",
                                 "stopped", "finished", "failed"]), max_size=4),
       st.sampled_from(["running", "stopped"]), st.integers(0, 2), st.integers(1, 3),
       st.sampled_from([None, "a", "b"]))
def test_a_pipeline_never_gets_a_second_live_job(states: list[str], desired: str,
                                                 generation: int, parallelism: int,
                                                 cluster: str | None) -> None:
    jobs = [job(f"j{9 - i}", state=s, cluster="a") for i, s in enumerate(states)]
    actions = decide_pipeline(pipeline(desired_state=desired, restart_generation=generation,
                                       parallelism=parallelism, cluster=cluster), jobs)
    live = [j for j in jobs if not j.terminal]
    starts = [a for a in actions if isinstance(a, StartJob)]
    assert len(starts) <= 1
    if live or desired == "stopped":
        assert not starts


def test_an_idle_pipeline_resumes_when_its_input_is_due() -> None:
    due = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    idle = job(state="idle", next_attempt_at=due)
    assert decide_pipeline(pipeline(), [idle], due - timedelta(seconds=1)) == []
    assert decide_pipeline(pipeline(), [idle]) == [], "no clock: not known to be due"
    assert decide_pipeline(pipeline(), [idle], due) == [
        StartJob("its input is due again: the idle pipeline resumes")]
    assert decide_pipeline(pipeline(restart_generation=1), [idle]) == [
        StartJob("a restart was requested")], "a restart does not wait for input"
    assert decide_pipeline(pipeline(desired_state="stopped"), [idle], due) == []


def test_an_idle_pipeline_whose_sources_must_be_watched_gets_a_watch_job() -> None:
    unknown = job("j1", state="idle")  # no wake time: only its sources can tell
    watch = StartJob("idle: a watcher looks for new input on its sources", watch=True)
    assert decide_pipeline(pipeline(), [unknown]) == [watch]
    watching = job("j2", state="running", watch=True)
    assert decide_pipeline(pipeline(), [watching, unknown]) == [], "one watcher at a time"
    arrived = job("j2", state="idle", watch=True, next_attempt_at=datetime.now(UTC))
    assert decide_pipeline(pipeline(), [arrived, unknown], datetime.now(UTC)) == [
        StartJob("its input is due again: the idle pipeline resumes")], "the real job"
    assert decide_pipeline(pipeline(desired_state="stopped"), [watching, unknown]) == [
        StopJob("j2", "checkpoint", "the pipeline was stopped")]
    assert decide_pipeline(pipeline(parallelism=4), [watching, unknown]) == [
        StopJob("j2", "checkpoint", "rescale from parallelism 1 to 4")]


@given(st.sampled_from(["starting", "running", "stopping"]),
       st.sampled_from([None, "checkpoint", "graceful", "immediate", "force"]),
       st.sampled_from([True, None]), st.floats(0, 1000), st.floats(0, 1000))
def test_a_job_whose_process_may_run_is_never_marked_stopped(
        state: str, stop_mode: str | None, alive: bool | None, silent_s: float,
        in_state_s: float) -> None:
    seen = Observation(alive=alive, silent_s=silent_s, in_state_s=in_state_s)
    action = decide_job(job(state=state, stop_mode=stop_mode), seen, NOW, POLICY)
    if stop_mode == "force":
        assert not isinstance(action, MarkStopped | Cancel)
