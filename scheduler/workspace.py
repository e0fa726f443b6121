"""Where a job's files live and what its spec says.

``<data_dir>/jobs/<job_id>/`` holds ``spec.json``, the ``file://`` channel
(``events.jsonl``, ``stop``) of jobs whose driver runs here, and ``job.log``.
Spark checkpoints live under ``<checkpoint_root>/<tenant>/<pipeline_id>``,
where the pipeline id is the state store's: a pipeline's own id for runs (so
every job of a pipeline resumes the same state) and ``preview-<job id>`` for
previews (dropped when the preview ends).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.job.spec import PREVIEW, RUN, JobSpec
from scheduler.backends.base import ClusterBackend
from scheduler.config import SchedulerConfig
from scheduler.store import JobView
from statestore import StateStoreError, open_store

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

    def files(self, job_id: str) -> JobFiles:
        return JobFiles(self.config.jobs_dir / job_id)

    def channel_url(self, job: JobView) -> str:
        return job.channel_url or self.backend.channel_url(self.files(job.id).directory, job.id)

    def checkpoint_dir(self, job: JobView) -> Path:
        return self.config.checkpoint_dir(job.tenant_id, state_pipeline_id(job))

    def write_spec(self, job: JobView, spec: JobSpec) -> JobFiles:
        """Write ``spec`` into the job's directory (the same spec for every attempt)."""
        files = self.files(job.id)
        files.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        # Owner-only: the state URL in the spec may carry a password.
        descriptor = os.open(files.spec, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as spec_file:
            spec_file.write(spec.to_json())
        return files

    def spec(self, job: JobView, tables: Iterable[dict[str, Any]] = ()) -> JobSpec:
        """The job's spec, with those of the connection ``tables`` its SQL names."""
        return JobSpec(
            job_id=job.id, tenant_id=job.tenant_id, pipeline_id=state_pipeline_id(job),
            sql=job.sql, state_url=self.config.state_url,
            checkpoint_dir=str(self.checkpoint_dir(job)), channel_url=self.channel_url(job),
            parallelism=job.parallelism, kind=PREVIEW if job.kind == PREVIEW else RUN,
            checkpoint_interval_ms=job.checkpoint_interval_ms,
            spark_master=self.backend.spark_master(), spark_conf=dict(self.config.spark_conf),
            update_flush_interval_ms=self.config.update_flush_interval_ms,
            tables=named_tables(job.sql, tables))

    def drop_state(self, job: JobView) -> None:
        """Remove the job's pipeline state from the state store and its Spark checkpoint."""
        scope = (job.tenant_id, state_pipeline_id(job))
        try:
            store = open_store(self.config.state_url)
        except StateStoreError as error:
            log.warning("could not open the state store to drop %s/%s: %s", *scope, error)
            raise
        try:
            store.pipeline(*scope).drop()
        finally:
            store.close()
        self.backend.remove_checkpoint(str(self.checkpoint_dir(job)))
        log.info("dropped state and checkpoint of %s/%s", *scope)
