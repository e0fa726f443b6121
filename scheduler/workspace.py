"""Where a job's files live, what its spec says, and the compute unit it runs in.

``<data_dir>/jobs/<job_id>/`` holds ``spec.json`` (until the job has read it:
it carries the job's secrets), the ``file://`` channel (``events.jsonl``,
``stop``) of jobs whose driver runs here, and ``job.log``. Spark checkpoints
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
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spate.engine.job.spec import PREVIEW, RUN, JobSpec
from spate.scheduler.backends.base import ClusterBackend
from spate.scheduler.config import SchedulerConfig
from spate.scheduler.sandbox.cgroups import CgroupHost, Limits, find_cgroups
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
    words = {word.lower() for word in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", sql)}
    return [table for table in tables if str(table.get("name", "")).lower() in words]


class Workspace:
    """Lays out job directories and builds specs for one scheduler deployment."""

    def __init__(self, config: SchedulerConfig, backend: ClusterBackend) -> None:
        self.config = config
        self.backend = backend
        self.tenants = Tenants(config)
        self._cgroups: CgroupHost | None = None

    def files(self, job_id: str) -> JobFiles:
        return JobFiles(self.config.jobs_dir / job_id)

    def channel_url(self, job: JobView) -> str:
        return job.channel_url or self.backend.channel_url(self.files(job.id).directory, job.id)

    def checkpoint_dir(self, job: JobView) -> Path:
        return self.config.checkpoint_dir(job.tenant_id, state_pipeline_id(job))

    def write_spec(self, job: JobView, spec: JobSpec, unit: ComputeUnit | None = None
                   ) -> JobFiles:
        """Write ``spec`` into the job's directory (again for every attempt), readable only
        by the job's own user (the unit's, or this process's); the job removes it once read.
        """
        files = self.files(job.id)
        files.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        files.spec.unlink(missing_ok=True)
        descriptor = os.open(files.spec, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as spec_file:
            spec_file.write(spec.to_json())
        if unit is not None:
            os.chown(files.spec, unit.user.uid, unit.user.uid)
            files.log.touch(mode=0o600)
            os.chown(files.log, unit.user.uid, unit.user.uid)
        return files

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
        unit = ComputeUnit(f"{job.id}-a{job.attempt}", TenantUser(uid, f"spate-t{tenant_number}"),
                           UnitFolders(self.files(job.id).directory, space.folders),
                           limits, self._cgroups)
        unit.prepare()
        return unit

    def scrub(self, job: JobView) -> None:
        """Remove what an ended job no longer needs and should not leave: its spec."""
        files = self.files(job.id)
        files.spec.unlink(missing_ok=True)
        shutil.rmtree(files.directory / ".sandbox", ignore_errors=True)

    def spec(self, job: JobView, tables: Iterable[dict[str, Any]] = (),
             unit: ComputeUnit | None = None) -> JobSpec:
        """The job's spec, with those of the connection ``tables`` its SQL names; a job
        in a compute ``unit`` sizes its driver to the unit's memory."""
        spark_conf = dict(self.config.spark_conf)
        if unit is not None:
            heap_mb = int(unit.limits.memory_bytes * DRIVER_HEAP_SHARE) // (1024 * 1024)
            spark_conf.setdefault("spark.driver.memory", f"{heap_mb}m")
        return JobSpec(
            job_id=job.id, tenant_id=job.tenant_id, pipeline_id=state_pipeline_id(job),
            sql=job.sql, state_url=self.tenants.state_url(job.tenant_id),
            checkpoint_dir=str(self.checkpoint_dir(job)), channel_url=self.channel_url(job),
            parallelism=job.parallelism, kind=PREVIEW if job.kind == PREVIEW else RUN,
            checkpoint_interval_ms=job.checkpoint_interval_ms,
            spark_master=self.backend.spark_master(), spark_conf=spark_conf,
            update_flush_interval_ms=self.config.update_flush_interval_ms,
            tables=named_tables(job.sql, tables),
            boundary=self.tenants.boundary(job.tenant_id).to_dict())

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
