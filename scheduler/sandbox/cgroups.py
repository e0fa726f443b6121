"""Control groups that cap a job's CPU and memory and count what it used.

One group per job, named ``spate/<job id>`` under each controller. Version 1
hierarchies (a mount per controller: ``cpu``, ``memory``, and ``cpuacct``
for CPU time where it is separate) and the version 2 unified hierarchy are
both supported; :func:`find_cgroups` picks what the host offers. A process
joins a job's groups before it runs anything: the launcher writes its own
pid into each group's ``cgroup.procs`` and then executes the sandbox (see
:meth:`JobCgroups.enter_command`), so the JVM and every Python worker it
starts are counted and capped from their first instruction.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from spate.scheduler.errors import SchedulerError

log = logging.getLogger(__name__)

#: The CFS period quotas are expressed in.
CPU_PERIOD_US = 100_000
_GROUP_PARENT = "spate"
_REMOVE_WAIT_S = 5.0


class CgroupError(SchedulerError):
    """The host's control groups cannot be used as needed; says what is missing."""


@dataclass(frozen=True)
class Limits:
    """What one job may use."""

    cpu_cores: float
    memory_bytes: int


@dataclass(frozen=True)
class Usage:
    """What a job's group used so far."""

    cpu_seconds: float
    memory_bytes: int
    memory_peak_bytes: int
    #: processes the kernel killed for exceeding the memory limit
    oom_kills: int
    #: memory in use less the page cache the kernel may drop at once (inactive files):
    #: what the group's processes hold, and what metering charges for
    working_set_bytes: int = 0


@dataclass(frozen=True)
class CgroupHost:
    """Where the host mounts its controllers: version 1 per controller, or version 2."""

    version: int
    #: v1: controller name -> mount point; v2: {"unified": mount point}
    mounts: dict[str, Path]

    def job(self, name: str) -> JobCgroups:
        return JobCgroups(self, name)


def find_cgroups(mountinfo: Path = Path("/proc/self/mountinfo")) -> CgroupHost:
    """The host's usable controllers; raises :class:`CgroupError` naming what lacks."""
    v1: dict[str, Path] = {}
    unified: Path | None = None
    for line in mountinfo.read_text().splitlines():
        fields = line.split(" - ", 1)
        if len(fields) != 2:
            continue
        mount_point = Path(fields[0].split()[4])
        fstype, _source, options = (fields[1].split() + ["", "", ""])[:3]
        if fstype == "cgroup":
            for controller in options.split(","):
                if controller in ("cpu", "memory", "cpuacct"):
                    v1.setdefault(controller, mount_point)
        elif fstype == "cgroup2" and unified is None:
            unified = mount_point
    if "cpu" in v1 and "memory" in v1:
        host = CgroupHost(1, v1)
    elif unified is not None and _v2_controllers(unified) >= {"cpu", "memory"}:
        host = CgroupHost(2, {"unified": unified})
    else:
        raise CgroupError("no writable cpu and memory cgroup controllers (version 1 or 2) "
                          "are mounted on this host")
    for mount in host.mounts.values():
        if not os.access(mount, os.W_OK):
            raise CgroupError(f"the cgroup hierarchy at {mount} is not writable: run the "
                              "scheduler as root")
    return host


def _v2_controllers(mount: Path) -> set[str]:
    try:
        return set((mount / "cgroup.controllers").read_text().split())
    except OSError:
        return set()


