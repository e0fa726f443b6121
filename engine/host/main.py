"""A tenant's warm Spark application: one process, one SparkContext, hosting that tenant's
pipelines and previews, each its own streaming query in a session of its own.

``python -m spate.engine.host.main FOLDER`` (the layout: :mod:`.folder`).

Starting a Spark application costs a JVM, a driver and Python workers: seconds
of CPU and hundreds of MB.  A tenant's application starts once, on its first
job, and each further job — a pipeline, a preview — is a thread running
:class:`~spate.engine.job.main.Job` in a new session of the same application
(``SparkSession.newSession()``: its own temporary views, UDFs and SQL
settings).  So a preview starts in about the time its plan and first epoch
take.  Every job keeps its own channel, state, offsets and epochs, exactly as
in a process of its own, and its own failure domain: a job that fails ends
alone (its error published on its channel), and a stuck one is abandoned alone
(its streaming query's jobs are cancelled by job group).  Jobs start their
queries two at a time (:mod:`spate.engine.job.turns`), so a tenant starting
many pipelines at once does not starve Spark's Python workers of the seconds
they have to connect back.

The application picks new jobs up from ``inbox/``, abandons those named in
``kill/``, writes ``status.json`` every :data:`POLL_S`, and exits after
``idle_exit_s`` without jobs (a tenant with nothing to run holds no JVM), or
when ``stop`` appears (every job stops after its epoch in progress commits).

Exit status: 0 after a stop or idling out, 1 when the application could not start.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession

from spate.engine.host.folder import ENDED, RUNNING, HostConfig, HostFolder, HostStatus
from spate.engine.job.channel import ChannelError, open_channel
from spate.engine.job.main import EXIT_FAILED, Job, configure_logging
from spate.engine.job.spec import JobSpec
from spate.engine.job.turns import StartTurns
from spate.engine.spark import build_spark, driver_alive

log = logging.getLogger("spate.engine.host")

#: How often the application looks for new jobs and kills, and rewrites its status.
POLL_S = 0.2
#: How often ``status.json`` is rewritten (the scheduler's liveness signal).
STATUS_EVERY_S = 1.0
#: How long a stopping application waits for its jobs to commit and end.
STOP_WAIT_S = 60.0


@dataclass
class HostedJob:
    """One job running in the application."""

    job: Job
    thread: threading.Thread
    exit_code: int | None = None


@dataclass
class Host:
    """The application's loop over its folder."""

    folder: HostFolder
    config: HostConfig
    jobs: dict[str, HostedJob] = field(default_factory=dict)
    #: job ids of tickets read (a ticket may outlive its reading: see :meth:`_take`)
    taken: set[str] = field(default_factory=set)
    #: jobs start their queries a few at a time (:mod:`spate.engine.job.turns`)
    turns: StartTurns = field(default_factory=StartTurns)

    def run(self) -> int:
        spark = build_spark(self.config.spark_master, f"spate-app-{self.config.tenant_id}",
                            self.config.spark_conf)
        log.info("application ready", extra={"tenant": self.config.tenant_id})
        idle_since = time.monotonic()
        written = 0.0
        try:
            while not self.folder.stop.exists():
                if not driver_alive(spark):
                    # Its jobs cannot go on: exit, so the scheduler sees the application
                    # gone (and why: its unit's memory limit) and restarts them elsewhere.
                    log.error("the application's Spark driver is gone: exiting")
                    os._exit(EXIT_FAILED)
                self._take(spark)
                self._kill()
                if any(hosted.exit_code is None for hosted in self.jobs.values()):
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since > self.config.idle_exit_s:
                    log.info("no job for %.0f s: exiting", self.config.idle_exit_s)
                    break
                if time.monotonic() - written >= STATUS_EVERY_S:
                    self._write_status(stopping=False)
                    written = time.monotonic()
                time.sleep(POLL_S)
            self._stop_all()
        finally:
            self._write_status(stopping=True)
            spark.stop()
        return 0

    def _take(self, spark: SparkSession) -> None:
        """Start every run (a job's attempt) whose ticket is new.

        The inbox is the scheduler's (the application may not remove tickets):
        a ticket is read once, remembered, and removed by the scheduler once the
        status shows the run.
        """
        try:
            names = sorted(os.listdir(self.folder.inbox))
        except OSError:
            return
        for name in names:
            run = name.removesuffix(".json")
            if not name.endswith(".json") or run in self.taken:
                continue
            self.taken.add(run)
            try:
                spec = JobSpec.from_json((self.folder.inbox / name).read_text())
                channel = open_channel(spec.channel_url, spec.attempt)
            except (OSError, ValueError, TypeError, ChannelError) as error:
                log.error("cannot start run %s: %s", run, error)
                continue
            job = Job(spec, channel, application=spark, turns=self.turns)
            thread = threading.Thread(target=self._run_job, args=(run,),
                                      name=f"job-{run}", daemon=True)
            self.jobs[run] = HostedJob(job, thread)
            thread.start()
            log.info("job started", extra={"job": spec.job_id, "attempt": spec.attempt,
                                           "kind": spec.kind})
        self._write_status(stopping=False)

    def _run_job(self, run: str) -> None:
        hosted = self.jobs[run]
        try:
            hosted.exit_code = hosted.job.run()
        except BaseException:  # a job's failure is its own: the application goes on
            log.exception("run %s ended abnormally", run)
            hosted.exit_code = EXIT_FAILED
        finally:
            hosted.job.channel.close()
            log.info("job ended", extra={"job": hosted.job.spec.job_id,
                                         "attempt": hosted.job.spec.attempt,
                                         "exit": hosted.exit_code})

    def _kill(self) -> None:
        """Abandon the runs named in ``kill/``: their epoch in progress never commits."""
        try:
            names = os.listdir(self.folder.kills)
        except OSError:
            return
        for run in names:
            hosted = self.jobs.get(run)
            if hosted is not None and hosted.exit_code is None and hosted.job.control:
                hosted.job.control.request("immediate")

    def _stop_all(self) -> None:
        """Every job stops after its epoch in progress commits (as SIGTERM does a job)."""
        running = [h for h in self.jobs.values() if h.exit_code is None]
        for hosted in running:
            if hosted.job.control is not None:
                hosted.job.control.request("checkpoint")
        deadline = time.monotonic() + STOP_WAIT_S
        for hosted in running:
            hosted.thread.join(max(0.0, deadline - time.monotonic()))

    def _write_status(self, stopping: bool) -> None:
        jobs = {run: RUNNING if hosted.exit_code is None else ENDED
                for run, hosted in self.jobs.items()}
        try:
            self.folder.write_status(HostStatus(self.config.launch_id, time.time_ns() // 10**6,
                                                jobs, stopping))
        except OSError as error:
            log.warning("cannot write the application's status: %s", error)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    configure_logging()
    if len(args) != 1:
        log.error("usage: python -m spate.engine.host.main FOLDER")
        return EXIT_FAILED
    folder = HostFolder(Path(args[0]))
    # Its time, against the request's, is what the sandbox, Python and the imports took.
    log.info("application process up")
    try:
        config = HostConfig.from_json(folder.config.read_text())
    except (OSError, ValueError, TypeError) as error:
        log.error("cannot start the application from %s: %s", folder.path, error)
        return EXIT_FAILED
    return Host(folder, config).run()


if __name__ == "__main__":
    sys.exit(main())
