"""A tenant's pipelines and their immutable SQL versions."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select

from api.errors import ConflictError, NotFoundError
from api.ids import new_id
from api.models import Pipeline, PipelineVersion, utc_now
from api.repositories.base import TenantRepository, page, transaction

#: Settings compared by PUT: an existing pipeline must match them to be returned.
_SPEC_FIELDS = ("description", "parallelism", "checkpoint_interval_ms")


@dataclass(frozen=True)
class PipelineFilter:
    """Which pipelines a listing returns."""

    name_prefix: str | None = None
    created_after: datetime | None = None
    created_before: datetime | None = None


def sql_sha256(sql: str) -> str:
    return hashlib.sha256(sql.encode("utf-8")).hexdigest()


class PipelineRepository(TenantRepository):
    """The pipelines of one tenant."""

    def create(self, name: str, sql: str, settings: dict[str, Any],
               created_by_key_id: str | None) -> Pipeline:
        """A new pipeline at version 1; an existing name is a 409."""
        if self._find(name) is not None:
            raise ConflictError(f"a pipeline named '{name}' already exists; PUT "
                                f"/pipelines/{name} creates it only when absent")
        now = utc_now()
        pipeline = Pipeline(id=new_id(), name=name, current_version=1, created_at=now,
                            updated_at=now, **settings)
        pipeline.versions.append(self._version(pipeline, 1, sql, created_by_key_id))
        with transaction(self.session, f"a pipeline named '{name}' was created concurrently"):
            self.session.add(pipeline)
        return self.get(name)

    def create_or_get(self, name: str, sql: str, settings: dict[str, Any],
                      created_by_key_id: str | None) -> tuple[Pipeline, bool]:
        """The pipeline ``name`` as given, creating it if absent: (pipeline, created).

        An existing pipeline with other SQL or settings is a 409 naming the
        differences, so a retried PUT is harmless and a conflicting one is loud.
        """
        existing = self._find(name)
        if existing is None:
            try:
                return self.create(name, sql, settings, created_by_key_id), True
            except ConflictError:
                existing = self.get(name)  # created by a concurrent PUT
        differences = [field for field in _SPEC_FIELDS
                       if getattr(existing, field) != settings[field]]
        if existing.current.sql_sha256 != sql_sha256(sql):
            differences.insert(0, "sql")
        if differences:
            raise ConflictError(
                f"pipeline '{name}' exists with a different {', '.join(differences)}; "
                f"add a version or PATCH it instead",
                details=[{"field": field} for field in differences],
            )
        return existing, False

    def list_pipelines(self, where: PipelineFilter, after: str | None,
             limit: int) -> tuple[list[Pipeline], str | None]:
        statement = select(Pipeline)
        if where.name_prefix:
            escaped = where.name_prefix.replace("\\", "\\\\").replace("%", "\\%")
            escaped = escaped.replace("_", "\\_")
            statement = statement.where(Pipeline.name.like(f"{escaped}%", escape="\\"))
        if where.created_after is not None:
            statement = statement.where(Pipeline.created_at > where.created_after)
        if where.created_before is not None:
            statement = statement.where(Pipeline.created_at < where.created_before)
        return page(self.session, statement, Pipeline.id, after, limit)

    def get(self, name: str) -> Pipeline:
        pipeline = self._find(name)
        if pipeline is None:
            raise NotFoundError(f"pipeline '{name}' not found")
        return pipeline

    def update(self, name: str, changes: dict[str, Any]) -> Pipeline:
        pipeline = self.get(name)
        with transaction(self.session, f"pipeline '{name}' changed concurrently; retry"):
            for field, value in changes.items():
                setattr(pipeline, field, value)
            if changes:
                pipeline.updated_at = utc_now()
        return pipeline

    def delete(self, name: str) -> None:
        pipeline = self.get(name)
        with transaction(self.session, f"pipeline '{name}' changed concurrently; retry"):
            self.session.delete(pipeline)

    def add_version(self, name: str, sql: str,
                    created_by_key_id: str | None) -> tuple[PipelineVersion, bool]:
        """Make ``sql`` current as a new version: (version, created).

        SQL identical to the current version adds nothing and returns it.
        """
        pipeline = self.get(name)
        if pipeline.current.sql_sha256 == sql_sha256(sql):
            return pipeline.current, False
        number = pipeline.current_version + 1
        version = self._version(pipeline, number, sql, created_by_key_id)
        with transaction(self.session, f"pipeline '{name}' got a new version concurrently; "
                                       "retry"):
            self.session.add(version)
            pipeline.current_version = number
            pipeline.updated_at = version.created_at
        return version, True

    def list_versions(self, name: str, after: str | None,
                      limit: int) -> tuple[list[PipelineVersion], str | None]:
        pipeline = self.get(name)
        statement = select(PipelineVersion).where(PipelineVersion.pipeline_id == pipeline.id)
        return page(self.session, statement, PipelineVersion.id, after, limit)

    def get_version(self, name: str, number: int) -> PipelineVersion:
        pipeline = self.get(name)
        version = self.session.scalars(select(PipelineVersion).where(
            PipelineVersion.pipeline_id == pipeline.id, PipelineVersion.version == number,
        )).one_or_none()
        if version is None:
            raise NotFoundError(f"pipeline '{name}' has no version {number}")
        return version

    def _find(self, name: str) -> Pipeline | None:
        return self.session.scalars(select(Pipeline).where(Pipeline.name == name)).one_or_none()

    def _version(self, pipeline: Pipeline, number: int, sql: str,
                 created_by_key_id: str | None) -> PipelineVersion:
        return PipelineVersion(id=new_id(), tenant_id=self.tenant_id, pipeline_id=pipeline.id,
                               version=number, sql=sql, sql_sha256=sql_sha256(sql),
                               created_at=utc_now(), created_by_key_id=created_by_key_id)
