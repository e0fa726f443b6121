"""Decisions: what a pipeline and a job need, given what is desired and what is seen.

Pure functions over frozen views (no database, no processes, no clock of
their own), so every rule is unit-tested on its own. :mod:`spate.scheduler.service`
carries the decisions out.

Rules, in short:

- A pipeline that wants to run gets a job when it has none that is not over,
  unless its newest job finished or failed and no restart was asked since
  (a finished bounded pipeline stays finished; a failed one waits for a restart).
- A job started before the pipeline's latest restart request, on another
  cluster than the one the pipeline was moved to, or at another parallelism or
  checkpoint interval, is stopped in ``checkpoint`` mode and replaced once it
  is over (a restart, a move or a rescale is a new job). A rescale the
  autoscaler decided (:mod:`.autoscale`) gives the autoscaler's reason. A pipeline whose
  newest job finished or failed on another cluster than the one it was moved
  to starts there.
- A job whose process died (gone, or silent longer than the heartbeat
  timeout) waits ``backoff * 2**attempt`` seconds (capped) and is started
  again from its last committed epoch, at most ``budget`` times; then it fails
  with its last error. Previews are never restarted.
- A pipeline that went idle (no input for its idle period) starts again when its
  input is due; when only its sources can tell, a watch job (no Spark) looks at
  them and ends, due at once, when input arrives.
- A forced stop (or a gentle one past its ``stop_timeout_s``) kills the job's
  process and leaves the job ``stopping`` until its compute unit confirms the
  process is gone: only then is it ``stopped``. The kill is repeated on every
  reconcile meanwhile, and past ``kill_timeout_s`` the job's whole compute unit
  (its tenant's application, with its other jobs) is killed. A job whose process
  cannot be seen from here stays ``stopping``: it is never reported ended while
  it may still run (and is metered until then).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from spate.scheduler.store import (
    CREATED,
    DESIRED_STOPPED,
    FAILED,
    FINISHED,
    IDLE,
    PREVIEW,
    RESTARTING,
    RUN,
    STOPPING,
    JobView,
    PipelineView,
)

FORCE = "force"
CHECKPOINT = "checkpoint"


@dataclass(frozen=True)
class RestartPolicy:
    """How the scheduler treats jobs that die or do not stop."""

    budget: int = 3
    backoff_s: float = 2.0
    backoff_max_s: float = 60.0
    heartbeat_timeout_s: float = 60.0
    stop_timeout_s: float = 120.0
    #: after a kill, how long the process may take to go before its whole unit is killed
    kill_timeout_s: float = 30.0

    def backoff(self, restarts_so_far: int) -> float:
        """Seconds to wait before restart number ``restarts_so_far + 1``."""
        return min(self.backoff_s * float(2 ** restarts_so_far), self.backoff_max_s)


@dataclass(frozen=True)
class Observation:
    """What the scheduler saw of a job's process just now."""

    #: Whether the process is alive; None when the backend cannot tell from here.
    alive: bool | None
    #: Seconds since the job last showed life (its newest event, or its submission).
    silent_s: float
    #: Seconds the job has been in its current state.
    in_state_s: float
    #: Why a dead process died, when the backend knows (it hit its memory limit).
    exit_reason: str | None = None


# -- job actions --------------------------------------------------------------


@dataclass(frozen=True)
class Submit:
    """Launch the job's first process (``created`` → ``starting``)."""


@dataclass(frozen=True)
class Resubmit:
    """Launch the process again after a backoff (``restarting`` → ``starting``)."""

    attempt: int


@dataclass(frozen=True)
class AskToStop:
    """Ask the process over its channel to stop in ``mode`` (→ ``stopping``)."""

    mode: str


@dataclass(frozen=True)
class Kill:
    """Kill the process (→ ``stopping`` with force, until its unit confirms it gone);
    ``again``: a kill already under way, repeated (no state change)."""

    message: str
    again: bool = False


@dataclass(frozen=True)
class KillUnit:
    """Kill the job's whole compute unit: its process outlived the kill's deadline."""

    message: str


