"""The interface every cluster backend implements."""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from spate.engine.host.folder import HostFolder
from spate.engine.job.spec import JobSpec
from spate.scheduler.config import SchedulerConfig
from spate.scheduler.errors import SubmitError
from spate.scheduler.sandbox.unit import ComputeUnit

if TYPE_CHECKING:  # the applications module imports this package
    from spate.scheduler.backends.applications import Applications


class ClusterBackend(ABC):
    """Launches job processes, tells whether they live, kills them.

    A *handle* is a JSON-able dict the backend returns from :meth:`submit`
    and gets back later, possibly in another worker process: everything it
    needs to find the process again.
    """

    #: The name stored in ``jobs.backend`` and set as ``SPATE_CLUSTER_BACKEND`` (one of
    #: :data:`~spate.scheduler.config.BACKENDS`; a subclass with a name is that backend).
    name: ClassVar[str] = ""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config

    #: Whether jobs' processes run on this machine, where a compute unit can hold them.
    runs_here = False
    #: Tenants' warm applications, when the backend hosts jobs in them (None: every job
    #: is a process of its own).
    applications: Applications | None = None

    @abstractmethod
    def submit(self, spec: JobSpec, spec_path: Path, log_path: Path, attempt: int,
               unit: ComputeUnit | None = None) -> dict[str, Any]:
        """Launch attempt ``attempt`` of ``spec`` (written at ``spec_path``), inside ``unit``
        when there is one; its handle."""

    @abstractmethod
    def is_alive(self, handle: dict[str, Any]) -> bool | None:
        """Whether the process lives; None when it cannot be told from here."""

    @abstractmethod
    def kill(self, handle: dict[str, Any]) -> None:
        """Kill the process at once (harmless when it is already gone)."""

    def kill_unit(self, handle: dict[str, Any]) -> None:
        """Kill everything the job's compute unit runs (for a job hosted in its tenant's
        application: the application, with its other jobs); by default the job's own
        process is its unit."""
        self.kill(handle)

    def orphans(self, active: Callable[[str], bool]) -> list[str]:
        """Kill the queries this backend's compute units run for jobs that ``active``
        (job id → whether the control plane holds it as running) disowns; their ids."""
        del active
        return []

    def launch_application(self, folder: HostFolder, unit: ComputeUnit | None
                           ) -> dict[str, Any]:
        """Start a tenant's application (:mod:`spate.engine.host`) on ``folder``, inside
        ``unit`` when there is one; its process handle."""
        del folder, unit
        raise SubmitError(f"the {self.name} backend does not host tenants' applications")

    def exit_reason(self, handle: dict[str, Any]) -> str | None:
        """Why a dead job's process died, when the backend can tell (a memory limit)."""
        del handle
        return None

    def release(self, handle: dict[str, Any]) -> None:
        """Free what the job held beyond its process (its compute unit); harmless twice."""
        del handle

    def channel_url(self, job_dir: Path, job_id: str) -> str:
        """Where the job publishes events: a file channel in its directory by default."""
        return job_dir.as_uri()

    def spark_master(self) -> str | None:
        """The master a job's spec names; None when spark-submit sets it."""
        return None

    def remove_checkpoint(self, checkpoint_dir: str) -> None:
        """Remove a Spark checkpoint the worker can reach as a local path."""
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
