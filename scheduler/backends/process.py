"""Detached OS processes as job handles: launch, check, kill — safe against pid reuse.

A handle records the host, the pid and the process's creation time: a pid
that now belongs to another process (same pid, other creation time) is not
ours, so it is neither reported alive nor killed. Each job process leads its
own session, so killing its process group takes its children (the JVM and
Python workers) with it. A job's log is in its folder, which a sandboxed job's
user owns: it is opened without following links (:mod:`spate.engine.job.nofollow`).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import psutil

from spate.engine.job.nofollow import open_regular
from spate.scheduler.errors import SubmitError

log = logging.getLogger(__name__)

#: Creation times are floats of limited precision; closer than this is the same process.
_CREATE_TIME_TOLERANCE_S = 0.05


def launch(command: Sequence[str], env: Mapping[str, str], cwd: Path,
           log_path: Path, log_owner: int | None = None) -> dict[str, Any]:
    """Start ``command`` in its own session, output appended to ``log_path``; its handle.

    ``log_owner``: the user the log must already belong to (a sandboxed job's, whose
    folder it is in; None: the log is created here if missing). A link or anything
    but that user's regular file under the log's name is refused, never written to.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_APPEND | (os.O_CREAT if log_owner is None else 0)
    try:
        descriptor = open_regular(log_path, flags, 0o600,
                                  None if log_owner is None else (log_owner,))
    except OSError as error:
        raise SubmitError(f"cannot open the job's log {log_path.name}: "
                          f"{error.strerror or error}") from None
    with os.fdopen(descriptor, "ab") as output:
        try:
            process = subprocess.Popen(
                list(command), cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL,
                stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as error:
            raise SubmitError(f"could not start {command[0]}: {error}") from None
    # Reap the child when it exits, so it never lingers as a zombie of this worker.
    threading.Thread(target=process.wait, name=f"reap-{process.pid}", daemon=True).start()
    try:
        create_time = psutil.Process(process.pid).create_time()
    except psutil.NoSuchProcess:
        create_time = 0.0  # already gone: is_alive reports it dead
    return {"host": socket.gethostname(), "pid": process.pid, "create_time": create_time,
            "started_ticks": started_ticks(process.pid),
            "submitted_at": time.time(), "log": str(log_path), "log_owner": log_owner}


def started_ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks since the machine booted (the
    ``starttime`` of ``/proc/<pid>/stat``); None without ``/proc`` or once it is gone.

    This, not psutil's ``create_time``, tells a process from a later one with its pid:
    ``create_time`` adds the boot time as the wall clock has it when asked, so it
    moves when the clock is set or slewed (NTP), and a running process would read as
    another one."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            text = stat.read()
    except OSError:
        return None
    # after "pid (command) ": state is field 3, starttime field 22
    return int(text[text.rindex(b")") + 2:].split()[19])


def is_alive(handle: Mapping[str, Any]) -> bool | None:
    """Whether the handle's process runs (None: it runs on another host)."""
    if handle.get("host") != socket.gethostname():
        return None
    process = _same_process(handle)
    if process is None:
        return False
    try:
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def kill(handle: Mapping[str, Any]) -> None:
    """SIGKILL the handle's process group (only if the process is still the one launched)."""
    if handle.get("host") != socket.gethostname():
        log.warning("cannot kill job process %s: it runs on host %s", handle.get("pid"),
                    handle.get("host"))
        return
    pid = int(handle["pid"])
    if _same_process(handle) is None and psutil.pid_exists(pid):
        return  # the pid now names someone else's process
    try:
        # The group outlives its leader while children (the JVM) still run.
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def orphan_jobs(jobs_root: Path, active: Callable[[str], bool]) -> list[str]:
    """Kill the job processes of this host whose job ``active`` disowns; their job ids.

    A job process leads its session and its command line names its spec,
    ``<jobs_root>/<job id>/spec.json`` (after ``--consume``): that is how it is found,
    whatever launched it (a sandbox, ``spark-submit``)."""
    root = jobs_root.resolve()
    found = []
    for candidate in psutil.process_iter(["pid", "cmdline"]):
        command = candidate.info.get("cmdline") or []
        if "--consume" not in command[:-1]:
            continue
        # A relative path is the scheduler's: this process launched it, from here.
        spec = Path(command[command.index("--consume") + 1]).resolve()
        if spec.name != "spec.json" or spec.parent.parent != root or active(spec.parent.name):
            continue
        try:
            if os.getsid(candidate.pid) != candidate.pid:
                continue  # a child of the job: its leader's kill takes it
            os.killpg(candidate.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            continue
        found.append(spec.parent.name)
    return found


def log_tail(handle: Mapping[str, Any], lines: int = 5) -> str:
    """The last lines of the process's output, for a death notice (which its tenant
    reads: a link or anything but the job's own regular file reads as nothing)."""
    path = handle.get("log")
    if not path:
        return ""
    owner = handle.get("log_owner")
    try:
        descriptor = open_regular(path, os.O_RDONLY,
                                  owners=None if owner is None else (int(owner),))
    except OSError:
        return ""
    with os.fdopen(descriptor, "rb") as file:
        file.seek(0, os.SEEK_END)
        file.seek(max(0, file.tell() - 4096))
        text = file.read().decode(errors="replace")
    return "\n".join(text.strip().splitlines()[-lines:])


def _same_process(handle: Mapping[str, Any]) -> psutil.Process | None:
    """The handle's process, if the pid still names it: by its start in ticks since
    boot (:func:`started_ticks`), or for a handle without it by its creation time."""
    try:
        process = psutil.Process(int(handle["pid"]))
        created = process.create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, KeyError, ValueError):
        return None
    ticks = handle.get("started_ticks")
    if ticks is not None:
        return process if started_ticks(process.pid) == int(ticks) else None
    if abs(created - float(handle.get("create_time", 0))) > _CREATE_TIME_TOLERANCE_S:
        return None
    return process
