"""The embedded worker of ``spate serve`` (memory transport, in-process ticker) built
from settings by ``spate.api.worker``, and the client's fire-and-forget pokes."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.api import migrate
from spate.api.db import create_database
from spate.api.repositories.control import SqlControlStore
from spate.api.settings import Settings
from spate.api.worker import celery_app, scheduler_client, worker_app
from spate.scheduler.app import create_celery
from spate.scheduler.client import SchedulerClient
from spate.scheduler.embedded import EmbeddedWorker, start_embedded_worker
from tests.scheduler.harness import new_pipeline


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    migrate.upgrade(url)
    return Settings(database_url=url, data_dir=tmp_path / "data",
                    state_url=f"sqlite:///{tmp_path / 'state.db'}", reconcile_interval_s=0.5)


@pytest.fixture
def embedded(settings: Settings) -> Iterator[EmbeddedWorker]:
    worker = start_embedded_worker(worker_app(settings))
    try:
        yield worker
    finally:
        worker.stop()


def wait_for_state(store: SqlControlStore, job_id: str, state: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        job = store.job(job_id)
        if job is not None and job.state == state:
            return
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} never reached {state}: {store.job(job_id)}")


def test_a_poke_reaches_the_embedded_worker_through_the_memory_transport(
        settings: Settings, embedded: EmbeddedWorker) -> None:
    store = SqlControlStore(create_database(settings.database_url))
    pipeline = new_pipeline(store.database, desired_state="stopped").id
    job = store.create_run_job(pipeline, "local", "created")
    assert job is not None and store.request_stop(job.id, "checkpoint") is not None
    # Another app instance, as the API holds: the memory transport is per process.
    scheduler_client(celery_app(settings)).job_changed(job.id)
    wait_for_state(store, job.id, "stopped")
    store.database.dispose()


def test_the_periodic_reconcile_catches_up_without_a_poke(
        settings: Settings, embedded: EmbeddedWorker) -> None:
    store = SqlControlStore(create_database(settings.database_url))
    pipeline = new_pipeline(store.database, desired_state="stopped").id
    job = store.create_run_job(pipeline, "local", "created")
    assert job is not None and store.request_stop(job.id, "immediate") is not None
    wait_for_state(store, job.id, "stopped")
    store.database.dispose()


def test_a_poke_with_the_broker_down_is_dropped_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    client = SchedulerClient(create_celery("redis://127.0.0.1:9/0"))
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="spate.scheduler.client"):
        client.pipeline_changed("01jpipeline")
    assert time.monotonic() - started < 30
    assert "periodic reconcile will catch up" in caplog.text

