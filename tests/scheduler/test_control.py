"""``spate.api.repositories.control.SqlControlStore`` on PostgreSQL and SQLite: the
compare-and-set writes that keep two workers from acting twice on one job."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from sqlalchemy import select

from spate.api.models import Job, JobCheckpoint, JobEvent, Pipeline
from spate.api.planning.udfs import UdfCheckAnswer
from spate.api.repositories.control import SqlControlStore
from spate.api.repositories.udfs import UdfRepository
from spate.scheduler.store import CheckpointRecord, ErrorRecord, EventBatch, StatusChange
from tests.scheduler.harness import new_pipeline


def add_pipeline(store: SqlControlStore, **settings: object) -> str:
    return new_pipeline(store.database, **settings).id


def test_concurrent_workers_create_one_job_per_pipeline(store: SqlControlStore) -> None:
    pipeline_id = add_pipeline(store, parallelism=3, checkpoint_interval_ms=500)
    results: list[object] = []
    barrier = threading.Barrier(6)

    def create() -> None:
        barrier.wait()
        results.append(store.create_run_job(pipeline_id, "local", "started"))

    threads = [threading.Thread(target=create) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    created = [job for job in results if job is not None]
    assert len(created) == 1
    job = store.job(created[0].id)  # type: ignore[attr-defined]
    assert job is not None and job.state == "created" and job.sql == "SELECT 1"
    assert (job.parallelism, job.checkpoint_interval_ms) == (3, 500)
    assert job.state_since is not None and job.state_since.tzinfo is not None
    assert [j.id for j in store.pipeline_jobs(pipeline_id)] == [job.id]
    assert store.create_run_job("no-such-pipeline", "local", "x") is None


def test_a_transition_happens_once_however_many_workers_try(store: SqlControlStore) -> None:
    job = store.create_run_job(add_pipeline(store), "local", "started")
    assert job is not None
    won = store.transition(job.id, {"created"}, "starting", "starting",
                           handle={"pid": 1}, started_at=datetime.now(UTC))
    assert won is not None and won.state == "starting" and won.handle == {"pid": 1}
    assert store.transition(job.id, {"created"}, "starting", "starting") is None
    assert store.update(job.id, {"created"}, attempt=5) is None
    with store.database.sessions() as session:
        states = list(session.scalars(select(JobEvent.state).where(JobEvent.job_id == job.id)
                                      .order_by(JobEvent.at)))
    assert states == ["created", "starting"]


def test_ingesting_the_same_events_twice_records_them_once(store: SqlControlStore) -> None:
    job = store.create_run_job(add_pipeline(store), "local", "started")
    assert job is not None
    store.transition(job.id, {"created"}, "starting", "starting")
    at = datetime(2026, 1, 1, tzinfo=UTC)
    batch = EventBatch(
        checkpoints=[CheckpointRecord(epoch=e, committed_at=at, duration_ms=10, state_bytes=1,
                                      rows_in=5, rows_out=1) for e in (0, 1)],
        errors=[ErrorRecord(at=at, message="a bad row")], heartbeat_at=at,
        metrics={"epoch": 1}, status=StatusChange("running", "running"))
    after = store.ingest(job.id, None, "100", batch)
    assert after is not None and after.state == "running" and after.last_epoch == 1
    assert after.heartbeat_at == at and after.last_error == "a bad row"
    assert store.ingest(job.id, None, "100", batch) is None  # the cursor moved: a lost race
    # A replayed epoch event adds nothing; a failure sets the message the API shows.
    failing = EventBatch(checkpoints=batch.checkpoints[1:],
                         status=StatusChange("failed", "state store unreachable"))
    failed = store.ingest(job.id, "100", "200", failing)
    assert failed is not None and failed.state == "failed"
    with store.database.sessions() as session:
        row = session.get(Job, job.id)
        assert row is not None and row.failure_message == "state store unreachable"
        assert row.ended_at is not None and row.metrics == {"epoch": 1}
        assert list(session.scalars(select(JobCheckpoint.epoch).where(
            JobCheckpoint.job_id == job.id).order_by(JobCheckpoint.epoch))) == [0, 1]
    # Nothing moves a job that is over.
    late = store.ingest(job.id, "200", "300", EventBatch(status=StatusChange("running", "")))
    assert late is not None and late.state == "failed"


def test_stop_requests_keep_the_first_mode_unless_forced(store: SqlControlStore) -> None:
    job = store.create_run_job(add_pipeline(store), "local", "started")
    assert job is not None
    assert store.request_stop(job.id, "checkpoint") is not None
    assert store.request_stop(job.id, "immediate") is None
    forced = store.request_stop(job.id, "force")
    assert forced is not None and forced.stop_mode == "force"
    assert store.request_stop(job.id, "checkpoint") is None
    store.transition(job.id, {"created"}, "stopped", "stopped")
    assert store.request_stop(job.id, "force") is None


def test_which_pipelines_need_reconciling(store: SqlControlStore) -> None:
    wanted = add_pipeline(store)
    idle = add_pipeline(store, desired_state="stopped")
    draining = add_pipeline(store)
    job = store.create_run_job(draining, "local", "started")
    assert job is not None
    with store.database.sessions() as session, session.begin():
        pipeline = session.get(Pipeline, draining)
        assert pipeline is not None
        pipeline.desired_state = "stopped"
    ids = store.pipelines_to_reconcile()
    assert wanted in ids and draining in ids and idle not in ids
    view = store.pipeline(draining)
    assert view is not None and view.desired_state == "stopped"
    assert store.pipeline("missing") is None and store.job("missing") is None


def test_record_epoch_only_moves_forward(store: SqlControlStore) -> None:
    job = store.create_run_job(add_pipeline(store), "local", "started")
    assert job is not None
    assert store.record_epoch(job.id, 7).last_epoch == 7  # type: ignore[union-attr]
    assert store.record_epoch(job.id, 3).last_epoch == 7  # type: ignore[union-attr]


def test_job_udfs_are_the_tenants_current_versions(store: SqlControlStore) -> None:
    tenant_id = new_pipeline(store.database).tenant_id
    other = new_pipeline(store.database).tenant_id
    checked = UdfCheckAnswer(kind="scalar", signature="ratio(a: int) -> int")
    for owner, source in ((tenant_id, "# one\n"), (tenant_id, "# two\n"), (other, "# 3\n")):
        with store.database.sessions() as session:
            UdfRepository(session, owner).store("ratio", source, checked, None)
    assert store.job_udfs(tenant_id) == [
        {"name": "ratio", "filename": "ratio.py", "source": "# two\n"}]
    assert [u["source"] for u in store.job_udfs(other)] == ["# 3\n"]
