"""A tenant's compute unit: the sandbox one job's processes run in.

A :class:`ComputeUnit` is what the tenant boundary means below the API: the
job runs as the tenant's own unprivileged user, in its own namespaces (see
:mod:`.bubblewrap`), seeing only its job folder and the tenant's folders,
with CPU and memory capped by control groups (:mod:`.cgroups`), and, where
its Spark runs inside it (a local master), in a network namespace whose only
way out is a link the host filters by the egress policy (:mod:`.network`).
The same groups count what it used, which is where quotas and metering hook in.

:func:`sandbox_problem` tells whether this host can build units at all; the
scheduler refuses untrusted tenants where it cannot (see ``SPATE_SANDBOX``).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spate.scheduler.sandbox import bubblewrap
from spate.scheduler.sandbox.cgroups import CgroupError, CgroupHost, Limits, find_cgroups
from spate.scheduler.sandbox.network import (
    UnitLink,
    UnitNetwork,
    enter_command,
    network_problem,
    remove_link,
    resolv_conf,
)

log = logging.getLogger(__name__)

#: Environment variables of the worker a job may inherit (never SPATE_* secrets).
#: ``SPARK_SUBMIT_OPTS`` is the operator's JVM options for Spark's launcher (the
#: driver's JIT and GC, say); a tenant cannot set it.
INHERITED_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "JAVA_HOME", "SPARK_SUBMIT_OPTS")
_PROBE_TIMEOUT_S = 30


@dataclass(frozen=True)
class TenantUser:
    """The unprivileged OS identity a tenant's jobs run as (gid = uid, no groups)."""

    uid: int
    name: str


@dataclass(frozen=True)
class UnitFolders:
    """The host folders a job may write; everything else it reads is code."""

    job_dir: Path
    #: the tenant's storage root, state folder and checkpoint folder
    tenant_dirs: tuple[Path, ...]
    #: where the unit's ``/etc/passwd`` and ``/etc/group`` are written: a folder of the
    #: server's, never one the tenant writes (bubblewrap, as root, binds what it names)
    identity_dir: Path
    #: folders of the server's the unit may read (a tenant application's folder)
    readable: tuple[Path, ...] = ()
    #: folders of the server's bound writable as they are (not given to the tenant's
    #: user: what the user may write inside them is what it owns there)
    shared: tuple[Path, ...] = ()


