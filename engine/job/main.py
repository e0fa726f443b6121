"""The job process: runs one pipeline (or preview) of a :class:`JobSpec`, reporting on a channel.

``python -m spate.engine.job.main SPEC_FILE`` — also usable as the application file
of ``spark-submit``, which has then configured the master (the spec's
``spark_master`` is None and the session spark-submit set up is used, with
Spate's session settings applied on top).

The job plans ``spec.sql`` (``{{ NAME }}`` references filled from
``spec.variables`` only; its UDFs read from ``spec.udf_source`` and
``spec.udf_files``), opens the state store at ``spec.state_url`` scoped to
``(tenant_id, pipeline_id)`` and runs the plan with
:class:`~spate.engine.runtime.runner.PipelineRunner` against ``spec.checkpoint_dir``.
Re-running the same spec after a crash resumes from the last committed epoch;
re-running it after the pipeline finished reports ``finished`` at once (drop
the pipeline's state and checkpoint to run it again from the start).

Channel events (see :mod:`spate.engine.job.events` for their fields):

- ``status`` ``running`` once the streaming query started, and at the end
  exactly one of ``finished`` (bounded input done, or a preview's row limit
  reached), ``stopped`` (after a stop request), ``idle`` (no input for the
  spec's ``idle_stop_s``; ``wake_at_ms`` says when input is due, absent when a
  watcher must look for it) or ``failed``
  (with a one-line ``message`` the tenant can act on), preceded by an
  ``error`` event carrying the traceback;
- ``epoch`` after each committed epoch; ``heartbeat`` every few seconds;
- ``rows`` for previews (:mod:`spate.engine.job.preview`).

A ``watch`` spec runs no Spark: it watches the idle pipeline's sources
(:mod:`spate.engine.job.watch`) and ends ``idle``, due at once, when input arrives.

Stops (:mod:`spate.engine.job.control`): ``checkpoint`` and SIGTERM (sent to the
job's process, not its group: the group holds Spark's JVM) commit the epoch
in progress first; ``graceful`` does too but falls back to ``immediate``
after :data:`~spate.engine.job.control.GRACEFUL_TIMEOUT_S` (30 s); ``immediate``
abandons it.

Exit status: 0 when finished or stopped, 1 when failed.  Logs go to stderr
(level from ``SPATE_LOG``, default INFO); Spark's own start-up noise stays quiet.
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from spate.engine.connectors import ConnectorError, Sink
from spate.engine.connectors.core.boundary import Boundary
from spate.engine.job.channel import ChannelError, JobChannel, open_channel
from spate.engine.job.cluster import check_state_reachable, submitted_master
from spate.engine.job.control import JobControl
from spate.engine.job.errors import JobError, JobRefusedError
from spate.engine.job.events import EpochEvents, error_event, status_event
from spate.engine.job.preview import PreviewRows, preview_sinks
from spate.engine.job.spec import PREVIEW, RUN, WATCH, JobSpec
from spate.engine.job.turns import StartTurns, Turn
from spate.engine.job.watch import SourceWatcher
from spate.engine.planner import PipelinePlan, PlanningError, plan_pipeline
from spate.engine.planner.external import TableDefinition, tables_from_definitions
from spate.engine.runtime.errors import PipelineFailedError
from spate.engine.runtime.failures import locate_in_sql
from spate.engine.runtime.pacing import pacing_for
from spate.engine.runtime.reports import EpochReport
from spate.engine.runtime.runner import PipelineRunner, RunOptions
from spate.engine.spark import build_spark, driver_lost, hosted_session
from spate.engine.udf import UdfDefinitionError, UdfError, UdfFile, UdfRegistry, load_udf_files
from spate.statestore import (
    DEFAULT_KEY_GROUPS,
    PipelineState,
    StateStoreError,
    StateStoreUnreachableError,
    open_store,
)

log = logging.getLogger("spate.engine.job")

EXIT_OK = 0
EXIT_FAILED = 1
#: Waits before running again after the state store did not answer: doubling, capped.
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 15.0

#: Errors whose message is already written for the tenant.
_TENANT_ERRORS = (JobError, PipelineFailedError, ConnectorError, StateStoreError, ChannelError,
                  UdfError)


@dataclass(frozen=True)
class Outcome:
    """How a job ended: ``finished`` or ``stopped``, and why."""

    state: str
    message: str
    #: an idle run's: when its input is due (wall clock, ms)
    wake_at_ms: int | None = None


class Job:
    """One run of one spec, publishing on ``channel``."""

    def __init__(self, spec: JobSpec, channel: JobChannel,
                 application: SparkSession | None = None,
                 turns: StartTurns | None = None) -> None:
        """``application``: the tenant's warm Spark application hosting this job as one
        of its queries (:mod:`spate.engine.host`); None: the job starts its own.
        ``turns``: the application's turns to start a query (:mod:`.turns`)."""
        self.spec = spec
        self.channel = channel
        self.application = application
        self.turns = turns
        self._turn: Turn | None = None
        self.epochs = EpochEvents()
        self.preview: PreviewRows | None = None
        #: the job's stop control while it runs (a host applies kills through it)
        self.control: JobControl | None = None

    def run(self) -> int:
        """Run to the end; publish the final status; return the exit code.

        A failure that is not the pipeline's and may pass by itself — the state store did
        not answer (down, restarting), a volume is full — is reported, and the job runs
        again from the last committed epoch after a wait (doubling, at most
        :data:`RETRY_MAX_S`), for as long as it takes, unless it is asked to stop.
        """
        with JobControl(self.channel, own_process=self.application is None) as control:
            self.control = control
            retries = 0
            while True:
                try:
                    outcome = self._run(control)
                    break
                except Exception as error:  # every failure is reported; the exit code says so
                    if self.application is not None and driver_lost(self.application, error):
                        # The application died (its memory limit): not this job's failure.
                        # Its exit tells the scheduler, which restarts the job.
                        log.error("the application's Spark driver is gone: %s", error)
                        return EXIT_FAILED
                    if not _transient(error) or control.stop_mode is not None:
                        outcome = self._fail(error)
                        break
                    wait_s = min(RETRY_FIRST_S * 2 ** retries, RETRY_MAX_S)
                    retries += 1
                    self._report_retry(error, wait_s)
                    if _stop_requested_within(control, wait_s):
                        outcome = Outcome("stopped", f"stopped ({control.stop_mode}) while "
                                                     "waiting for the state store")
                        break
        # The final status comes after the control's threads have stopped, so that it
        # is the last event the job publishes (no heartbeat after it).
        self._publish(status_event(outcome.state, outcome.message, outcome.wake_at_ms))
        log.info("job ended", extra={"job": self.spec.job_id, "state": outcome.state})
        return EXIT_FAILED if outcome.state == "failed" else EXIT_OK

    def _run(self, control: JobControl) -> Outcome:
        _check_spec(self.spec)
        plan = self._plan()
        master = self.spec.spark_master or submitted_master()
        check_state_reachable(master, self.spec.state_url)
        store = open_store(self.spec.state_url)
        try:
            state = store.pipeline(self.spec.tenant_id, self.spec.pipeline_id)
            if self.spec.kind == WATCH:
                return self._watch(plan, state, control)
            spark = (build_spark(self.spec.spark_master, f"spate-{self.spec.job_id}",
                                 self.spec.spark_conf) if self.application is None
                     else hosted_session(self.application, self.spec.spark_conf))
            runner = PipelineRunner(plan, spark, state, self._options(plan, control))
            control.attach(runner)
            if self.turns is not None:
                self._turn = self.turns.take()
            if control.stop_mode is not None:
                return Outcome("stopped", f"stopped ({control.stop_mode}) before it started")
            finished = runner.run()
        finally:
            if self._turn is not None:
                self._turn.done()
            store.close()
        if runner.idle and control.stop_mode is None:
            then = ("a watcher looks for it" if runner.watch_sources
                    else "to resume when its input is due")
            return Outcome("idle", f"no input for {self.spec.idle_stop_s:g} s: stopped after "
                           f"its last commit; {then}", runner.wake_at_ms)
        return self._outcome(finished, control)

    def _watch(self, plan: PipelinePlan, state: PipelineState, control: JobControl) -> Outcome:
        """An idle pipeline's watch (no Spark): idle and due at once when input arrives."""
        watcher = SourceWatcher(plan, state, self.spec.parallelism)
        control.attach(watcher)
        woken = watcher.run(on_start=lambda: self._publish(status_event("running")))
        if woken.due_ms is None:
            return Outcome("stopped", woken.message)
        return Outcome("idle", woken.message, woken.due_ms)

    def _plan(self) -> PipelinePlan:
        spec = self.spec
        try:
            boundary = Boundary.from_dict(spec.boundary)
            catalog = tables_from_definitions(
                (TableDefinition.from_dict(table) for table in spec.tables), boundary)
            return plan_pipeline(spec.sql, spec.variables, tables=catalog, udfs=_udfs(spec),
                                 boundary=boundary, previews=spec.kind == PREVIEW,
                                 check_inputs=True)
        except PlanningError as error:
            raise JobRefusedError(
                f"invalid SQL at line {error.line}:{error.column}: {error.message}") from None
        except UdfDefinitionError as error:
            raise JobRefusedError(f"invalid UDF file: {error}") from None

    def _options(self, plan: PipelinePlan, control: JobControl) -> RunOptions:
        interval = self.spec.checkpoint_interval_ms
        overrides: dict[str, Sink] = {}
        if self.spec.kind == PREVIEW:
            self.preview = PreviewRows(self.channel, self.spec.preview_row_limit,
                                       lambda: control.request("checkpoint"))
            overrides = preview_sinks(plan, self.preview)
        return RunOptions(
            parallelism=self.spec.parallelism, checkpoint_dir=self.spec.checkpoint_dir,
            trigger_interval=f"{interval} milliseconds" if interval else None,
            on_epoch=self._on_epoch, on_start=self._on_start, sink_overrides=overrides,
            update_flush_interval_ms=self.spec.update_flush_interval_ms,
            idle_stop_s=self.spec.idle_stop_s if self.spec.kind == RUN else None,
            # A preview shows rows as they come: its epochs run back to back.
            pacing=pacing_for(self.spec.epoch_max_delay_ms) if self.spec.kind == RUN else None)

    def _outcome(self, finished: bool, control: JobControl) -> Outcome:
        if finished:
            return Outcome("finished", "the input ended and every window fired")
        if self.preview is not None and self.preview.reached:
            return Outcome("finished", f"preview row limit of {self.preview.limit} reached")
        return Outcome("stopped", f"stopped ({control.stop_mode or 'query ended'})")

    def _on_start(self) -> None:
        self.epochs.query_started()
        self._publish(status_event("running"))

    def _on_epoch(self, report: EpochReport) -> None:
        if self._turn is not None:  # its query and workers are up: the next may start
            self._turn.done()
        self._publish(self.epochs.event(report))

    def _report_retry(self, error: Exception, wait_s: float) -> None:
        message = (f"{_failure_message(error, self.spec.sql)}; running again from the last "
                   f"committed epoch in {wait_s:g} s")
        log.warning("%s", message, extra={"job": self.spec.job_id})
        self._publish(error_event(message, ""))

    def _fail(self, error: Exception) -> Outcome:
        message = _failure_message(error, self.spec.sql)
        log.error("job failed: %s", message, extra={"job": self.spec.job_id})
        self._publish(error_event(message, "".join(traceback.format_exception(error))))
        return Outcome("failed", message)

    def _publish(self, event: dict[str, object]) -> None:
        # The state store, not the channel, is the record of progress: a channel
        # outage must not fail the pipeline, so it is logged and the job goes on.
        try:
            self.channel.publish(event)
        except ChannelError as error:
            log.warning("cannot publish a %s event: %s", event.get("type"), error)