@dataclass(frozen=True)
class Cancel:
    """Stop a job that has no process (→ ``stopped``)."""

    message: str


@dataclass(frozen=True)
class MarkStopped:
    """The process of a stopping (or killed) job is gone (→ ``stopped``)."""

    message: str


@dataclass(frozen=True)
class ScheduleRestart:
    """The process died: wait ``delay_s``, then start it again (→ ``restarting``)."""

    delay_s: float
    message: str


@dataclass(frozen=True)
class Fail:
    """Give up on the job (→ ``failed``); its process, if any, is killed."""

    message: str


JobAction = (Submit | Resubmit | AskToStop | Kill | KillUnit | Cancel | MarkStopped
             | ScheduleRestart | Fail)


def decide_job(job: JobView, seen: Observation | None, now: datetime,
               policy: RestartPolicy) -> JobAction | None:
    """What ``job`` needs now; ``seen`` is required when it may have a process."""
    if job.terminal:
        return None
    if job.state == CREATED:
        return Cancel("stopped before it started") if job.stop_mode else Submit()
    if job.state == RESTARTING:
        if job.stop_mode:
            return Cancel("stopped while waiting to restart")
        due = job.next_attempt_at is None or now >= job.next_attempt_at
        return Resubmit(job.attempt + 1) if due else None
    if seen is None:
        raise ValueError(f"job {job.id} is {job.state}: an observation of its process is needed")
    if job.stop_mode == FORCE:
        return _forced(job, seen, policy)
    reason = _death(seen, policy)
    if reason is not None:
        if job.state == STOPPING:
            return MarkStopped(f"stopped ({reason} while stopping)")
        return died(job, reason, policy)
    if job.stop_mode and job.state != STOPPING:
        return AskToStop(job.stop_mode)
    if job.state == STOPPING and seen.in_state_s > policy.stop_timeout_s:
        return Kill(f"did not stop within {policy.stop_timeout_s:g} s; killing it")
    return None


def _forced(job: JobView, seen: Observation, policy: RestartPolicy) -> JobAction:
    """A job stopped by force: killed, and stopped once its process is seen gone."""
    if seen.alive is False:
        return MarkStopped("stopped by force")
    if job.state != STOPPING:
        return Kill("stopping by force: its process is killed")
    if seen.in_state_s > policy.kill_timeout_s:
        return KillUnit(f"still running {seen.in_state_s:.0f} s after it was killed: "
                        "its whole compute unit is killed")
    return Kill("waiting for its process to go after the kill", again=True)


def died(job: JobView, reason: str, policy: RestartPolicy) -> ScheduleRestart | Fail:
    """A restart after backoff while the budget lasts, else failure with the last error."""
    if job.kind == PREVIEW:
        return Fail(f"preview failed: {job.last_error or reason}")
    if job.attempt >= policy.budget:
        cause = job.last_error or reason
        return Fail(f"{cause} (the job died {job.attempt + 1} times; restart budget of "
                    f"{policy.budget} spent)")
    delay_s = policy.backoff(job.attempt)
    return ScheduleRestart(delay_s, f"{reason}; restart {job.attempt + 1} of {policy.budget} "
                                    f"in {delay_s:g} s from the last committed epoch")


def _death(seen: Observation, policy: RestartPolicy) -> str | None:
    if seen.alive is False:
        return seen.exit_reason or "the job's process is gone"
    if seen.silent_s > policy.heartbeat_timeout_s:
        return f"no heartbeat for {seen.silent_s:.0f} s"
    return None


# -- pipeline actions -----------------------------------------------------------


@dataclass(frozen=True)
class StopJob:
    """Record that job ``job_id`` should stop in ``mode`` (its job decisions follow)."""

    job_id: str
    mode: str
    reason: str


@dataclass(frozen=True)
class StartJob:
    """Create a new job at the pipeline's current settings."""

    reason: str
    #: a watch job: it runs no Spark and ends when the idle pipeline's input arrives
    watch: bool = False


PipelineAction = StopJob | StartJob