class ComputeUnit:
    """One job's sandbox: identity, view of the file system, limits, and its meter."""

    def __init__(self, name: str, user: TenantUser, folders: UnitFolders, limits: Limits,
                 cgroups: CgroupHost, network: UnitNetwork | None = None) -> None:
        self.name = name
        self.user = user
        self.folders = folders
        self.limits = limits
        self.cgroups = cgroups.job(name)
        self.network = network
        self.link: UnitLink | None = None

    def prepare(self) -> None:
        """Create the folders owned by the tenant's user (0700), the control groups and
        the unit's network; raises :class:`CgroupError` or :class:`~.network.UnitNetworkError`
        when the host cannot, having removed what it made."""
        try:
            self._create()
        except BaseException:
            self.remove()  # what was made before the failure
            raise

    def _create(self) -> None:
        for folder in (self.folders.job_dir, *self.folders.tenant_dirs):
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            _own(folder, self.user.uid)
        identity = self.folders.identity_dir
        identity.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_identity(identity / "passwd",
                        f"root:x:0:0:root:/root:/usr/sbin/nologin\n{self.user.name}:x:"
                        f"{self.user.uid}:{self.user.uid}::/tmp:/usr/sbin/nologin\n")
        _write_identity(identity / "group",
                        f"root:x:0:\n{self.user.name}:x:{self.user.uid}:\n")
        self.cgroups.create(self.limits)
        if self.network is not None:
            self.link = self.network.create(self.name)
            _write_identity(identity / "resolv.conf", resolv_conf(self.link))

    def command(self, argv: Sequence[str], environment: Mapping[str, str]) -> tuple[
            list[str], dict[str, str]]:
        """The command line and launcher environment that run ``argv`` in the unit."""
        env = {key: os.environ[key] for key in INHERITED_ENV if key in os.environ}
        env.setdefault("LANG", "C.UTF-8")
        env.update(PATH="/usr/local/bin:/usr/bin:/bin", HOME="/tmp", USER=self.user.name,
                   LOGNAME=self.user.name, HADOOP_USER_NAME=self.user.name,
                   PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
        files = {"/etc/passwd": str(self.folders.identity_dir / "passwd"),
                 "/etc/group": str(self.folders.identity_dir / "group")}
        prefix: list[str] = []
        if self.link is not None:
            prefix = enter_command(self.link)
            files["/etc/resolv.conf"] = str(self.folders.identity_dir / "resolv.conf")
        env.update(environment)
        writable = [str(self.folders.job_dir), *(str(d) for d in self.folders.tenant_dirs),
                    *(str(d) for d in self.folders.shared)]
        readable = [*bubblewrap.runtime_paths(), *(str(d) for d in self.folders.readable)]
        sandboxed = bubblewrap.command(
            argv, uid=self.user.uid, gid=self.user.uid, writable=writable,
            readable=readable, environment=env,
            working_dir=str(self.folders.job_dir), files=files)
        return ([*self.cgroups.enter_command(), *prefix, *sandboxed],
                self.cgroups.enter_environment())

    def remove(self) -> None:
        """Kill what is left of the unit and remove its control groups and network."""
        self.cgroups.remove()
        if self.link is not None:
            remove_link(self.link.name)

    def handle(self) -> dict[str, Any]:
        """What a job handle keeps of the unit, to find its groups and link again later."""
        return {"name": self.name, "memory_bytes": self.limits.memory_bytes,
                "link": None if self.link is None else self.link.name}


def exit_reason(handle: Mapping[str, Any]) -> str | None:
    """Why the processes of the unit in ``handle`` died, when the unit knows: its memory."""
    try:
        usage = find_cgroups().job(str(handle["name"])).usage()
    except (CgroupError, OSError, KeyError):
        return None
    if usage.oom_kills == 0:
        return None
    limit_mb = int(handle.get("memory_bytes", 0)) // (1024 * 1024)
    return (f"the job exceeded its memory limit of {limit_mb} MB and was killed; give the "
            "pipeline a higher parallelism (each task adds memory) or ask the operator for "
            "a larger SPATE_JOB_MEMORY_MB (SPATE_APPLICATION_MEMORY_MB for the pipelines "
            "hosted in their tenant's application)")


def release(handle: Mapping[str, Any]) -> None:
    """Kill what is left of the unit in ``handle`` and remove its control groups and
    network."""
    try:
        find_cgroups().job(str(handle["name"])).remove()
    except (CgroupError, OSError, KeyError) as error:
        log.warning("could not release compute unit %s: %s", handle.get("name"), error)
    if handle.get("link"):
        remove_link(str(handle["link"]))


def sandbox_problem() -> str | None:
    """Why this host cannot run sandboxed jobs, or None when it can.

    Needs root (to run jobs as other users and set their limits), bubblewrap,
    setpriv, usable namespaces, writable cpu and memory control groups, and what
    units' networks are built with (iproute2, nftables, IPv4 forwarding).
    """
    if os.geteuid() != 0:
        return "the scheduler does not run as root, so it cannot run jobs as tenant users"
    if shutil.which(bubblewrap.BWRAP) is None:
        return "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
    if not os.access(bubblewrap.SETPRIV, os.X_OK):
        return "setpriv is not installed (Debian's util-linux package)"
    try:
        find_cgroups()
    except (CgroupError, OSError) as error:
        return str(error)
    problem = network_problem()
    if problem is not None:
        return problem
    probe = bubblewrap.command(["/bin/true"], uid=65534, gid=65534, writable=(), readable=(),
                               environment={}, working_dir="/")
    try:
        done = subprocess.run(probe, capture_output=True, timeout=_PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bubblewrap cannot start a sandbox: {error}"
    if done.returncode != 0:
        detail = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap cannot start a sandbox: {detail[-1] if detail else done.returncode}"
    return None


def _own(path: Path, uid: int) -> None:
    """Give ``path`` to ``uid`` (0700); a folder some other user owned so far (written
    before sandboxing was on) is given over with everything in it, links themselves
    and never what they point at."""
    stat = path.stat()
    if stat.st_uid != uid or stat.st_gid != uid:
        for folder, _dirs, files in os.walk(path):
            os.chown(folder, uid, uid, follow_symlinks=False)
            for name in files:
                os.chown(os.path.join(folder, name), uid, uid, follow_symlinks=False)
    path.chmod(0o700)


def _write_identity(path: Path, text: str) -> None:
    """A file the sandbox binds at ``/etc``: root's, readable by the tenant's user."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(descriptor, "w") as file:
        os.fchmod(descriptor, 0o644)
        file.write(text)
