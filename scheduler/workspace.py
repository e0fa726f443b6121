"""Where a job's files live, what its spec says, and the compute unit it runs in.

``<data_dir>/jobs/<job_id>/`` holds ``spec.json`` (until the job has read it:
it carries the job's secrets), the ``file://`` channel (``events.jsonl``,
``stop``) of jobs whose driver runs here, and ``job.log``. A sandboxed job's
folder is its tenant user's, so what this process writes there is written
without following links (:mod:`spate.engine.job.nofollow`); the ``/etc/passwd``
and ``/etc/group`` its sandbox binds are kept out of it, in
``<data_dir>/identities/<job_id>/``. Spark checkpoints
live under ``<checkpoint_root>/<tenant>/<pipeline_id>``, where the pipeline id
is the state store's: a pipeline's own id for runs (so every job of a
pipeline resumes the same state) and ``preview-<job id>`` for previews
(dropped when the preview ends). A tenant's folders, state-store URL and
boundary come from :class:`~spate.scheduler.tenants.Tenants`.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spate.engine.job.nofollow import create_new, open_regular
from spate.engine.job.spec import PREVIEW, RUN, WATCH, JobSpec
from spate.scheduler.backends.base import ClusterBackend
from spate.scheduler.config import SchedulerConfig
from spate.scheduler.sandbox.cgroups import CgroupHost, Limits, find_cgroups
from spate.scheduler.sandbox.network import NetworkRules, UnitNetwork
from spate.scheduler.sandbox.unit import ComputeUnit, TenantUser, UnitFolders
from spate.scheduler.store import JobView
from spate.scheduler.tenants import Tenants
from spate.statestore import StateStoreError, open_store

#: Share of a job's memory limit given to the driver JVM's heap (the rest: its
#: off-heap memory, the driver's Python and the Python workers).
DRIVER_HEAP_SHARE = 0.4

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class JobFiles:
    """The paths of one job's directory."""

    directory: Path

    @property
    def spec(self) -> Path:
        return self.directory / "spec.json"

    @property
    def log(self) -> Path:
        return self.directory / "job.log"


def state_pipeline_id(job: JobView) -> str:
    """The pipeline id the job's state is kept under in the state store."""
    if job.kind == PREVIEW or job.pipeline_id is None:
        return f"preview-{job.id}"
    return job.pipeline_id


