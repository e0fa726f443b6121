"""Tenants' warm Spark applications on this machine: started on a tenant's first job,
given its further jobs, asked to drop one, drained, replaced at a new size, stopped.

One application per tenant (never shared by two), running
``python -m spate.engine.host.main <folder>`` in that tenant's compute unit;
each job placed on it runs as one of its streaming queries
(:mod:`spate.engine.host`).  The scheduler and the application talk through the
application's folder (:mod:`spate.engine.host.folder`): tickets in, kills in,
status out, each naming a run, one attempt of a job (a job restarted in the
same application is a new run there).  A job's handle names the application's
process and the run, so a job is alive while its application runs and says it
runs that attempt (or has its ticket yet to take).

Several workers may place jobs at once: starting an application holds a lock
file per tenant, and the process record (``<root>/<tenant>.json``, the
scheduler's own file) says which process is the tenant's and at what size
(memory and cores) it was started.

Draining moves an application's pipelines to a new one: the application is
asked to stop, so each of its queries stops after its epoch in progress commits
and its job ends ``stopped``; the scheduler starts each pipeline again, and
placing the first of them waits for the drained application to exit before
starting the tenant's new one, where the pipelines resume from their committed
state and offsets (nothing read twice or skipped).  An application whose size is
not the one the scheduler now gives applications is drained the same way
(:meth:`Applications.drain_resized`): a resize takes a new JVM, as a running
driver's heap cannot grow.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

from spate.engine.host.folder import ENDED, HostConfig, HostFolder, job_of, run_name
from spate.engine.job.nofollow import create_new
from spate.engine.job.spec import JobSpec
from spate.scheduler.backends import process

log = logging.getLogger(__name__)

#: A handle's key naming the tenant whose application runs the job.
APPLICATION = "application"
#: An application that has not written its status for this long cannot be vouched for.
STATUS_STALE_S = 30.0
#: How long placing a job waits for a drained application to exit before killing it
#: (its jobs' epochs in progress are then replayed by their next jobs).
DRAIN_WAIT_S = 90.0


class Applications:
    """The tenants' applications under one folder (``<data_dir>/applications``)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def folder(self, tenant_id: str) -> HostFolder:
        return HostFolder(self.root / tenant_id)

    def prepare(self, tenant_id: str, uid: int | None) -> HostFolder:
        """The tenant's application folder, laid out: the scheduler's folders (where the
        tenant can plant nothing) and the tenant user's ``run/``."""
        folder = self.folder(tenant_id)
        for path in (self.root, folder.path, folder.inbox, folder.kills, folder.jobs):
            path.mkdir(parents=True, exist_ok=True, mode=0o755)
            os.chmod(path, 0o755)
        folder.run.mkdir(exist_ok=True, mode=0o700)
        if uid is not None:
            os.lchown(folder.run, uid, uid)
        return folder

    def job_dir(self, tenant_id: str, job_id: str, uid: int | None) -> Path:
        """A hosted job's folder (its channel), the tenant user's."""
        path = self.folder(tenant_id).job_dir(job_id)
        path.mkdir(exist_ok=True, mode=0o700)
        if uid is not None:
            os.lchown(path, uid, uid)
        return path

    def ensure(self, tenant_id: str, config: HostConfig,
               start: Callable[[HostFolder], dict[str, Any]],
               size: dict[str, Any] | None = None) -> dict[str, Any]:
        """The process handle of the tenant's running application of ``size``, started
        with ``start(folder)`` (which launches it) when there is none; one that is
        draining, or of another size, is drained and awaited first."""
        with self._locked(tenant_id):
            record = self._record(tenant_id)
            if record is not None and process.is_alive(record):
                if not self._stopping(tenant_id) and record.get("size") == size:
                    return record
                self._replace(tenant_id, record)
            folder = self.folder(tenant_id)
            folder.stop.unlink(missing_ok=True)
            for stale in (*_entries(folder.inbox), *_entries(folder.kills)):
                stale.unlink(missing_ok=True)
            folder.status.unlink(missing_ok=True)  # a link there is removed, not followed
            launch_id = secrets.token_hex(8)
            _write(folder.config, replace(config, launch_id=launch_id).to_json())
            handle = {**start(folder), "launch_id": launch_id, "size": size}
            _write(self.root / f"{tenant_id}.json", json.dumps(handle))
            log.info("started the application of tenant %s (pid %s)", tenant_id,
                     handle.get("pid"))
            return handle

    def drain(self, tenant_id: str) -> bool:
        """Ask the tenant's application to stop: each query stops after its epoch in
        progress commits, and its pipeline starts again in a new application.  False
        when the tenant has no application running."""
        record = self._record(tenant_id)
        if record is None or not process.is_alive(record):
            return False
        _ask_to_stop(self.folder(tenant_id))
        log.info("draining the application of tenant %s (pid %s)", tenant_id,
                 record.get("pid"))
        return True

    def drain_resized(self, size: dict[str, Any]) -> list[str]:
        """Drain every running application started at another size than ``size``; the
        tenants whose application is drained."""
        drained = []
        for tenant_id in self.tenants():
            record = self._record(tenant_id)
            if record is not None and record.get("size") != size and not self._stopping(
                    tenant_id) and self.drain(tenant_id):
                drained.append(tenant_id)
        return drained

    def tenants(self) -> list[str]:
        """The tenants with an application record (running or not)."""
        return sorted(path.stem for path in self.root.glob("*.json"))

    def describe(self, tenant_id: str) -> dict[str, Any] | None:
        """The tenant's application as an operator sees it: process, size, state, jobs."""
        record = self._record(tenant_id)
        if record is None:
            return None
        alive = bool(process.is_alive(record))
        status = self.folder(tenant_id).read_status()
        current = status is not None and status.launch_id == record.get("launch_id")
        jobs = status.jobs if status is not None and current else {}
        return {"tenant": tenant_id, "pid": record.get("pid"), "size": record.get("size"),
                "state": ("draining" if self._stopping(tenant_id) else "running")
                if alive else "exited",
                "jobs": sorted({job_of(run) for run, state in jobs.items() if state != ENDED})}

    def _replace(self, tenant_id: str, record: dict[str, Any]) -> None:
        """Drain the tenant's application (if that is not under way) and wait for it to
        exit; after :data:`DRAIN_WAIT_S` it is killed."""
        self.drain(tenant_id)
        deadline = time.monotonic() + DRAIN_WAIT_S
        while process.is_alive(record) and time.monotonic() < deadline:
            time.sleep(0.2)
        if process.is_alive(record):
            log.warning("the drained application of tenant %s did not exit in %.0f s: "
                        "killing it", tenant_id, DRAIN_WAIT_S)
            process.kill(record)

    def place(self, tenant_id: str, spec: JobSpec, owner: int | None) -> None:
        """Give the application ``spec``; the ticket is the tenant user's, owner-only."""
        ticket = self.folder(tenant_id).ticket(run_name(spec.job_id, spec.attempt))
        with os.fdopen(create_new(ticket, 0o600, owner), "w") as out:
            out.write(spec.to_json())

    def is_alive(self, handle: dict[str, Any]) -> bool | None:
        """Whether the hosted job in ``handle`` runs: its application runs and runs it
        (or has its ticket yet to take); None when the application has gone quiet."""
        tenant_id, run = str(handle[APPLICATION]), _run(handle)
        application = handle["process"]
        alive = process.is_alive(application)
        if not alive:
            return alive
        folder = self.folder(tenant_id)
        status = folder.read_status(handle.get("log_owner"))
        if status is None or status.launch_id != application.get("launch_id"):
            return True if folder.ticket(run).exists() else None
        if time.time() * 1000 - status.written_ms > STATUS_STALE_S * 1000:
            return None
        state = status.jobs.get(run)
        if state is not None:
            folder.ticket(run).unlink(missing_ok=True)  # taken: its secrets go
            return state != ENDED
        return folder.ticket(run).exists()

    def kill(self, handle: dict[str, Any]) -> None:
        """Abandon the hosted job: its application cancels its query's Spark jobs."""
        folder = self.folder(str(handle[APPLICATION]))
        run = _run(handle)
        folder.ticket(run).unlink(missing_ok=True)
        with contextlib.suppress(FileExistsError):
            os.close(create_new(folder.kills / run, 0o644))

    def kill_application(self, handle: dict[str, Any]) -> None:
        """Kill the application running the hosted job in ``handle`` (its process group:
        the JVM and its Python workers with it), and every other job it hosts."""
        log.warning("killing the application of tenant %s (pid %s)", handle[APPLICATION],
                    handle["process"].get("pid"))
        process.kill(handle["process"])

    def orphans(self, active: Callable[[str], bool]) -> list[str]:
        """Kill every query an application runs for a job ``active`` disowns (the control
        plane holds it as ended, or has no such job); the ids of those still running.
        A kill mark stays until the application reports the query ended."""
        found = []
        for tenant_id in self.tenants():
            record = self._record(tenant_id)
            if record is None or not process.is_alive(record):
                continue
            folder = self.folder(tenant_id)
            status = folder.read_status()
            if status is None or status.launch_id != record.get("launch_id"):
                continue
            for run, state in status.jobs.items():
                if active(job_of(run)):
                    continue
                mark = folder.kills / run
                if state == ENDED:
                    mark.unlink(missing_ok=True)
                    continue
                found.append(job_of(run))
                with contextlib.suppress(FileExistsError):
                    os.close(create_new(mark, 0o644))
        return found

    def release(self, handle: dict[str, Any]) -> None:
        """Forget an ended hosted job's tickets and kill marks, of each of its attempts."""
        folder = self.folder(str(handle[APPLICATION]))
        for entry in (*_entries(folder.inbox), *_entries(folder.kills)):
            if job_of(entry.name.removesuffix(".json")) == handle["job"]:
                entry.unlink(missing_ok=True)

    def stop_all(self, kill_after_s: float | None = None) -> list[str]:
        """Ask every application to stop (each job after its epoch in progress commits);
        with ``kill_after_s``, wait that long for them to exit and kill those still
        running then. The tenants whose application had to be killed."""
        running = {}
        for tenant_id in self.tenants():
            record = self._record(tenant_id)
            folder = self.folder(tenant_id)
            if record is None or not process.is_alive(record) or not folder.path.is_dir():
                continue
            running[tenant_id] = record
            with contextlib.suppress(OSError):
                _ask_to_stop(folder)
        if kill_after_s is None:
            return []
        deadline = time.monotonic() + kill_after_s
        while time.monotonic() < deadline and any(
                process.is_alive(record) for record in running.values()):
            time.sleep(0.2)
        killed = [tenant_id for tenant_id, record in running.items()
                  if process.is_alive(record)]
        for tenant_id in killed:
            log.warning("the application of tenant %s did not exit in %.0f s: killing it",
                        tenant_id, kill_after_s)
            process.kill(running[tenant_id])
        return killed

    def _stopping(self, tenant_id: str) -> bool:
        folder = self.folder(tenant_id)
        status = folder.read_status()
        return folder.stop.exists() or (status is not None and status.stopping)

    def _record(self, tenant_id: str) -> dict[str, Any] | None:
        try:
            return dict(json.loads((self.root / f"{tenant_id}.json").read_text()))
        except (OSError, ValueError):
            return None

    @contextlib.contextmanager
    def _locked(self, tenant_id: str) -> Iterator[None]:
        self.root.mkdir(parents=True, exist_ok=True, mode=0o755)
        with open(self.root / f"{tenant_id}.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


def _ask_to_stop(folder: HostFolder) -> None:
    """Create the application's ``stop`` file (once: it may be there already)."""
    with contextlib.suppress(FileExistsError):
        os.close(create_new(folder.stop, 0o644))


def _run(handle: dict[str, Any]) -> str:
    """The run (the job's attempt) a hosted job's handle names."""
    return run_name(str(handle["job"]), int(handle.get("attempt", 0)))


def _entries(folder: Path) -> list[Path]:
    try:
        return list(folder.iterdir())
    except OSError:
        return []


def _write(path: Path, text: str) -> None:
    """A file of the scheduler's that the application may read, replaced whole."""
    temporary = path.with_name(f".{path.name}.tmp")
    with os.fdopen(create_new(temporary, 0o644), "w") as out:
        os.fchmod(out.fileno(), 0o644)  # whatever the process's umask
        out.write(text)
    os.replace(temporary, path)
