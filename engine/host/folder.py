"""The folder a tenant's application works in, shared by the application and the scheduler.

``<folder>/`` (the scheduler's; the application, as the tenant's user, only reads it)
  ``host.json``        what the application runs with (:class:`HostConfig`);
  ``inbox/<run>.json`` a job's attempt to start (``<run>`` is :func:`run_name`):
                       its :class:`~spate.engine.job.spec.JobSpec`, the tenant
                       user's file (a spec carries the job's secrets), removed by
                       the scheduler once the application shows the run;
  ``kill/<run>``       an attempt to abandon at once (its epoch in progress is not
                       committed);
  ``stop``             present: stop every job after its epoch commits, then exit;
  ``jobs/<job>/``      each job's own folder, the tenant user's: its ``file://``
                       channel;
  ``run/``             the tenant user's: ``status.json``, the application's
                       heartbeat — its pid, when it wrote, its jobs' states
                       (:class:`HostStatus`), rewritten every second — and
                       ``host.log``.

Only the folders the tenant's user owns can hold a link it planted; the
scheduler reads ``run/status.json`` without following one
(:mod:`spate.engine.job.nofollow`).
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from spate.engine.job.nofollow import open_regular

#: A hosted job's state in :class:`HostStatus`.
PENDING, RUNNING, ENDED = "pending", "running", "ended"


def run_name(job_id: str, attempt: int) -> str:
    """The name of a job's attempt in the application's folder and status.

    A job restarted in the same application is another run: the kill mark of the
    attempt it replaces, or that attempt's end, never stands for the new one.
    """
    return f"{job_id}.{attempt}"


def job_of(run: str) -> str:
    """The job a run (:func:`run_name`) is an attempt of."""
    return run.partition(".")[0]


@dataclass(frozen=True)
class HostConfig:
    """What one tenant's application runs with."""

    tenant_id: str
    spark_master: str
    spark_conf: dict[str, str] = field(default_factory=dict)
    #: seconds the application waits with no job before it exits (scale to zero)
    idle_exit_s: float = 60.0
    #: names this start of the application; its status repeats it (a sandboxed
    #: process's own pid is not the one its launcher sees)
    launch_id: str = ""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> HostConfig:
        values: dict[str, Any] = json.loads(text)
        return cls(**values)


@dataclass(frozen=True)
class HostStatus:
    """What the application last said about itself."""

    #: the :attr:`HostConfig.launch_id` of the application that wrote it
    launch_id: str
    #: wall clock (ms) of the write
    written_ms: int
    #: run (:func:`run_name`) -> PENDING, RUNNING or ENDED
    jobs: dict[str, str] = field(default_factory=dict)
    #: the application is stopping (a stop was asked, or it has been idle)
    stopping: bool = False


@dataclass(frozen=True)
class HostFolder:
    """The paths of one application's folder."""

    path: Path

    @property
    def config(self) -> Path:
        return self.path / "host.json"

    @property
    def inbox(self) -> Path:
        return self.path / "inbox"

    @property
    def kills(self) -> Path:
        return self.path / "kill"

    @property
    def jobs(self) -> Path:
        return self.path / "jobs"

    @property
    def run(self) -> Path:
        return self.path / "run"

    @property
    def status(self) -> Path:
        return self.run / "status.json"

    @property
    def stop(self) -> Path:
        return self.path / "stop"

    @property
    def log(self) -> Path:
        return self.run / "host.log"

    def job_dir(self, job_id: str) -> Path:
        return self.jobs / job_id

    def ticket(self, run: str) -> Path:
        return self.inbox / f"{run}.json"

    def write_status(self, status: HostStatus) -> None:
        """Replace ``status.json`` whole (a reader never sees half of it)."""
        handle, temporary = tempfile.mkstemp(dir=self.run, prefix=".status-")
        with os.fdopen(handle, "w") as out:
            json.dump(asdict(status), out)
        os.replace(temporary, self.status)

    def read_status(self, owner: int | None = None) -> HostStatus | None:
        """The last status the application wrote (None: none, or unreadable); a file
        not owned by ``owner`` (when given) is not read."""
        owners = None if owner is None else (owner,)
        try:
            handle = open_regular(self.status, os.O_RDONLY, owners=owners)
        except OSError:
            return None
        try:
            with os.fdopen(handle) as source:
                values = json.load(source)
            return HostStatus(str(values["launch_id"]), int(values["written_ms"]),
                              {str(k): str(v) for k, v in dict(values["jobs"]).items()},
                              bool(values.get("stopping", False)))
        except (OSError, ValueError, KeyError, TypeError):
            return None