def _transient(error: Exception) -> bool:
    """Whether ``error`` may pass by itself (see :meth:`Job.run`): the state store did not
    answer, or a volume is full or over its quota."""
    if isinstance(error, StateStoreUnreachableError):
        return True
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return isinstance(error, PipelineFailedError) and error.transient


def _stop_requested_within(control: JobControl, wait_s: float) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if control.stop_mode is not None:
            return True
        time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    return control.stop_mode is not None


def _udfs(spec: JobSpec) -> UdfRegistry | None:
    """The UDFs the spec carries: its own file and the service's, read (never run) here."""
    files = [UdfFile(f["filename"], f["source"]) for f in spec.udf_files]
    if spec.udf_source is not None:
        files.insert(0, UdfFile(spec.udf_filename, spec.udf_source))
    return load_udf_files(files) if files else None


def _check_spec(spec: JobSpec) -> None:
    if spec.kind not in (RUN, PREVIEW, WATCH):
        raise JobRefusedError(f"unknown job kind {spec.kind!r}: use {RUN!r}, {PREVIEW!r} "
                              f"or {WATCH!r}")
    if not 1 <= spec.parallelism <= DEFAULT_KEY_GROUPS:
        raise JobRefusedError(f"parallelism {spec.parallelism} is out of range: use 1 to "
                              f"{DEFAULT_KEY_GROUPS} (a pipeline's number of key groups)")
    if spec.kind == PREVIEW and spec.preview_row_limit < 1:
        raise JobRefusedError("a preview needs a row limit of at least 1")


