"""Usage metering: what each job used, per minute, read from its compute unit.

A *compute unit* is what runs jobs: a tenant's warm application, or a job's own
process, each in its sandbox's control groups when the scheduler sandboxes
(:mod:`spate.scheduler.sandbox.cgroups`).  Every ``meter_interval_s`` the meter
reads each unit's cumulative CPU time and its working-set memory, and charges the
interval since its last reading to the jobs the unit hosted in it, each by its
share of the unit's busy time (the durations of the epochs it committed in the
interval; equal shares when none committed one).  A unit's time with no job on it
is charged to nobody: an idle (scaled-to-zero) pipeline has no job, so it costs
nothing.

Dimensions (one :class:`~spate.scheduler.store.UsageCharge` per job, minute and
dimension; an interval across a minute boundary is split by seconds):

- ``cpu_seconds``: CPU time of the unit, the job's share.
- ``memory_gb_seconds``: working-set GiB × seconds, the job's share.
- ``compute_unit_seconds``: SCU × seconds, where a unit's SCU over an interval is
  max(vCPU used, memory GiB / 4); as every dimension takes the same share, a
  unit's compute units are the sum of its jobs' exactly.
- ``state_gb_seconds``: GiB × seconds of the state a run's pipeline holds, as the
  state store accounts it (the live values of its last committed epoch,
  :meth:`~spate.statestore.base.store.PipelineState.describe`), which the job
  measures every few minutes and reports in its epoch events (the scheduler never
  opens a tenant's state store: an embedded SQLite store is the job's). Charged
  while the pipeline runs.
- ``preview_seconds``: wall seconds a preview ran.
- ``events_in``/``events_out``: rows read and written, and ``bytes_in``/
  ``bytes_out``: bytes the sources read from their systems and the sinks wrote to
  theirs (where their connectors measure them), counted when an epoch's
  checkpoint is recorded (:mod:`spate.api.repositories.control`), so a replayed epoch or a
  duplicate event adds nothing.

Nothing counts twice and nothing is lost:

- A reading is written compare-and-set on the unit's previous reading, in the
  same transaction as its charges, so of two meters (a retried task, two
  workers) exactly one charges an interval.
- Counters are cumulative from the unit's start (a first reading charges from
  the process's start time), so a missed sample only makes the next interval
  longer.
- A unit whose processes died (a crash) still has its control groups, with its
  counters as they were at the end: the meter takes that last reading, charges it
  to the jobs the unit hosted, and only then removes the groups of an application
  (a job's own unit is settled by :meth:`Meter.settle` before it is released).
  Without a sandbox the unit is a process tree read through ``/proc``: its last
  interval before a crash is lost, at most ``meter_interval_s``.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psutil

from spate.scheduler.backends import process
from spate.scheduler.sandbox.cgroups import CgroupError, find_cgroups
from spate.scheduler.store import PREVIEW, ControlStore, MeteredJob, UnitReading, UsageCharge

log = logging.getLogger(__name__)

CPU_SECONDS = "cpu_seconds"
MEMORY_GB_SECONDS = "memory_gb_seconds"
COMPUTE_UNIT_SECONDS = "compute_unit_seconds"
STATE_GB_SECONDS = "state_gb_seconds"
PREVIEW_SECONDS = "preview_seconds"
EVENTS_IN = "events_in"
EVENTS_OUT = "events_out"
BYTES_IN = "bytes_in"
BYTES_OUT = "bytes_out"
#: Every dimension, in the order the API lists them.
DIMENSIONS = (COMPUTE_UNIT_SECONDS, CPU_SECONDS, MEMORY_GB_SECONDS, STATE_GB_SECONDS,
              PREVIEW_SECONDS, EVENTS_IN, EVENTS_OUT, BYTES_IN, BYTES_OUT)

GIB = 1024 ** 3
#: Memory per compute unit: an SCU is one vCPU or this much memory, whichever is more.
GIB_PER_COMPUTE_UNIT = 4.0


@dataclass(frozen=True)
class Counters:
    """A unit's cumulative CPU time and its memory now."""

    cpu_seconds: float
    memory_bytes: int


