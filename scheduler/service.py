"""Carries out the reconcile decisions: the scheduler's side effects live here.

:class:`Scheduler` reads a job's channel, checks its process, asks
:mod:`spate.scheduler.reconcile` what to do and does it: launch on the backend,
ask to stop over the channel, kill, record state changes in the control
store. Every method is safe to call again at any time, from any worker: state
changes are compare-and-set in the store, so the loser of a race does nothing.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from spate.engine.host.folder import HostConfig, HostFolder
from spate.engine.job.channel import ChannelError, open_channel
from spate.engine.job.nofollow import open_regular
from spate.engine.job.spec import JobSpec
from spate.scheduler.autoscale import Load, decide_scale
from spate.scheduler.backends.applications import APPLICATION
from spate.scheduler.backends.base import ClusterBackend
from spate.scheduler.backends.local import DEFAULT_LOCAL_MASTER
from spate.scheduler.backends.process import log_tail
from spate.scheduler.config import SchedulerConfig
from spate.scheduler.errors import SchedulerError
from spate.scheduler.events import fold_events
from spate.scheduler.metering import Meter
from spate.scheduler.reconcile import (
    FORCE,
    AskToStop,
    Cancel,
    Fail,
    JobAction,
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
from spate.scheduler.sandbox.cgroups import CgroupError
from spate.scheduler.sandbox.network import sweep_idle_links
from spate.scheduler.sandbox.unit import ComputeUnit
from spate.scheduler.store import (
    CREATED,
    DESIRED_RUNNING,
    FAILED,
    PREVIEW,
    PROCESS_STATES,
    RESTARTING,
    RUN,
    RUNNING,
    STARTING,
    STOPPED,
    STOPPING,
    ControlStore,
    JobView,
    PipelineView,
)
from spate.scheduler.workspace import Workspace, state_pipeline_id
from spate.statestore import StateStoreError, open_store

log = logging.getLogger(__name__)

#: Events read from a channel per store write.
_EVENTS_PER_WRITE = 500


def utc_now() -> datetime:
    return datetime.now(UTC)


class Scheduler:
    """Makes jobs match their pipelines' desired state on one cluster backend."""

    def __init__(self, store: ControlStore, backend: ClusterBackend, config: SchedulerConfig,
                 clock: Callable[[], datetime] = utc_now) -> None:
        self.store = store
        self.backend = backend
        self.config = config
        self.workspace = Workspace(config, backend)
        self.policy = RestartPolicy(
            budget=config.restart_budget, backoff_s=config.restart_backoff_s,
            backoff_max_s=config.restart_backoff_max_s,
            heartbeat_timeout_s=config.heartbeat_timeout_s, stop_timeout_s=config.stop_timeout_s,
            kill_timeout_s=config.kill_timeout_s)
        self.clock = clock
        self.meter = Meter(store, clock)

    # -- entry points (one per Celery task) -------------------------------------

    def reconcile_all(self) -> None:
        """Reconcile every pipeline that needs it and every live preview; drain the
        tenants' applications started at another size than applications now get."""
        applications = self.backend.applications
        if applications is not None:
            for tenant in applications.drain_resized(self._application_size()):
                log.info("the application of tenant %s was started at another size: "
                         "drained, its pipelines move to a new one", tenant)
        for pipeline_id in self.store.pipelines_to_reconcile():
            self._guarded(self.reconcile_pipeline, pipeline_id)
        for job_id in self.store.active_preview_ids():
            self._guarded(self.reconcile_job, job_id)
        self.sweep_orphans()

    def sweep_orphans(self) -> list[str]:
        """Kill what runs without the control plane holding it as running (a job it
        has as ended, or no longer has at all); the ids of the queries found."""
        found = self.backend.orphans(self._holds_running)
        if self.config.sandbox and self.backend.runs_here:
            for link in sweep_idle_links():
                log.info("removed the network of a compute unit nothing runs in: %s", link)
        for job_id in found:
            message = ("killed: it was still running though the control plane holds it "
                       "as ended")
            log.warning("job %s: %s", job_id, message)
            if self.store.job(job_id) is not None:
                self.store.add_error(job_id, message)
        return found

    def _holds_running(self, job_id: str) -> bool:
        job = self.store.job(job_id)
        return job is not None and job.state in PROCESS_STATES

    def meter_all(self) -> None:
        """Read every compute unit and charge its jobs (see :mod:`.metering`); then stop
        the pipelines of tenants past a hard-stop budget."""
        self.meter.sample()
        for pipeline_id in self.store.enforce_budgets():
            log.info("pipeline %s stops: its tenant's budget is spent", pipeline_id)
            self._guarded(self.reconcile_pipeline, pipeline_id)

    def reconcile_pipeline(self, pipeline_id: str) -> None:
        """Bring the pipeline's jobs in line with its desired state."""
        pipeline = self.store.pipeline(pipeline_id)
        if pipeline is None:
            return  # deleted: its jobs went with it
        for job in self.store.pipeline_jobs(pipeline_id):
            if not job.terminal:
                self.reconcile_job(job.id)
        wanted, jobs = self._on_clusters(pipeline, self.store.pipeline_jobs(pipeline_id))
        wanted = self._autoscaled(wanted, jobs)
        for action in decide_pipeline(wanted, jobs, self.clock()):
            if isinstance(action, StopJob):
                log.info("stopping job %s (%s): %s", action.job_id, action.mode, action.reason)
                if self.store.request_stop(action.job_id, action.mode) is not None:
                    self.reconcile_job(action.job_id)
            elif isinstance(action, StartJob):
                created = self.store.create_run_job(pipeline_id, self.backend.name,
                                                    action.reason, self.config.default_cluster,
                                                    watch=action.watch)
                if created is not None:
                    log.info("created job %s for pipeline %s: %s", created.id, pipeline_id,
                             action.reason)
                    self.reconcile_job(created.id)

    def _autoscaled(self, pipeline: PipelineView, jobs: list[JobView]) -> PipelineView:
        """The pipeline at the parallelism the autoscaler decides from its running job's
        latest figures (unchanged without autoscaling, or without a job at work)."""
        if pipeline.autoscale is None or pipeline.desired_state != DESIRED_RUNNING:
            return pipeline
        working = [job for job in jobs if job.kind == RUN and job.state == RUNNING
                   and not job.watch and job.stop_mode is None
                   and job.parallelism == pipeline.parallelism]
        if not working:
            return pipeline
        now = self.clock()
        decision = decide_scale(pipeline.autoscale, pipeline.parallelism,
                                Load.of(working[0].metrics, now),
                                running_since=working[0].state_since,
                                last_change=pipeline.autoscaled_at, now=now,
                                cooldown_s=self.config.autoscale_cooldown_s)
        if decision is None or not self.store.autoscale(pipeline.id, decision.parallelism,
                                                        decision.reason, now):
            return pipeline
        log.info("pipeline %s: %s", pipeline.id, decision.reason)
        return replace(pipeline, parallelism=decision.parallelism, autoscaled_at=now,
                       autoscale_reason=decision.reason)

    def _on_clusters(self, pipeline: PipelineView, jobs: list[JobView]
                     ) -> tuple[PipelineView, list[JobView]]:
        """The views with cluster names compared as the decisions need them.

        A job from before clusters had names ran on the default cluster. A
        pipeline moved to a cluster this deployment no longer has is not moved
        (its running job is kept, and logged); a new job of it fails to start,
        naming the clusters there are.
        """
        default = self.config.default_cluster
        jobs = [job if job.cluster else replace(job, cluster=default) for job in jobs]
        if pipeline.cluster is not None and pipeline.cluster not in self.config.clusters:
            log.warning("pipeline %s was moved to cluster %r, which is not configured "
                        "(known: %s)", pipeline.id, pipeline.cluster,
                        ", ".join(self.config.clusters))
            pipeline = replace(pipeline, cluster=None)
        return pipeline, jobs

    def reconcile_job(self, job_id: str) -> JobView | None:
        """Read the job's events, check its process and do what it needs; the job after."""
        job = self.store.job(job_id)
        if job is None or job.terminal:
            return job
        seen = None
        if job.state in PROCESS_STATES:
            # Liveness first: if the process is gone, everything it wrote is on the channel.
            alive = self.backend.is_alive(job.handle) if job.handle else None
            job = self._ingest(job)
            if job.terminal:
                self._after_end(job)
                return job
            seen = self._observe(job, alive)
        action = decide_job(job, seen, self.clock(), self.policy)
        if action is None:
            return job
        log.info("job %s (%s): %s", job.id, job.state, action)
        result = self._apply(job, action)
        if result is not None and result.terminal:
            self._after_end(result)
        return result

    def stop(self, job_id: str, mode: str) -> JobView | None:
        """Ask the job to stop in ``mode`` and act on it now."""
        if self.store.request_stop(job_id, mode) is None:
            return self.store.job(job_id)
        return self.reconcile_job(job_id)

    def checkpoint(self, job_id: str) -> int | None:
        """Record the job's latest committed epoch, read from the state store.

        In a micro-batch world every committed epoch *is* a checkpoint: its
        state, watermarks and sink markers are published together and a job
        resumes from the newest one. So a checkpoint request does not make the
        job do anything; it asks the source of truth, the state store, for the
        newest committed epoch and records it as the job's ``last_epoch``.
        """
        job = self.store.job(job_id)
        if job is None:
            return None
        spec = self.workspace.spec(job)
        try:
            store = open_store(spec.state_url)
        except StateStoreError as error:
            log.warning("checkpoint of job %s: state store unavailable: %s", job_id, error)
            return None
        try:
            epoch = store.pipeline(spec.tenant_id, spec.pipeline_id).last_committed_epoch()
        finally:
            store.close()
        if epoch is not None:
            self.store.record_epoch(job_id, epoch)
        return epoch

    # -- observing --------------------------------------------------------------

    def _ingest(self, job: JobView) -> JobView:
        """Record what the job published since the last read; the job after."""
        if not job.channel_url:
            return job
        try:
            channel = open_channel(job.channel_url)
        except ChannelError as error:
            log.warning("job %s: cannot open its channel: %s", job.id, error)
            return job
        try:
            while True:
                events, cursor = channel.read(job.channel_cursor, _EVENTS_PER_WRITE)
                if not events:
                    return job
                updated = self.store.ingest(job.id, job.channel_cursor, cursor,
                                            fold_events(events, job.attempt))
                if updated is None:  # another worker read the same events first
                    return self.store.job(job.id) or job
                job = updated
                if job.terminal:
                    return job
        except ChannelError as error:
            log.warning("job %s: reading its channel failed: %s", job.id, error)
            return job
        finally:
            channel.close()

    def _observe(self, job: JobView, alive: bool | None) -> Observation:
        cause = self.backend.exit_reason(job.handle) if alive is False and job.handle else None
        now = self.clock()
        submitted_at = (job.handle or {}).get("submitted_at")
        signs = [job.heartbeat_at, job.state_since,
                 datetime.fromtimestamp(submitted_at, UTC) if submitted_at else None]
        last_sign = max((sign for sign in signs if sign is not None), default=now)
        in_state_since = job.state_since or now
        return Observation(alive=alive, silent_s=(now - last_sign).total_seconds(),
                           in_state_s=(now - in_state_since).total_seconds(),
                           exit_reason=cause)

    # -- acting -----------------------------------------------------------------

    def _apply(self, job: JobView, action: JobAction) -> JobView | None:
        now = self.clock()
        if isinstance(action, Submit | Resubmit):
            return self._launch(job, action)
        if isinstance(action, AskToStop):
            return self._ask_to_stop(job, action.mode)
        if isinstance(action, Kill):
            self._kill(job)
            if action.again:
                return job
            # Ended only once its unit confirms the process gone (a later reconcile).
            return self.store.transition(job.id, {job.state}, STOPPING, action.message,
                                         stop_mode=FORCE)
        if isinstance(action, KillUnit):
            log.warning("job %s: %s", job.id, action.message)
            self._kill(job, whole_unit=True)
            return job
        if isinstance(action, Fail):
            self._kill(job)
            return self.store.transition(job.id, {job.state}, FAILED, action.message,
                                         ended_at=now, failure_message=action.message)
        if isinstance(action, Cancel):
            return self.store.transition(job.id, {CREATED, RESTARTING}, STOPPED, action.message,
                                         ended_at=now)
        if isinstance(action, MarkStopped):
            return self.store.transition(job.id, {STARTING, RUNNING, STOPPING}, STOPPED,
                                         action.message, ended_at=now)
        if isinstance(action, ScheduleRestart):
            self._kill(job)  # a silent process may still hang on to its resources
            self.store.add_error(job.id, action.message.split(";")[0],
                                 log_tail(job.handle or {}))
            return self.store.transition(
                job.id, {job.state}, RESTARTING, action.message, handle=None,
                next_attempt_at=now + timedelta(seconds=action.delay_s))
        raise SchedulerError(f"unknown action {action!r}")

    def _launch(self, job: JobView, action: Submit | Resubmit) -> JobView | None:
        """Claim the job for this worker, then launch its process; unless it runs a
        pipeline and as many jobs as ``max_starting_jobs`` are starting already: then it
        waits for a later reconcile (previews, which a user waits for, never wait)."""
        limit = self.config.max_starting_jobs
        if limit and job.kind != PREVIEW and self.store.starting_jobs() >= limit:
            log.debug("job %s waits: %d jobs are starting", job.id, limit)
            return job
        if isinstance(action, Submit):
            claimed = self.store.transition(
                job.id, {CREATED}, STARTING, "starting", started_at=self.clock(),
                channel_url=self.workspace.channel_url(job))
        else:
            claimed = self.store.transition(
                job.id, {RESTARTING}, STARTING,
                f"restarting from the last committed epoch (attempt {action.attempt})",
                attempt=action.attempt, next_attempt_at=None)
        if claimed is None:
            return None
        unit = None
        try:
            if isinstance(action, Submit):
                self._prepare_checkpoint(claimed)
            if self.workspace.hosted(claimed):
                handle = self._place(claimed)
                return self.store.update(job.id, {STARTING, RUNNING}, handle=handle)
            if self.config.sandbox and self.backend.runs_here:
                unit = self.workspace.compute_unit(
                    claimed, self.store.tenant_number(claimed.tenant_id))
            else:
                self.workspace.tenants.make_folders(claimed.tenant_id)
            spec = self._placed(claimed, self.workspace.spec(
                claimed, self.store.job_tables(claimed.tenant_id), unit,
                self.store.job_udfs(claimed.tenant_id)))
            files = self.workspace.write_spec(claimed, spec, unit)
            handle = self.backend.submit(spec, files.spec, files.log, claimed.attempt, unit)
        except CgroupError as error:
            # The host's fault, not the pipeline's: the operator has to act.
            log.error("job %s: its compute unit's control groups failed: %s", job.id, error)
            return self._fail_start(job, unit, (
                f"could not start the job: its sandbox's CPU and memory limits could not be "
                f"set ({error}). This is a problem of the server, not of the pipeline: ask "
                "the operator to check the host's cpu and memory cgroups (docs/security.md, "
                "'The compute unit'), then start the pipeline again"))
        except (SchedulerError, StateStoreError, OSError) as error:
            return self._fail_start(job, unit, f"could not start the job: {error}")
        return self.store.update(job.id, {STARTING, RUNNING}, handle=handle)

    def warm(self, tenant_id: str) -> bool:
        """Start the tenant's application ahead of its first job, on a sign that one is
        coming (its SQL being written); False when applications are off, or it runs."""
        applications = self.backend.applications
        if applications is None or not self.backend.runs_here:
            return False
        record = applications.describe(tenant_id)
        if record is not None and record["state"] == "running":
            return False
        self._application(tenant_id)
        log.info("started the application of tenant %s ahead of its first job", tenant_id)
        return True

    def _application(self, tenant: str) -> tuple[HostFolder, int | None, dict[str, Any]]:
        """The tenant's application folder, user id and running application (started
        when the tenant has none)."""
        applications = self.backend.applications
        assert applications is not None
        number = self.store.tenant_number(tenant) if self.config.sandbox else None
        uid = None if number is None else self.config.sandbox_uid_base + number
        folder = applications.prepare(tenant, uid)
        if number is None:
            self.workspace.tenants.make_folders(tenant)
        if uid is not None:  # the application's log, its user's
            os.close(open_regular(folder.log, os.O_WRONLY | os.O_CREAT, 0o600, (uid, 0)))
            os.lchown(folder.log, uid, uid)

        def start(folder: HostFolder) -> dict[str, Any]:
            unit = (self.workspace.application_unit(tenant, number) if number is not None
                    else None)
            try:
                return self.backend.launch_application(folder, unit)
            except BaseException:
                if unit is not None:
                    unit.remove()
                raise

        config = HostConfig(tenant, self.backend.spark_master() or DEFAULT_LOCAL_MASTER,
                            dict(self.config.spark_conf), self.config.application_idle_exit_s)
        return folder, uid, applications.ensure(tenant, config, start,
                                                self._application_size())

    def _place(self, job: JobView) -> dict[str, Any]:
        """Give ``job`` to its tenant's warm application, starting one if the tenant has
        none running; the job's handle."""
        applications = self.backend.applications
        assert applications is not None
        tenant = job.tenant_id
        folder, uid, application = self._application(tenant)
        job_dir = applications.job_dir(tenant, job.id, uid)
        spec = self._placed(job, self.workspace.spec(job, self.store.job_tables(tenant),
                                                     udfs=self.store.job_udfs(tenant)))
        applications.place(tenant, spec, uid)
        log.info("job %s placed in the application of tenant %s (%s)", job.id, tenant,
                 job_dir)
        return {APPLICATION: tenant, "job": job.id, "attempt": job.attempt,
                "process": application,
                "submitted_at": time.time(), "log": str(folder.log), "log_owner": uid}

    def _application_size(self) -> dict[str, Any]:
        """The size a tenant's application is started at (its compute unit's limits)."""
        return {"memory_mb": self.config.application_memory_mb,
                "cpu_cores": self.config.application_cpu_cores}

    def _fail_start(self, job: JobView, unit: ComputeUnit | None,
                    message: str) -> JobView | None:
        """A start that failed: the unit made for it goes, the job fails with ``message``."""
        if unit is not None:
            unit.remove()
        self.store.add_error(job.id, message)
        return self.store.transition(job.id, {STARTING}, FAILED, message,
                                     failure_message=message, ended_at=self.clock())

    def _placed(self, job: JobView, spec: JobSpec) -> JobSpec:
        """``spec`` on the job's cluster, with that cluster's checkpoint folder."""
        cluster = job.cluster or self.config.default_cluster
        self.config.cluster_master(cluster)  # an unknown cluster fails the start, named
        return replace(spec, cluster=cluster, checkpoint_dir=str(self._checkpoint_dir(job)))

    def _checkpoint_dir(self, job: JobView, cluster: str | None = None) -> Path:
        return self.config.cluster_checkpoint_dir(job.tenant_id, state_pipeline_id(job),
                                                  cluster or job.cluster)

    def _prepare_checkpoint(self, job: JobView) -> None:
        """Before a job's first launch: drop state for a restart without it, and give a
        job that moved to another cluster a new checkpoint folder there (one left from an
        earlier stay on that cluster holds offsets the state store has moved past)."""
        if job.pipeline_id is None:
            return
        older = [j for j in self.store.pipeline_jobs(job.pipeline_id) if j.id != job.id]
        previous = older[0] if older else None
        if starts_without_state(job, previous, self.store.pipeline(job.pipeline_id)):
            self.workspace.drop_state(job)
            for cluster in self.config.clusters:
                self.backend.remove_checkpoint(str(self._checkpoint_dir(job, cluster)))
        elif previous is not None and self._moved(previous, job):
            log.info("job %s moved from cluster %s to %s: new checkpoint folder", job.id,
                     previous.cluster, job.cluster)
            self.backend.remove_checkpoint(str(self._checkpoint_dir(job)))

    def _moved(self, previous: JobView, job: JobView) -> bool:
        default = self.config.default_cluster
        return (previous.cluster or default) != (job.cluster or default)

    def _ask_to_stop(self, job: JobView, mode: str) -> JobView | None:
        try:
            channel = open_channel(self.workspace.channel_url(job))
            try:
                channel.request_stop(mode)
            finally:
                channel.close()
        except ChannelError as error:
            log.warning("job %s: could not ask it to stop (%s); will retry", job.id, error)
            return job
        return self.store.transition(job.id, {STARTING, RUNNING}, STOPPING,
                                     f"stopping ({mode})")

    def _kill(self, job: JobView, whole_unit: bool = False) -> None:
        """Kill the job's process, or with ``whole_unit`` everything its unit runs."""
        if not job.handle:
            return
        try:
            (self.backend.kill_unit if whole_unit else self.backend.kill)(job.handle)
        except SchedulerError as error:
            log.warning("job %s: kill failed: %s", job.id, error)

    def _after_end(self, job: JobView) -> None:
        """Clean up after a job is over: its compute unit and spec go, and a preview's
        state and checkpoint."""
        if job.handle:
            self.meter.settle(job.handle)  # its unit's last reading, before the unit goes
            self.backend.release(job.handle)
        self.workspace.scrub(job)
        if job.kind != PREVIEW:
            return
        try:
            self.workspace.drop_state(job)
        except StateStoreError as error:
            log.warning("preview %s: could not drop its state: %s", job.id, error)

    def _guarded(self, method: Callable[[str], Any], item_id: str) -> None:
        # One broken pipeline or job must not stop the sweep over the others.
        try:
            method(item_id)
        except Exception:
            log.exception("reconciling %s failed; the next sweep retries", item_id)