def decide_pipeline(pipeline: PipelineView, jobs: list[JobView],
                    now: datetime | None = None) -> list[PipelineAction]:
    """What ``pipeline`` needs, given its jobs (newest first; active ones and the newest ended).

    An idle pipeline (its newest job ended ``idle``) resumes once ``now`` reaches the
    time its input is due (None: the time is not known to have come); one whose input
    time is not known gets a watch job, which ends idle and due at once when its input
    arrives.
    """
    runs = [job for job in jobs if job.kind == RUN]
    active = [job for job in runs if not job.terminal]
    if pipeline.desired_state == DESIRED_STOPPED:
        mode = pipeline.stop_mode or CHECKPOINT
        return [StopJob(job.id, mode, "the pipeline was stopped")
                for job in active if stop_needed(job.stop_mode, mode)]
    if active:
        newest, *extra = active
        actions: list[PipelineAction] = [
            StopJob(job.id, CHECKPOINT, "a newer job of the pipeline runs")
            for job in extra if stop_needed(job.stop_mode, CHECKPOINT)]
        reason = replacement_reason(pipeline, newest)
        if reason and newest.stop_mode is None:
            actions.append(StopJob(newest.id, CHECKPOINT, reason))
        return actions
    latest = runs[0] if runs else None
    if latest is None:
        return [StartJob("the pipeline was started")]
    if latest.restart_generation < pipeline.restart_generation:
        return [StartJob("a restart was requested")]
    if latest.state in (FINISHED, FAILED):
        moved = move_reason(pipeline, latest)
        return [StartJob(moved)] if moved else []
    if latest.state == IDLE:
        due = latest.next_attempt_at
        if due is None:  # only looking at its sources tells when input comes
            return [StartJob("idle: a watcher looks for new input on its sources", watch=True)]
        if now is not None and now >= due:
            return [StartJob("its input is due again: the idle pipeline resumes")]
        return []
    return [StartJob(replacement_reason(pipeline, latest) or "the pipeline was started again")]


def replacement_reason(pipeline: PipelineView, job: JobView) -> str | None:
    """Why ``job`` no longer matches ``pipeline`` and must give way to a new job."""
    if job.restart_generation < pipeline.restart_generation:
        return "a restart was requested"
    moved = move_reason(pipeline, job)
    if moved:
        return moved
    if job.parallelism != pipeline.parallelism:
        if pipeline.autoscale_reason and pipeline.autoscaled_at is not None \
                and pipeline.autoscaled_at >= job.created_at:
            return pipeline.autoscale_reason
        return f"rescale from parallelism {job.parallelism} to {pipeline.parallelism}"
    if job.checkpoint_interval_ms != pipeline.checkpoint_interval_ms:
        return "the checkpoint interval changed"
    return None


def move_reason(pipeline: PipelineView, job: JobView) -> str | None:
    """Why ``job`` is on the wrong cluster, if it is: the pipeline was moved elsewhere.

    A pipeline never moved (``cluster`` None) runs wherever its jobs run; the
    service gives jobs from before clusters had names the default cluster's name.
    """
    if pipeline.cluster is None or job.cluster == pipeline.cluster:
        return None
    return f"move from cluster {job.cluster} to {pipeline.cluster}"


def stop_needed(current: str | None, wanted: str) -> bool:
    """Whether a job asked to stop in ``current`` (None: not asked) must be asked again."""
    return current is None or (wanted == FORCE and current != FORCE)


def starts_without_state(job: JobView, previous: JobView | None,
                         pipeline: PipelineView | None) -> bool:
    """Whether ``job`` (about to launch) was created for a restart that drops state.

    True only for a pipeline's first launch after a restart request without
    state: the job carries the request's generation and the job before it an
    older one. Automatic restarts (attempt > 0) always keep state.
    """
    if job.kind != RUN or job.attempt > 0 or pipeline is None or pipeline.restart_with_state:
        return False
    if job.restart_generation != pipeline.restart_generation or job.restart_generation == 0:
        return False
    return previous is None or previous.restart_generation < job.restart_generation