def _failure_message(error: Exception, sql: str) -> str:
    """One line a tenant can act on; where in the SQL, when Spark's message shows it."""
    if isinstance(error, _TENANT_ERRORS):
        text = str(error)
    else:  # Spark failing to start, a bug: name the error, keep its first line
        text = f"{type(error).__name__}: {error}"
    line = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    where = locate_in_sql(sql, line) if isinstance(error, PipelineFailedError) else None
    return f"line {where[0]}, column {where[1]}: {line}" if where else line


def configure_logging() -> None:
    level = getattr(logging, os.environ.get("SPATE_LOG", "INFO").upper(), logging.INFO)
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    # py4j logs every Python error raised inside a Spark callback; the job reports it once.
    logging.getLogger("py4j").setLevel(logging.CRITICAL)


def main(argv: list[str] | None = None) -> int:
    """Run the job in the spec file named by ``argv``; return the exit code.

    ``--consume SPEC_FILE`` removes the file once read: a spec holds the job's
    secrets, so the scheduler's copy lives only until the job has it in memory.
    """
    args = sys.argv[1:] if argv is None else argv
    configure_logging()
    consume = bool(args) and args[0] == "--consume"
    if consume:
        args = args[1:]
    if len(args) != 1:
        log.error("usage: python -m spate.engine.job.main [--consume] SPEC_FILE")
        return EXIT_FAILED
    try:
        spec_path = Path(args[0])
        spec = JobSpec.from_json(spec_path.read_text())
        if consume:
            spec_path.unlink()
        channel = open_channel(spec.channel_url, spec.attempt)
    except (OSError, ValueError, TypeError, ChannelError) as error:
        # No channel to report on: the scheduler sees the exit code and this log.
        log.error("cannot start the job from %s: %s", args[0], error)
        return EXIT_FAILED
    try:
        return Job(spec, channel).run()
    finally:
        channel.close()


if __name__ == "__main__":
    sys.exit(main())
