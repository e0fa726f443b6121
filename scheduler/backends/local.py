"""The ``local`` backend: each job is a detached Python process on the worker's machine.

The process runs ``python -m spate.engine.job.main --consume spec.json`` with
Spark in local mode inside it (``spark_master``, default ``local[2]``), so a
job needs nothing but this machine. With the sandbox on, the process runs in
its tenant's compute unit (:mod:`spate.scheduler.sandbox.unit`): the handle
names the unit, so a kill also removes its control groups and a death by its
memory limit is reported as such. Its output goes to ``job.log`` in the job's
directory.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spate.engine.host.folder import HostFolder
from spate.engine.job.spec import JobSpec
from spate.scheduler.backends import process
from spate.scheduler.backends.applications import APPLICATION, Applications
from spate.scheduler.backends.base import ClusterBackend
from spate.scheduler.config import SchedulerConfig
from spate.scheduler.sandbox.unit import ComputeUnit, exit_reason, release

#: Two cores, and up to four attempts per task (a cluster's default
#: ``spark.task.maxFailures``): a task whose Python worker died is run again, as on
#: a cluster, instead of failing the query (plain ``local[2]`` never retries).
DEFAULT_LOCAL_MASTER = "local[2,4]"


#: The only server setting an unsandboxed job inherits (the rest are the server's secrets).
_INHERITED_SETTINGS = ("SPATE_LOG",)


def job_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment without its ``SPATE_*`` settings (database URL, keys),
    with Spark's Python set to this interpreter."""
    env = {key: value for key, value in os.environ.items()
           if not key.startswith("SPATE_") or key in _INHERITED_SETTINGS}
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    env.update(extra or {})
    return env


class LocalBackend(ClusterBackend):
    """Job processes on this machine, watched through their pid; or, with
    ``applications`` on, jobs hosted in their tenants' warm applications."""

    name = "local"
    runs_here = True

    def __init__(self, config: SchedulerConfig) -> None:
        super().__init__(config)
        if config.applications:
            self.applications = Applications(config.data_dir / "applications")

    def submit(self, spec: JobSpec, spec_path: Path, log_path: Path, attempt: int,
               unit: ComputeUnit | None = None) -> dict[str, Any]:
        command = [sys.executable, "-m", "spate.engine.job.main", "--consume", str(spec_path)]
        if unit is None:
            return process.launch(command, job_environment(), spec_path.parent, log_path)
        sandboxed, env = unit.command(command, {"SPARK_LOCAL_IP": "127.0.0.1"})
        return {**process.launch(sandboxed, env, spec_path.parent, log_path, unit.user.uid),
                "unit": unit.handle()}

    def launch_application(self, folder: HostFolder, unit: ComputeUnit | None
                           ) -> dict[str, Any]:
        command = [sys.executable, "-m", "spate.engine.host.main", str(folder.path)]
        if unit is None:
            return process.launch(command, job_environment(), folder.run, folder.log)
        sandboxed, env = unit.command(command, {"SPARK_LOCAL_IP": "127.0.0.1"})
        return {**process.launch(sandboxed, env, folder.run, folder.log, unit.user.uid),
                "unit": unit.handle()}

    def is_alive(self, handle: dict[str, Any]) -> bool | None:
        if self.applications is not None and APPLICATION in handle:
            return self.applications.is_alive(handle)
        return process.is_alive(handle)

    def kill(self, handle: dict[str, Any]) -> None:
        if APPLICATION in handle:  # only the job goes: its neighbours keep running
            if self.applications is not None:
                self.applications.kill(handle)
            return
        process.kill(handle)
        self.release(handle)

    def kill_unit(self, handle: dict[str, Any]) -> None:
        if APPLICATION in handle:
            if self.applications is not None:
                self.applications.kill_application(handle)
            return
        self.kill(handle)

    def orphans(self, active: Callable[[str], bool]) -> list[str]:
        hosted = [] if self.applications is None else self.applications.orphans(active)
        return hosted + process.orphan_jobs(self.config.jobs_dir, active)

    def exit_reason(self, handle: dict[str, Any]) -> str | None:
        unit = handle.get("process", handle).get("unit")
        return exit_reason(unit) if unit is not None else None

    def release(self, handle: dict[str, Any]) -> None:
        if APPLICATION in handle:
            if self.applications is not None:
                self.applications.release(handle)
        elif "unit" in handle:
            release(handle["unit"])

    def spark_master(self) -> str | None:
        return self.config.spark_master or DEFAULT_LOCAL_MASTER
