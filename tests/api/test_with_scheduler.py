"""The API with the real scheduler behind it: pokes on a Redis broker, a worker in a
thread, job processes on the local backend running real Spark.

One unbounded pipeline is started by creating it, stopped with a checkpoint stop
and read back (jobs, history, checkpoints, metrics, Prometheus); one preview is
streamed over SSE from a real HTTP server until its row limit, after which the
scheduler stops its job. Each starts one Spark job process (~10 s each).
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from spate.api import migrate
from spate.api.db import create_database
from spate.api.http.app import create_app
from spate.api.models import Job
from spate.api.settings import Settings
from spate.api.worker import celery_app, scheduler_client, worker_app
from spate.scheduler.backends.process import kill
from spate.scheduler.embedded import start_embedded_worker
from tests.api.support import KEEP_ALIVE_S, PLATFORM_KEY, UNLIMITED, TenantKeys, new_tenant
from tests.api.support import TestClient as ApiClient

V1 = "/api/v1"
UNBOUNDED_SQL = ("CREATE TABLE src WITH (connector = 'impulse', event_rate = '20');\n"
                 "CREATE TABLE out WITH (connector = 'blackhole');\n"
                 "INSERT INTO out SELECT counter FROM src;\n")
PREVIEW_SQL = ("CREATE TABLE src WITH (connector = 'impulse', event_rate = '20');\n"
               "SELECT counter, counter * 2 AS twice FROM src;\n")
#: Spark start-up (up to a minute on a loaded machine), plus the scheduler's reconcile.
JOB_TIMEOUT_S = 300.0

pytestmark = [pytest.mark.e2e, pytest.mark.spark]


@dataclass
class Deployment:
    app: FastAPI
    url: str
    tenant: TenantKeys

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=60)


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, redis_url: str,
               redis_prefix: str) -> Iterator[Deployment]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    data_dir = tmp_path_factory.mktemp("spate-data")
    control_url = f"sqlite:///{data_dir / 'spate.db'}"
    migrate.upgrade(control_url)
    settings = Settings(
        database_url=control_url, redis_url=redis_url, redis_key_prefix=redis_prefix,
        broker_url=redis_url, scheduler_queue=f"{redis_prefix}queue-{secrets.token_hex(4)}",
        data_dir=data_dir, state_url=f"sqlite:///{data_dir / 'state.db'}",
        reconcile_interval_s=1.0, platform_admin_key=PLATFORM_KEY, **UNLIMITED)
    worker = start_embedded_worker(worker_app(settings))
    app = create_app(settings, scheduler=scheduler_client(celery_app(settings)))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                           timeout_keep_alive=KEEP_ALIVE_S))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        _wait(lambda: server.started, 20, "uvicorn did not start")
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        with ApiClient(app, base_url=url) as client:
            tenant = new_tenant(client)
        yield Deployment(app=app, url=url, tenant=tenant)
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        worker.stop()
        _kill_job_processes(control_url)


def _kill_job_processes(control_url: str) -> None:
    database = create_database(control_url)
    try:
        with database.sessions() as session:
            for handle in session.scalars(select(Job.handle)):
                if handle:
                    kill(handle)
    finally:
        database.dispose()


def _wait(condition: Callable[[], Any], timeout_s: float, message: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        assert time.monotonic() < deadline, message
        time.sleep(0.25)


def test_a_pipeline_starts_when_created_and_stops_on_request(deployment: Deployment) -> None:
    dev, viewer = deployment.tenant.auth("developer"), deployment.tenant.auth("viewer")
    with deployment.http() as http:
        created = http.post(f"{V1}/pipelines", headers=dev,
                            json={"name": "ticks", "sql": UNBOUNDED_SQL})
        assert created.status_code == 201, created.text

        def job_with_checkpoints() -> dict[str, Any] | None:
            job = http.get(f"{V1}/pipelines/ticks", headers=viewer).json()["job"]
            assert job is None or job["state"] not in ("failed", "stopped"), job
            return job if job and (job["last_epoch"] or 0) >= 1 else None

        job = _wait(job_with_checkpoints, JOB_TIMEOUT_S, "the pipeline never ran an epoch")
        assert job["state"] == "running"
        refused = http.delete(f"{V1}/pipelines/ticks", headers=dev)
        assert refused.status_code == 409

        stopping = http.patch(f"{V1}/pipelines/ticks", headers=dev, json={"stop": "checkpoint"})
        assert stopping.json()["desired_state"] == "stopped"
        _wait(lambda: http.get(f"{V1}/jobs/{job['id']}", headers=viewer).json()["state"]
              == "stopped", JOB_TIMEOUT_S, "the job did not stop")

        history = http.get(f"{V1}/jobs/{job['id']}/events", headers=viewer).json()["items"]
        states = [event["state"] for event in history]
        assert states[-1] == "stopped" and "running" in states
        checkpoints = http.get(f"{V1}/jobs/{job['id']}/checkpoints", headers=viewer).json()
        assert checkpoints["items"] and all(c["rows_in"] >= 0 for c in checkpoints["items"])
        metrics = http.get(f"{V1}/jobs/{job['id']}/metrics", headers=viewer).json()
        assert metrics["epoch"] is not None and metrics["operators"]

        scrape = http.get(f"{V1}/metrics", headers=viewer)
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for family in text_string_to_metric_families(scrape.text)
                   for s in family.samples}
        total_in = sum(c["rows_in"] for c in checkpoints["items"])
        assert samples[("spate_pipeline_rows_in_total", (("pipeline", "ticks"),))] == total_in
        assert samples[("spate_job_state", (("pipeline", "ticks"), ("state", "stopped")))] == 1

        assert http.delete(f"{V1}/pipelines/ticks", headers=dev).status_code == 204


def test_a_preview_streams_rows_and_its_job_stops_at_the_limit(deployment: Deployment) -> None:
    events: list[tuple[str, Any]] = []
    with deployment.http() as http, http.stream(
            "POST", f"{V1}/pipelines/preview", headers=deployment.tenant.auth("developer"),
            json={"sql": PREVIEW_SQL, "limit": 5, "timeout_s": int(JOB_TIMEOUT_S)}) as response:
        assert response.status_code == 200
        name = None
        for line in response.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((str(name), json.loads(line.removeprefix("data: "))))

    names = [name for name, _ in events]
    assert names[0] == "status" and "error" not in names, events
    assert ("status", {"job_id": events[0][1]["job_id"], "state": "running"}) in events
    rows = [row for name, data in events if name == "rows" for row in data]
    assert len(rows) == 5 and all(row["twice"] == 2 * row["counter"] for row in rows)
    assert events[-1] == ("end", {"reason": "limit", "rows": 5})

    job_id = events[0][1]["job_id"]
    with deployment.http() as http:
        _wait(lambda: http.get(f"{V1}/jobs/{job_id}", headers=deployment.tenant.auth()).json()
              ["state"] == "stopped", JOB_TIMEOUT_S, "the preview job was not stopped")
        job = http.get(f"{V1}/jobs/{job_id}", headers=deployment.tenant.auth()).json()
    assert (job["kind"], job["stop_mode"]) == ("preview", "immediate")
