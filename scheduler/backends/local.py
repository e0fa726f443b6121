"""The ``local`` backend: each job is a detached Python process on the worker's machine.

The process runs ``python -m engine.job.main spec.json`` with Spark in local
mode inside it (``spark_master``, default ``local[2]``), so a job needs
nothing but this machine. Its output goes to ``job.log`` in the job's
directory.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import engine
from engine.job.spec import JobSpec
from scheduler.backends import process
from scheduler.backends.base import ClusterBackend

DEFAULT_LOCAL_MASTER = "local[2]"


def job_environment(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The worker's environment, with Spark's Python and Spate's code found by the job."""
    env = dict(os.environ)
    env["PYSPARK_PYTHON"] = sys.executable
    env["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # Where the engine package lives, so the job imports this very code even when
    # Spate runs from a source tree rather than an installed distribution.
    source_root = str(Path(engine.__file__).resolve().parent.parent)
    paths = [source_root, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env.update(extra or {})
    return env


class LocalBackend(ClusterBackend):
    """Job processes on this machine, watched through their pid."""

    name = "local"

    def submit(self, spec: JobSpec, spec_path: Path, log_path: Path,
               attempt: int) -> dict[str, Any]:
        command = [sys.executable, "-m", "engine.job.main", str(spec_path)]
        return process.launch(command, job_environment(), spec_path.parent, log_path)

    def is_alive(self, handle: dict[str, Any]) -> bool | None:
        return process.is_alive(handle)

    def kill(self, handle: dict[str, Any]) -> None:
        process.kill(handle)

    def spark_master(self) -> str | None:
        return self.config.spark_master or DEFAULT_LOCAL_MASTER
