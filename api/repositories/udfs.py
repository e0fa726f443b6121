"""A tenant's UDFs and their immutable source versions.

Sources are checked before they reach this repository (in the planning pool:
:mod:`spate.api.planning.udfs`), so a stored version always loads. Storing the
source of a name adds a version and makes it current; the same source again
adds nothing. Pipelines find a tenant's UDFs by the names their SQL mentions
(:meth:`UdfRepository.files_named_in`); the scheduler reads them for a job's
spec through :func:`job_udfs`.
"""

from __future__ import annotations

import hashlib
import re

from sqlalchemy import or_, select
from sqlalchemy.orm import Session, sessionmaker

from spate.api.http.errors import NotFoundError
from spate.api.ids import new_id
from spate.api.models import (
    Job,
    Pipeline,
    PipelineVersion,
    Udf,
    UdfVersion,
    utc_now,
)
from spate.api.planning.udfs import UdfCheckAnswer, udf_file
from spate.api.repositories.base import TenantRepository, page, transaction
from spate.engine.udf import UdfFile
from spate.scheduler.store import DESIRED_RUNNING, TERMINAL_STATES

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def sql_words(sql: str) -> set[str]:
    """The words of ``sql`` in lower case: the names it may call a UDF by."""
    return {word.lower() for word in _WORD.findall(sql)}


class UdfRepository(TenantRepository):
    """The UDFs of one tenant."""

    def store(self, name: str, source: str, checked: UdfCheckAnswer,
              created_by_key_id: str | None) -> tuple[Udf, bool]:
        """Make ``source`` (checked valid) current for UDF ``name``: a new UDF at version
        1, or the next version of an existing one; (udf, whether a version was added).
        The current source again adds nothing."""
        assert checked.kind is not None and checked.signature is not None, "checked first"
        digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
        udf = self._find(name)
        if udf is not None and udf.current.source_sha256 == digest:
            return udf, False
        now = utc_now()
        with transaction(self.session, f"UDF '{name}' was stored concurrently; retry"):
            if udf is None:
                udf = Udf(id=new_id(), name=name, current_version=1, created_at=now,
                          updated_at=now)
                self.session.add(udf)
            else:
                udf.current_version += 1
                udf.updated_at = now
            self.session.add(UdfVersion(
                id=new_id(), tenant_id=self.tenant_id, udf_id=udf.id,
                version=udf.current_version, source=source, source_sha256=digest,
                kind=checked.kind, signature=checked.signature, created_at=now,
                created_by_key_id=created_by_key_id))
        self.session.expire(udf)  # ``current`` and ``versions`` follow the new version
        return self.get(name), True

    def list_udfs(self, after: str | None, limit: int) -> tuple[list[Udf], str | None]:
        return page(self.session, select(Udf), Udf.id, after, limit)

    def get(self, name: str) -> Udf:
        udf = self._find(name)
        if udf is None:
            raise NotFoundError(f"UDF '{name}' not found")
        return udf

    def get_version(self, name: str, version: int) -> tuple[Udf, UdfVersion]:
        udf = self.get(name)
        found = next((v for v in udf.versions if v.version == version), None)
        if found is None:
            raise NotFoundError(f"UDF '{name}' has no version {version} (its versions: "
                                f"1 to {udf.current_version})")
        return udf, found

    def delete(self, name: str) -> None:
        udf = self.get(name)
        with transaction(self.session, f"UDF '{name}' changed concurrently; retry"):
            self.session.delete(udf)

    def files_named_in(self, sql: str) -> tuple[UdfFile, ...]:
        """The current files of the UDFs whose names ``sql`` mentions, by name."""
        names = sorted(sql_words(sql) & set(self.session.scalars(select(Udf.name))))
        if not names:
            return ()
        rows = self.session.scalars(select(Udf).where(Udf.name.in_(names)).order_by(Udf.name))
        return tuple(udf_file(udf.name, udf.current.source) for udf in rows)

    def live_pipeline_sql(self, name: str) -> dict[str, list[str]]:
        """The SQL texts that running pipelines may call UDF ``name`` from, by pipeline:
        their current version's and their live job's (which a restart of that job
        runs again). Only texts mentioning the name are kept."""
        live_jobs = (select(Job.pipeline_id, Job.pipeline_version)
                     .where(Job.kind == "run", Job.state.not_in(TERMINAL_STATES))
                     .subquery())
        rows = self.session.execute(
            select(Pipeline.name, PipelineVersion.sql)
            .join(PipelineVersion, PipelineVersion.pipeline_id == Pipeline.id)
            .outerjoin(live_jobs, live_jobs.c.pipeline_id == Pipeline.id)
            .where(or_(Pipeline.desired_state == DESIRED_RUNNING,
                       live_jobs.c.pipeline_id.is_not(None)))
            .where(or_(PipelineVersion.version == Pipeline.current_version,
                       PipelineVersion.version == live_jobs.c.pipeline_version)))
        found: dict[str, list[str]] = {}
        for pipeline, sql in rows:
            if name in sql_words(sql):
                found.setdefault(pipeline, []).append(sql)
        return found

    def _find(self, name: str) -> Udf | None:
        return self.session.scalars(select(Udf).where(Udf.name == name)).one_or_none()


def job_udfs(sessions: sessionmaker[Session], tenant_id: str) -> list[dict[str, str]]:
    """A tenant's UDFs at their current versions, as JSON values for a job's spec
    (``name``, ``filename``, ``source``).

    For the scheduler's store, whose own sessions span tenants: this opens a
    session of its own scoped to ``tenant_id``.
    """
    with sessions() as session:
        repository = UdfRepository(session, tenant_id)
        rows = repository.session.scalars(select(Udf).order_by(Udf.name))
        return [{"name": udf.name, "filename": file.filename, "source": file.source}
                for udf in rows for file in [udf_file(udf.name, udf.current.source)]]
