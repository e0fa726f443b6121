"""What a tenant's application runs, seen from the host: the scheduler's record of it,
the queries its ``status.json`` reports, its process tree (the sandbox, the Python
host, the JVM, Spark's Python workers) and any process of the tenant's OS user
outside that tree."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import psutil

from spate.engine.host.folder import ENDED, HostFolder, job_of
from spate.scheduler.backends import process


def application_record(data_dir: Path, tenant_id: str) -> dict[str, Any] | None:
    """The scheduler's record of the tenant's application (its process), if any."""
    try:
        record: dict[str, Any] = json.loads(
            (data_dir / "applications" / f"{tenant_id}.json").read_text())
    except (OSError, ValueError):
        return None
    return record


def application_jobs(data_dir: Path, tenant_id: str) -> set[str]:
    """The jobs whose queries the tenant's running application says it runs."""
    record = application_record(data_dir, tenant_id)
    if record is None or not process.is_alive(record):
        return set()
    status = HostFolder(data_dir / "applications" / tenant_id).read_status()
    if status is None or status.launch_id != record.get("launch_id"):
        return set()
    return {job_of(run) for run, state in status.jobs.items() if state != ENDED}


def application_tree(data_dir: Path, tenant_id: str) -> list[psutil.Process]:
    """The tenant's running application process and everything under it."""
    record = application_record(data_dir, tenant_id)
    if record is None or not process.is_alive(record):
        return []
    top = psutil.Process(int(record["pid"]))
    try:
        return [top, *top.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def tenant_uid(data_dir: Path, tenant_id: str) -> int | None:
    """The OS user the tenant's application runs as (the owner of its ``run/`` folder)."""
    try:
        return (data_dir / "applications" / tenant_id / "run").stat().st_uid
    except OSError:
        return None


def stray_processes(data_dir: Path, tenant_id: str) -> list[str]:
    """Processes of the tenant's user that are not its current application's."""
    uid = tenant_uid(data_dir, tenant_id)
    if uid is None or uid == os.geteuid():
        return []
    ours = {member.pid for member in application_tree(data_dir, tenant_id)}
    strays = []
    for candidate in psutil.process_iter(["pid", "uids", "cmdline"]):
        uids = candidate.info["uids"]
        if uids is not None and uids.real == uid and candidate.info["pid"] not in ours:
            command = " ".join(candidate.info["cmdline"] or [])[:120]
            strays.append(f"{candidate.info['pid']} ({command})")
    return strays


def python_workers(data_dir: Path, tenant_id: str) -> list[psutil.Process]:
    """The tenant application's Spark Python workers that run tasks: the processes
    PySpark's worker daemon (started by the JVM) forked."""
    tree = application_tree(data_dir, tenant_id)
    daemons = {member.pid for member in tree if _runs(member, "pyspark.daemon pyspark.worker")
               and not _runs_parent(member, "pyspark.daemon")}
    return [member for member in tree if _parent(member) in daemons]


def host_process(data_dir: Path, tenant_id: str) -> psutil.Process:
    """The tenant application's own Python process (the Spark driver's host)."""
    hosts = [member for member in application_tree(data_dir, tenant_id)
             if _runs(member, "spate.engine.host.main") and "python" in member.name()]
    assert hosts, f"no application process of tenant {tenant_id}"
    return hosts[-1]


def alive(member: psutil.Process) -> bool:
    """Whether the process still runs (a zombie does not)."""
    try:
        return bool(member.is_running() and member.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def _runs(member: psutil.Process, module: str) -> bool:
    try:
        return module in " ".join(member.cmdline())
    except psutil.Error:
        return False


def has_driver(data_dir: Path, tenant_id: str) -> bool:
    """Whether the tenant's application still has its Spark driver (its JVM)."""
    return any(_named(member, "java") for member in application_tree(data_dir, tenant_id))


def _named(member: psutil.Process, name: str) -> bool:
    try:
        return bool(member.name() == name and member.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


def _runs_parent(member: psutil.Process, module: str) -> bool:
    try:
        parent = member.parent()
    except psutil.Error:
        return False
    return parent is not None and _runs(parent, module)


def _parent(member: psutil.Process) -> int | None:
    try:
        return int(member.ppid())
    except psutil.Error:
        return None