def named_tables(sql: str, tables: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The table definitions whose name appears as a word in ``sql``.

    A job's planner decides which tables a query really uses; this only keeps
    the decrypted secrets of tables the SQL never mentions out of its spec.
    """
    words = _words(sql)
    return [table for table in tables if str(table.get("name", "")).lower() in words]


def named_udfs(sql: str, udfs: Iterable[dict[str, str]]) -> list[dict[str, str]]:
    """The files of the tenant's UDFs whose name appears as a word in ``sql``, as a
    spec's ``udf_files``: a job reads (and its executors run) only those."""
    words = _words(sql)
    return [{"filename": udf["filename"], "source": udf["source"]} for udf in udfs
            if udf["name"].lower() in words]


def _words(sql: str) -> set[str]:
    return {word.lower() for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}


class Workspace:
    """Lays out job directories and builds specs for one scheduler deployment."""

    def __init__(self, config: SchedulerConfig, backend: ClusterBackend) -> None:
        self.config = config
        self.backend = backend
        self.tenants = Tenants(config)
        self._cgroups: CgroupHost | None = None
        self._network: UnitNetwork | None = None

    def unit_network(self) -> UnitNetwork | None:
        """What builds units' networks: for units whose Spark runs inside them (a local
        master). A standalone cluster's executors run on the operator's workers, outside
        any unit: the operator's network must filter those (docs/security.md)."""
        master = self.backend.spark_master()
        if master is not None and not master.startswith("local"):
            return None
        if self._network is None:
            policy = self.tenants.egress_policy()
            self._network = UnitNetwork(NetworkRules.from_policy(
                policy, platform=self.tenants.platform_endpoints()))
        return self._network

    def hosted(self, job: JobView) -> bool:
        """Whether ``job`` runs in its tenant's warm application: the backend hosts jobs,
        and the job is not one that needs an application of its own."""
        return (self.backend.applications is not None and not job.watch
                and job.parallelism <= self.config.application_max_parallelism)

    def files(self, job_id: str) -> JobFiles:
        """The folder of a job with a process of its own."""
        return JobFiles(self.config.jobs_dir / job_id)

    def job_files(self, job: JobView) -> JobFiles:
        """The folder of ``job``: its own, or in its tenant's application's folder."""
        applications = self.backend.applications
        if applications is not None and self.hosted(job):
            return JobFiles(applications.folder(job.tenant_id).job_dir(job.id))
        return self.files(job.id)

    def channel_url(self, job: JobView) -> str:
        return job.channel_url or self.backend.channel_url(self.job_files(job).directory,
                                                           job.id)

    def checkpoint_dir(self, job: JobView) -> Path:
        return self.config.checkpoint_dir(job.tenant_id, state_pipeline_id(job))

    def write_spec(self, job: JobView, spec: JobSpec, unit: ComputeUnit | None = None
                   ) -> JobFiles:
        """Write ``spec`` into the job's directory (again for every attempt), readable only
        by the job's own user (the unit's, or this process's); the job removes it once read.
        A unit's job also gets its ``job.log``, its user's.

        The unit's user owns the folder and may have planted links in it: the spec
        is a new file (a link under its name is removed, not followed) and the log is
        opened without following one, each given to the user through its descriptor.
        """
        files = self.job_files(job)
        files.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        owner = None if unit is None else unit.user.uid
        with os.fdopen(create_new(files.spec, 0o600, owner), "w") as spec_file:
            spec_file.write(spec.to_json())
        if owner is not None:
            log = open_regular(files.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600,
                               owners=(owner, os.geteuid()))
            try:
                os.fchown(log, owner, owner)
            finally:
                os.close(log)
        return files

    def identity_dir(self, job_id: str) -> Path:
        """Where the sandbox of ``job_id`` keeps its ``/etc/passwd`` and ``/etc/group``:
        a folder of this process's, out of the job's reach."""
        return self.config.data_dir / "identities" / job_id

    def compute_unit(self, job: JobView, tenant_number: int) -> ComputeUnit:
        """The sandbox of ``job``'s next attempt: the tenant's user and folders, limits from
        the job's parallelism."""
        if self._cgroups is None:
            self._cgroups = find_cgroups()
        space = self.tenants.space(job.tenant_id)
        uid = self.config.sandbox_uid_base + tenant_number
        memory_mb = (self.config.job_memory_mb
                     + self.config.job_memory_per_task_mb * job.parallelism)
        limits = Limits(cpu_cores=job.parallelism + 1, memory_bytes=memory_mb * 1024 * 1024)
        folders = UnitFolders(self.job_files(job).directory, space.folders,
                              self.identity_dir(job.id))
        unit = ComputeUnit(f"{job.id}-a{job.attempt}", TenantUser(uid, f"spate-t{tenant_number}"),
                           folders, limits, self._cgroups, self.unit_network())
        unit.prepare()
        return unit

    def application_unit(self, tenant_id: str, tenant_number: int) -> ComputeUnit:
        """The sandbox of the tenant's warm application: the tenant's user and folders,
        its application folder to read, its hosted jobs' folders to write in, and the
        application's limits."""
        applications = self.backend.applications
        assert applications is not None, "the backend hosts no applications"
        if self._cgroups is None:
            self._cgroups = find_cgroups()
        folder = applications.folder(tenant_id)
        limits = Limits(cpu_cores=self.config.application_cpu_cores,
                        memory_bytes=self.config.application_memory_mb * 1024 * 1024)
        folders = UnitFolders(folder.run, self.tenants.space(tenant_id).folders,
                              self.config.data_dir / "identities" / f"app-{tenant_id}",
                              readable=(folder.path,), shared=(folder.jobs,))
        uid = self.config.sandbox_uid_base + tenant_number
        unit = ComputeUnit(f"app-{tenant_id}-{os.getpid()}-{time.time_ns()}",
                           TenantUser(uid, f"spate-t{tenant_number}"), folders, limits,
                           self._cgroups, self.unit_network())
        unit.prepare()
        return unit

    def scrub(self, job: JobView) -> None:
        """Remove what an ended job no longer needs and should not leave: its spec and its
        sandbox's identity files."""
        self.job_files(job).spec.unlink(missing_ok=True)  # a link is removed, not followed
        shutil.rmtree(self.identity_dir(job.id), ignore_errors=True)

    def spec(self, job: JobView, tables: Iterable[dict[str, Any]] = (),
             unit: ComputeUnit | None = None, udfs: Iterable[dict[str, str]] = ()) -> JobSpec:
        """The job's spec, with those of the connection ``tables`` and the tenant's
        ``udfs`` its SQL names; a job in a compute ``unit`` sizes its driver to the
        unit's memory."""
        spark_conf = dict(self.config.spark_conf)
        if unit is not None:
            heap_mb = int(unit.limits.memory_bytes * DRIVER_HEAP_SHARE) // (1024 * 1024)
            spark_conf.setdefault("spark.driver.memory", f"{heap_mb}m")
        return JobSpec(
            job_id=job.id, tenant_id=job.tenant_id, pipeline_id=state_pipeline_id(job),
            sql=job.sql, state_url=self.tenants.state_url(job.tenant_id),
            checkpoint_dir=str(self.checkpoint_dir(job)), channel_url=self.channel_url(job),
            parallelism=job.parallelism, kind=_spec_kind(job),
            checkpoint_interval_ms=job.checkpoint_interval_ms,
            spark_master=self.backend.spark_master(), spark_conf=spark_conf,
            update_flush_interval_ms=self.config.update_flush_interval_ms,
            tables=named_tables(job.sql, tables), udf_files=named_udfs(job.sql, udfs),
            boundary=self.tenants.boundary(job.tenant_id).to_dict(),
            idle_stop_s=self.config.idle_stop_s if job.kind != PREVIEW else None,
            epoch_max_delay_ms=self.config.epoch_max_delay_ms, attempt=job.attempt)

    def drop_state(self, job: JobView) -> None:
        """Remove the job's pipeline state from the state store and its Spark checkpoint."""
        scope = (job.tenant_id, state_pipeline_id(job))
        try:
            store = open_store(self.tenants.state_url(job.tenant_id))
        except StateStoreError as error:
            log.warning("could not open the state store to drop %s/%s: %s", *scope, error)
            raise
        try:
            store.pipeline(*scope).drop()
        finally:
            store.close()
        self.backend.remove_checkpoint(str(self.checkpoint_dir(job)))
        log.info("dropped state and checkpoint of %s/%s", *scope)


def _spec_kind(job: JobView) -> str:
    if job.kind == PREVIEW:
        return PREVIEW
    return WATCH if job.watch else RUN