def unit_of(handle: dict[str, Any] | None) -> tuple[str, dict[str, Any]] | None:
    """The name of the unit running a job with ``handle`` and the process handle to read
    it from; None for a job not (yet) on a process of this machine's backends."""
    if not handle:
        return None
    source = handle.get("process", handle)
    if not isinstance(source, dict):
        return None
    unit = source.get("unit")
    if isinstance(unit, dict) and unit.get("name"):
        return f"cgroup:{unit['name']}", source
    if source.get("pid") is not None and source.get("host"):
        return f"process:{source['host']}:{source['pid']}:{source.get('create_time')}", source
    return None


def read_counters(source: dict[str, Any]) -> Counters | None:
    """The unit's counters now: its control groups', or its process tree's; None when
    they cannot be read (a process of another host, or gone)."""
    unit = source.get("unit")
    if isinstance(unit, dict) and unit.get("name"):
        try:
            usage = find_cgroups().job(str(unit["name"])).usage()
        except (CgroupError, OSError):
            return None
        return Counters(usage.cpu_seconds, usage.working_set_bytes)
    if source.get("host") != socket.gethostname() or not process.is_alive(source):
        return None
    return _tree_counters(int(source["pid"]))


def _tree_counters(pid: int) -> Counters | None:
    """CPU (children that ended included, once reaped) and resident memory of a tree."""
    try:
        root = psutil.Process(pid)
        members = [root, *root.children(recursive=True)]
    except psutil.Error:
        return None
    cpu = 0.0
    memory = 0
    for member in members:
        try:
            times = member.cpu_times()
            cpu += times.user + times.system + times.children_user + times.children_system
            memory += member.memory_info().rss
        except psutil.Error:
            continue  # ended while we looked
    return Counters(cpu, memory)


def minute_of(at: datetime) -> datetime:
    return at.astimezone(UTC).replace(second=0, microsecond=0)


def minute_spans(start: datetime, end: datetime) -> list[tuple[datetime, float]]:
    """The minutes ``(start, end]`` covers, each with the seconds of it inside."""
    spans = []
    minute = minute_of(start)
    while minute < end:
        following = minute + timedelta(minutes=1)
        seconds = (min(end, following) - max(start, minute)).total_seconds()
        if seconds > 0:
            spans.append((minute, seconds))
        minute = following
    return spans


def charges_for(jobs: Iterable[MeteredJob], busy_ms: dict[str, int], cpu_seconds: float,
                memory_bytes: int, start: datetime, end: datetime,
                state_bytes: dict[str, int] | None = None) -> list[UsageCharge]:
    """The interval ``(start, end]`` of one unit, which used ``cpu_seconds`` and held
    ``memory_bytes``, charged to the ``jobs`` it hosted by their busy shares; a run
    in ``state_bytes`` is also charged the state it holds in the state store."""
    hosted = list(jobs)
    spans = minute_spans(start, end)
    interval_s = sum(seconds for _minute, seconds in spans)
    if not hosted or interval_s <= 0:
        return []
    total_busy = sum(max(0, busy_ms.get(job.id, 0)) for job in hosted)
    memory_gb_s = memory_bytes / GIB * interval_s
    charges: list[UsageCharge] = []
    for job in hosted:
        share = (max(0, busy_ms.get(job.id, 0)) / total_busy if total_busy
                 else 1 / len(hosted))
        cpu = cpu_seconds * share
        memory = memory_gb_s * share
        whole = {CPU_SECONDS: cpu, MEMORY_GB_SECONDS: memory,
                 COMPUTE_UNIT_SECONDS: max(cpu, memory / GIB_PER_COMPUTE_UNIT)}
        if job.kind == PREVIEW:
            whole[PREVIEW_SECONDS] = interval_s
        elif (state_bytes or {}).get(job.id, 0) > 0:
            whole[STATE_GB_SECONDS] = (state_bytes or {})[job.id] / GIB * interval_s
        for minute, seconds in spans:
            part = seconds / interval_s
            charges.extend(UsageCharge(job.id, job.tenant_id, job.pipeline_id, minute,
                                       dimension, quantity * part)
                           for dimension, quantity in whole.items() if quantity > 0)
    return charges


