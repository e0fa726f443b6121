"""Fixtures for the scheduler's end-to-end tests: a real Redis broker, a migrated
control database, the local backend and a Celery worker in a thread.

Everything a run writes to Redis carries a prefix unique to the run (broker
keys through kombu's ``global_keyprefix``, the queue by name) and is deleted
afterwards; job processes still alive at the end are killed.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import make_url

from spate.api import migrate
from spate.api.db import create_database
from spate.api.repositories.control import SqlControlStore
from spate.scheduler.app import create_celery, register_tasks
from spate.scheduler.backends import create_backend
from spate.scheduler.backends.process import kill
from spate.scheduler.client import SchedulerClient
from spate.scheduler.config import SchedulerConfig
from spate.scheduler.embedded import start_embedded_worker
from spate.scheduler.sandbox.unit import sandbox_problem
from spate.scheduler.service import Scheduler
from tests.conftest import redis_key_prefix
from tests.scheduler.clusters import Cluster, start_clusters
from tests.scheduler.harness import Harness

#: Short periods so the tests see restarts and reconciles quickly.
TEST_TIMINGS = {"restart_budget": 1, "restart_backoff_s": 0.5, "restart_backoff_max_s": 2.0,
                "reconcile_interval_s": 1.0, "heartbeat_timeout_s": 90.0,
                "stop_timeout_s": 60.0}


def _admin(server_url: str) -> psycopg.Connection[tuple[object, ...]]:
    url = make_url(server_url).set(drivername="postgresql")
    return psycopg.connect(url.render_as_string(hide_password=False), autocommit=True)


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
          postgres_url: str) -> Iterator[SqlControlStore]:
    """A store over a freshly migrated database (PostgreSQL: a throwaway database)."""
    name = f"spate_scheduler_test_{secrets.token_hex(6)}"
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('control') / 'spate.db'}"
    else:
        with _admin(postgres_url) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        url = make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    migrate.upgrade(url)
    database = create_database(url)
    try:
        yield SqlControlStore(database)
    finally:
        database.dispose()
        if request.param == "postgresql":
            with _admin(postgres_url) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def redis_prefix(redis_url: str) -> Iterator[str]:
    """A key prefix for this module's broker; its keys are deleted afterwards."""
    yield from redis_key_prefix(redis_url)


@pytest.fixture(scope="module")
def control_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('control') / 'spate.db'}"
    migrate.upgrade(url)
    return url


@contextmanager
def running_scheduler(data_dir: Path, redis_url: str, redis_prefix: str, control_url: str,
                      **overrides: object) -> Iterator[Harness]:
    """A scheduler with its worker thread; stopped, and its job processes killed, after."""
    values: dict[str, object] = {
        "data_dir": data_dir, "state_url": f"sqlite:///{data_dir / 'state.db'}",
        **TEST_TIMINGS, **overrides}
    config = SchedulerConfig(**values).resolved()  # type: ignore[arg-type]
    database = create_database(control_url)
    store = SqlControlStore(database)
    app = create_celery(redis_url, queue=f"{redis_prefix}{secrets.token_hex(4)}",
                        key_prefix=redis_prefix,
                        reconcile_interval_s=config.reconcile_interval_s,
                        meter_interval_s=config.meter_interval_s)
    scheduler = Scheduler(store, create_backend(config), config)
    register_tasks(app, scheduler)
    worker = start_embedded_worker(app)
    harness = Harness(database=database, store=store, scheduler=scheduler, app=app,
                      client=SchedulerClient(app), worker=worker)
    try:
        yield harness
    finally:
        worker.stop()
        for handle in harness.handles():
            kill(handle.get("process", handle))  # a hosted job's: its application's
        database.dispose()


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory, redis_url: str, redis_prefix: str,
            control_url: str) -> Iterator[Harness]:
    """A scheduler on the local backend with SQLite state, shared by a module's tests;
    its jobs run in their tenants' sandboxes where the host can sandbox them."""
    with running_scheduler(tmp_path_factory.mktemp("spate-data"), redis_url, redis_prefix,
                           control_url, sandbox=sandbox_problem() is None) as running:
        yield running


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    return tmp_path


@pytest.fixture(scope="session")
def standalone_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Cluster]]:
    """Spark standalone clusters ``a`` (two 1-core workers) and ``b`` (one), for the
    session: the tests that use them are one xdist group (``standalone``), so they
    start once."""
    yield from start_clusters(tmp_path_factory.mktemp("spark-clusters"), {"a": 2, "b": 1})
