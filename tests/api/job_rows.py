"""Writing job rows as the scheduler would, for tests of the API's read side.

The rows go through the models into the test's real database; the API reads
them exactly as it reads the scheduler's.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from spate.api.db import Database
from spate.api.ids import new_id
from spate.api.models import Job, JobCheckpoint, JobError, JobEvent, Pipeline, utc_now
from spate.api.repositories.control import add_usage
from spate.scheduler.store import UsageCharge


def database_of(app: Any) -> Database:
    """The database of an API app (a TestClient's ``app``)."""
    database = app.state.spate.database
    assert isinstance(database, Database)
    return database


def insert_job(app: Any, tenant_id: str, pipeline_id: str | None,
               **fields: Any) -> str:
    """A job row (a run of ``pipeline_id``, or a preview when it is None); its id."""
    now = utc_now()
    values: dict[str, Any] = {
        "id": new_id(), "tenant_id": tenant_id, "pipeline_id": pipeline_id,
        "kind": "run" if pipeline_id else "preview", "state": "running", "parallelism": 1,
        "restart_generation": 0, "backend": "local", "attempt": 0, "created_at": now,
        "updated_at": now,
    }
    if pipeline_id is not None:
        values["pipeline_version"] = 1
    else:
        values["sql"] = "SELECT 1"
    values.update(fields)
    with database_of(app).sessions() as session:
        session.add(Job(**values))
        session.commit()
    return str(values["id"])


def update_job(app: Any, job_id: str, **fields: Any) -> None:
    with database_of(app).sessions() as session:
        job = session.get(Job, job_id)
        assert job is not None
        for name, value in fields.items():
            setattr(job, name, value)
        session.commit()


def read_pipeline(app: Any, pipeline_id: str) -> Pipeline:
    with database_of(app).sessions() as session:
        pipeline = session.get(Pipeline, pipeline_id)
        assert pipeline is not None
        return pipeline


def read_job(app: Any, job_id: str) -> Job:
    with database_of(app).sessions() as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job


def insert_history(app: Any, tenant_id: str, job_id: str, *, checkpoints: int,
                   rows_in: int = 100, rows_out: int = 10) -> None:
    """State changes, ``checkpoints`` committed epochs (1..n) and one error of a job."""
    start = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    with database_of(app).sessions() as session:
        for offset, state in enumerate(("created", "starting", "running")):
            session.add(JobEvent(id=new_id(), tenant_id=tenant_id, job_id=job_id,
                                 at=start + timedelta(seconds=offset), state=state,
                                 message=f"now {state}"))
        for epoch in range(1, checkpoints + 1):
            session.add(JobCheckpoint(
                id=new_id(), tenant_id=tenant_id, job_id=job_id, epoch=epoch,
                committed_at=start + timedelta(seconds=10 + epoch), duration_ms=100 * epoch,
                state_bytes=1000 * epoch, rows_in=rows_in, rows_out=rows_out))
        session.add(JobError(id=new_id(), tenant_id=tenant_id, job_id=job_id,
                             at=start + timedelta(seconds=60), message="source hiccup",
                             detail="Traceback: ..."))
        session.commit()


def insert_usage(app: Any, tenant_id: str, pipeline_id: str | None,
                 charges: list[tuple[datetime, str, float]], job_id: str | None = None) -> str:
    """Usage rows of ``job_id`` or of a new job of ``pipeline_id`` (a preview when None),
    as the meter writes them: ``(minute, dimension, quantity)`` each; the job's id."""
    job_id = job_id or insert_job(app, tenant_id, pipeline_id)
    with database_of(app).sessions() as session:
        add_usage(session, [UsageCharge(job_id, tenant_id, pipeline_id, minute, dimension,
                                        quantity) for minute, dimension, quantity in charges])
        session.commit()
    return job_id