class Meter:
    """Reads the compute units and charges their jobs (see the module's description)."""

    def __init__(self, store: ControlStore, clock: Callable[[], datetime],
                 read: Callable[[dict[str, Any]], Counters | None] = read_counters) -> None:
        self.store = store
        self.clock = clock
        self.read = read

    def sample(self) -> int:
        """Read every unit with a live job, or with a reading not yet closed; the number
        of units charged."""
        return self._sample(None)

    def settle(self, handle: dict[str, Any] | None) -> None:
        """Take the last reading of the unit in ``handle`` (a job that ended), before
        the unit is released."""
        found = unit_of(handle)
        if found is not None:
            self._sample(found[0])

    def _sample(self, only: str | None) -> int:
        readings = {reading.unit: reading for reading in self.store.meter_units()
                    if only is None or reading.unit == only}
        known = {job_id for reading in readings.values() for job_id in reading.jobs}
        jobs = self.store.metered_jobs(known)
        on_unit: dict[str, list[MeteredJob]] = {}
        sources: dict[str, dict[str, Any]] = {}
        for job in jobs.values():
            found = unit_of(job.handle) if job.live else None
            if found is not None and (only is None or found[0] == only):
                on_unit.setdefault(found[0], []).append(job)
                sources[found[0]] = found[1]
        charged = 0
        for unit in sorted(set(readings) | set(on_unit)):
            try:
                if self._charge(unit, readings.get(unit), on_unit.get(unit, []),
                                sources.get(unit), jobs):
                    charged += 1
            except Exception:  # one unreadable unit must not stop the others' metering
                log.exception("metering compute unit %s failed; the next sample retries",
                              unit)
        return charged

    def _charge(self, unit: str, previous: UnitReading | None, live: list[MeteredJob],
                source: dict[str, Any] | None, jobs: dict[str, MeteredJob]) -> bool:
        now = self.clock()
        if previous is None:
            assert source is not None and live
            previous = self._first_reading(unit, live[0].tenant_id, source, now)
        counters = self.read(previous.source)
        alive = process.is_alive(previous.source) is not False  # None: another host's
        hosted = {job.id: job for job in live}
        hosted.update((job_id, jobs[job_id]) for job_id in previous.jobs if job_id in jobs)
        if counters is None:
            # Nothing more can be read (a process tree that ended): close it as it was.
            counters = Counters(previous.cpu_seconds, previous.memory_bytes)
            alive = False
        busy = self.store.busy_ms(list(hosted), previous.read_at, now)
        state = {job.id: job.state_held_bytes for job in hosted.values()
                 if job.kind != PREVIEW and job.pipeline_id is not None}
        charges = charges_for(hosted.values(), busy,
                              max(0.0, counters.cpu_seconds - previous.cpu_seconds),
                              counters.memory_bytes, previous.read_at, now, state)
        reading = UnitReading(unit=unit, tenant_id=previous.tenant_id, source=previous.source,
                              cpu_seconds=max(counters.cpu_seconds, previous.cpu_seconds),
                              memory_bytes=counters.memory_bytes, read_at=now,
                              jobs=sorted(job.id for job in live))
        if not self.store.charge_usage(previous, reading, charges, closed=not alive):
            return False  # another meter read it first
        if not alive:
            self._release_application_groups(previous.source)
        return True

    def _first_reading(self, unit: str, tenant_id: str, source: dict[str, Any],
                       now: datetime) -> UnitReading:
        """The unit's baseline: nothing used when its process started."""
        started = source.get("create_time")
        since = (datetime.fromtimestamp(float(started), UTC)
                 if isinstance(started, int | float) else now)
        baseline = UnitReading(unit=unit, tenant_id=tenant_id, source=source,
                               cpu_seconds=0.0, memory_bytes=0, read_at=min(since, now),
                               jobs=[])
        return self.store.open_unit(baseline)

    @staticmethod
    def _release_application_groups(source: dict[str, Any]) -> None:
        """An application's control groups outlive it until its last reading: go now.
        (A job's own unit is removed when the job is released.)"""
        unit = source.get("unit")
        if source.get("launch_id") and isinstance(unit, dict) and unit.get("name"):
            try:
                find_cgroups().job(str(unit["name"])).remove()
            except (CgroupError, OSError) as error:
                log.warning("could not remove the groups of %s: %s", unit["name"], error)