class JobCgroups:
    """The groups of one job under every controller the host has."""

    def __init__(self, host: CgroupHost, name: str) -> None:
        self.host = host
        self.name = name

    @property
    def paths(self) -> list[Path]:
        return [mount / _GROUP_PARENT / self.name for mount in self.host.mounts.values()]

    def create(self, limits: Limits) -> None:
        """Make the groups and set the limits (harmless when they exist)."""
        quota_us = max(1000, int(limits.cpu_cores * CPU_PERIOD_US))
        if self.host.version == 1:
            for mount in self.host.mounts.values():
                (mount / _GROUP_PARENT / self.name).mkdir(parents=True, exist_ok=True)
            cpu = self._v1("cpu")
            _write(cpu / "cpu.cfs_period_us", CPU_PERIOD_US)
            _write(cpu / "cpu.cfs_quota_us", quota_us)
            memory = self._v1("memory")
            _write(memory / "memory.limit_in_bytes", limits.memory_bytes)
            # Without swap accounting this file is absent: then there is no swap to escape to.
            _write(memory / "memory.memsw.limit_in_bytes", limits.memory_bytes, optional=True)
            return
        unified = self.host.mounts["unified"]
        parent = unified / _GROUP_PARENT
        parent.mkdir(exist_ok=True)
        _write(unified / "cgroup.subtree_control", "+cpu +memory", optional=True)
        _write(parent / "cgroup.subtree_control", "+cpu +memory")
        group = parent / self.name
        group.mkdir(exist_ok=True)
        _write(group / "cpu.max", f"{quota_us} {CPU_PERIOD_US}")
        _write(group / "memory.max", limits.memory_bytes)
        _write(group / "memory.swap.max", 0, optional=True)

    def enter_command(self) -> list[str]:
        """A command prefix that joins the groups, then executes the rest of the line."""
        script = ('IFS=:; for group in $SPATE_CGROUPS; do '
                  'echo $$ > "$group/cgroup.procs" || exit 125; done; '
                  'unset IFS SPATE_CGROUPS; exec "$@"')
        return ["/bin/sh", "-c", script, "spate-cgroup-enter"]

    def enter_environment(self) -> dict[str, str]:
        """The variable :meth:`enter_command` reads its groups from."""
        return {"SPATE_CGROUPS": ":".join(str(path) for path in self.paths)}

    def pids(self) -> list[int]:
        found: set[int] = set()
        for path in self.paths:
            try:
                found.update(int(p) for p in (path / "cgroup.procs").read_text().split())
            except (OSError, ValueError):
                continue
        return sorted(found)

    def kill(self) -> None:
        """SIGKILL every process in the groups."""
        for pid in self.pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def usage(self) -> Usage:
        """CPU time, memory now and at its peak, and out-of-memory kills so far."""
        if self.host.version == 1:
            cpu_ns = _read_int(self._v1("cpuacct") / "cpuacct.usage") \
                if "cpuacct" in self.host.mounts else 0
            memory = self._v1("memory")
            in_use = _read_int(memory / "memory.usage_in_bytes")
            inactive = _keyed(memory / "memory.stat", "total_inactive_file")
            return Usage(cpu_seconds=cpu_ns / 1e9, memory_bytes=in_use,
                         memory_peak_bytes=_read_int(memory / "memory.max_usage_in_bytes"),
                         oom_kills=_keyed(memory / "memory.oom_control", "oom_kill"),
                         working_set_bytes=max(0, in_use - inactive))
        group = self.host.mounts["unified"] / _GROUP_PARENT / self.name
        in_use = _read_int(group / "memory.current")
        inactive = _keyed(group / "memory.stat", "inactive_file")
        return Usage(cpu_seconds=_keyed(group / "cpu.stat", "usage_usec") / 1e6,
                     memory_bytes=in_use,
                     memory_peak_bytes=_read_int(group / "memory.peak"),
                     oom_kills=_keyed(group / "memory.events", "oom_kill"),
                     working_set_bytes=max(0, in_use - inactive))

    def remove(self) -> None:
        """Kill what is left and remove the groups (a missing group is fine)."""
        deadline = time.monotonic() + _REMOVE_WAIT_S
        while self.pids() and time.monotonic() < deadline:
            self.kill()
            time.sleep(0.05)
        for path in self.paths:
            try:
                path.rmdir()
            except FileNotFoundError:
                pass
            except OSError as error:
                log.warning("could not remove cgroup %s: %s", path, error)

    def _v1(self, controller: str) -> Path:
        return self.host.mounts[controller] / _GROUP_PARENT / self.name


def _write(path: Path, value: object, optional: bool = False) -> None:
    try:
        path.write_text(str(value))
    except OSError as error:
        if optional:
            return
        raise CgroupError(f"cannot set {path}: {error.strerror or error}") from None


def _read_int(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _keyed(path: Path, key: str) -> int:
    """The value of ``key`` in a ``key value`` per line file (0 when absent)."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[0] == key:
            try:
                return int(parts[1])
            except ValueError:
                return 0
    return 0
