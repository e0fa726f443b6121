"""POST /pipelines/preview: SQL checked first, a preview job recorded, then its status
and rows streamed as Server-Sent Events over a real HTTP server.

No scheduler runs here: the test plays its part with real rows in the real
database (the job's state and channel URL) and a real file channel it writes
events to, as a preview job process would.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from sqlalchemy import select

from spate.api.models import Job
from spate.engine.job.channel import FileJobChannel
from tests.api.job_rows import database_of, read_job, update_job
from tests.api.serving import sse_events
from tests.api.support import KEEP_ALIVE_S, TenantKeys, error_of, new_tenant, pipeline_sql
from tests.api.support import TestClient as ApiClient

PREVIEW = "/api/v1/pipelines/preview"
SELECT_SQL = ("CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');\n"
              "SELECT counter FROM src;\n")


@dataclass
class Server:
    """The API app served by uvicorn on a loopback port, in a thread."""

    app: FastAPI
    url: str
    tenant: TenantKeys


@pytest.fixture(scope="module")
def server(backend: str, make_app: Callable[..., FastAPI]) -> Iterator[Server]:
    app = make_app(backend)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                            lifespan="on", timeout_keep_alive=KEEP_ALIVE_S)
    uvicorn_server = uvicorn.Server(config)
    thread = threading.Thread(target=uvicorn_server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not uvicorn_server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    port = uvicorn_server.servers[0].sockets[0].getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with ApiClient(app, base_url=url) as client:
        tenant = new_tenant(client)
    try:
        yield Server(app=app, url=url, tenant=tenant)
    finally:
        uvicorn_server.should_exit = True
        thread.join(timeout=20)


def _stream(server: Server, body: dict[str, Any], read: int | None = None
            ) -> list[tuple[str, Any]]:
    """The events of one preview (the first ``read`` of them, then hang up)."""
    headers = server.tenant.auth("developer")
    received: list[tuple[str, Any]] = []
    with httpx.Client(base_url=server.url, timeout=30) as http, \
            http.stream("POST", PREVIEW, json=body, headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        for event in sse_events(response):
            received.append(event)
            if read is not None and len(received) >= read:
                break
    return received


class PlaysScheduler(threading.Thread):
    """Waits for the tenant's next preview job, then runs ``script`` against it."""

    def __init__(self, server: Server, tmp_path: Path,
                 script: Callable[[str, FileJobChannel], None]) -> None:
        super().__init__(daemon=True)
        self.server, self.script = server, script
        self.channel = FileJobChannel(tmp_path / f"channel-{secrets.token_hex(4)}")
        self.known = _preview_ids(server)
        self.job_id: str | None = None
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + 15
            while self.job_id is None:
                assert time.monotonic() < deadline, "no preview job was created"
                fresh = _preview_ids(self.server) - self.known
                self.job_id = min(fresh) if fresh else None
                time.sleep(0.05)
            self.script(self.job_id, self.channel)
        except BaseException as error:  # noqa: BLE001 - re-raised by the test in its thread
            self.failure = error

    def start_job(self) -> None:
        assert self.job_id is not None
        update_job(self.server.app, self.job_id, state="running",
                   channel_url=f"file://{self.channel.directory}")

    def check(self) -> str:
        self.join(timeout=30)
        if self.failure is not None:
            raise self.failure
        assert self.job_id is not None
        return self.job_id


def _preview_ids(server: Server) -> set[str]:
    with database_of(server.app).sessions() as session:
        return set(session.scalars(select(Job.id).where(
            Job.tenant_id == server.tenant.id, Job.kind == "preview")))


def _wait_for_stop_mode(server: Server, job_id: str) -> str | None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        mode = read_job(server.app, job_id).stop_mode
        if mode is not None:
            return mode
        time.sleep(0.1)
    return None


def test_rows_stream_until_the_job_finishes(server: Server, tmp_path: Path) -> None:
    def script(job_id: str, channel: FileJobChannel) -> None:
        time.sleep(0.4)
        self.start_job()
        channel.publish({"type": "heartbeat"})
        channel.publish({"type": "epoch", "epoch": 0, "rows_in": 5, "rows_out": 0,
                         "duration_ms": 40, "operators": []})
        channel.publish({"type": "rows", "epoch": 1, "rows": [{"counter": 0}, {"counter": 1}]})
        channel.publish({"type": "rows", "epoch": 2, "rows": [{"counter": 2}]})
        time.sleep(0.4)
        update_job(server.app, job_id, state="finished")

    self = PlaysScheduler(server, tmp_path, script)
    self.start()
    events = _stream(server, {"sql": SELECT_SQL, "limit": 10, "parallelism": 2})
    job_id = self.check()

    assert events[0] == ("status", {"job_id": job_id, "state": "created"})
    assert ("status", {"job_id": job_id, "state": "running"}) in events
    rows = [row for name, data in events if name == "rows" for row in data]
    assert rows == [{"counter": 0}, {"counter": 1}, {"counter": 2}]
    # Progress before any row: what each committed epoch read and wrote, and only that.
    assert [data for name, data in events if name == "epoch"] == [
        {"epoch": 0, "rows_in": 5, "rows_out": 0}]
    assert events[-2] == ("status", {"job_id": job_id, "state": "finished"})
    assert events[-1] == ("end", {"reason": "finished", "rows": 3})
    job = read_job(server.app, job_id)
    assert (job.kind, job.sql, job.parallelism, job.pipeline_id) == ("preview", SELECT_SQL,
                                                                     2, None)
    assert job.stop_mode is None  # it ended by itself; nothing to stop


def test_rows_ahead_of_the_scheduler_come_after_a_running_status(server: Server,
                                                                  tmp_path: Path) -> None:
    """The job writes rows before the scheduler has read its events and recorded it
    running: the stream says ``running`` before the rows, once, and never goes back."""
    def script(job_id: str, channel: FileJobChannel) -> None:
        update_job(server.app, job_id, state="starting",
                   channel_url=f"file://{self.channel.directory}")
        channel.publish({"type": "rows", "epoch": 0, "rows": [{"n": 0}]})
        time.sleep(0.6)  # a few polls with the job still "starting"
        update_job(server.app, job_id, state="running")
        channel.publish({"type": "rows", "epoch": 1, "rows": [{"n": 1}]})
        time.sleep(0.6)
        update_job(server.app, job_id, state="finished")

    self = PlaysScheduler(server, tmp_path, script)
    self.start()
    events = _stream(server, {"sql": SELECT_SQL, "limit": 10})
    job_id = self.check()
    statuses = [data["state"] for name, data in events if name == "status"]
    assert statuses in (["created", "running", "finished"],
                        ["created", "starting", "running", "finished"]), events
    first_rows = next(i for i, (name, _) in enumerate(events) if name == "rows")
    assert ("status", {"job_id": job_id, "state": "running"}) in events[:first_rows], events
    assert [row for name, data in events if name == "rows" for row in data] == [{"n": 0},
                                                                                 {"n": 1}]


def test_the_limit_ends_the_stream_and_stops_the_job(server: Server, tmp_path: Path) -> None:
    def script(job_id: str, channel: FileJobChannel) -> None:
        self.start_job()
        for epoch in range(3):
            channel.publish({"type": "rows", "epoch": epoch,
                             "rows": [{"n": epoch * 2}, {"n": epoch * 2 + 1}]})

    self = PlaysScheduler(server, tmp_path, script)
    self.start()
    events = _stream(server, {"sql": SELECT_SQL, "limit": 3})
    job_id = self.check()
    rows = [row for name, data in events if name == "rows" for row in data]
    assert rows == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert events[-1] == ("end", {"reason": "limit", "rows": 3})
    assert _wait_for_stop_mode(server, job_id) == "immediate"


def test_hanging_up_stops_the_job(server: Server, tmp_path: Path) -> None:
    def script(job_id: str, channel: FileJobChannel) -> None:
        self.start_job()
        channel.publish({"type": "rows", "epoch": 1, "rows": [{"n": 1}]})

    self = PlaysScheduler(server, tmp_path, script)
    self.start()
    events = _stream(server, {"sql": SELECT_SQL, "limit": 100}, read=2)
    job_id = self.check()
    assert [name for name, _ in events] == ["status", "status"]
    assert _wait_for_stop_mode(server, job_id) == "immediate"
    assert read_job(server.app, job_id).state == "running"  # stopping is the scheduler's part


def test_a_failed_job_reports_its_error(server: Server, tmp_path: Path) -> None:
    def script(job_id: str, channel: FileJobChannel) -> None:
        self.start_job()
        channel.publish({"type": "error", "message": "division by zero", "detail": "..."})
        update_job(server.app, job_id, state="failed", failure_message="division by zero")

    self = PlaysScheduler(server, tmp_path, script)
    self.start()
    events = _stream(server, {"sql": SELECT_SQL})
    job_id = self.check()
    assert [data for name, data in events if name == "error"] == [
        {"message": "division by zero"}]  # once, though both the channel and the row say it
    assert events[-1] == ("end", {"reason": "failed", "rows": 0})
    assert read_job(server.app, job_id).stop_mode is None


def test_a_preview_the_scheduler_never_starts_times_out(server: Server) -> None:
    known = _preview_ids(server)
    events = _stream(server, {"sql": SELECT_SQL, "timeout_s": 1})
    [job_id] = _preview_ids(server) - known
    assert events[0][0] == "status"
    assert events[-2] == ("error", {"message": "the preview timed out after 1 s; it is stopped"})
    assert events[-1] == ("end", {"reason": "timeout", "rows": 0})
    assert read_job(server.app, job_id).stop_mode == "immediate"


@pytest.mark.parametrize(("body", "status"), [
    ({"sql": "SELEC 1"}, 400), ({"sql": SELECT_SQL, "limit": 0}, 422),
    ({"sql": SELECT_SQL, "limit": 10_001}, 422), ({"sql": SELECT_SQL, "parallelism": 9}, 422),
    ({"sql": SELECT_SQL, "timeout_s": 0}, 422), ({"sql": ""}, 422),
    ({"sql": SELECT_SQL, "rows": 5}, 422),
])
def test_bad_requests_start_nothing(server: Server, body: dict[str, Any], status: int) -> None:
    known = _preview_ids(server)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        response = http.post(PREVIEW, json=body, headers=server.tenant.auth("developer"))
    assert response.status_code == status
    error = error_of(response)
    if status == 400:
        assert error["code"] == "invalid_sql" and error["details"][0]["line"] == 1
    assert _preview_ids(server) == known


def test_a_viewer_may_not_preview(server: Server) -> None:
    known = _preview_ids(server)
    with httpx.Client(base_url=server.url, timeout=30) as http:
        response = http.post(PREVIEW, json={"sql": pipeline_sql()},
                             headers=server.tenant.auth("viewer"))
    assert response.status_code == 403 and error_of(response)["code"] == "forbidden"
    assert _preview_ids(server) == known


def test_a_tenant_streams_a_bounded_number_of_previews(server: Server) -> None:
    with ApiClient(server.app, base_url=server.url) as client:
        tenant = new_tenant(client)  # its own, so other tests' previews do not count
    headers = tenant.auth("developer")
    hang_up = threading.Event()

    def open_stream() -> None:
        with httpx.Client(base_url=server.url, timeout=30) as http, \
                http.stream("POST", PREVIEW, json={"sql": SELECT_SQL, "timeout_s": 30},
                            headers=headers) as response:
            assert response.status_code == 200
            hang_up.wait(30)

    streams = [threading.Thread(target=open_stream) for _ in range(4)]
    for stream in streams:
        stream.start()
    try:
        deadline = time.monotonic() + 15
        while len(_previews_of(server, tenant)) < 4:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with httpx.Client(base_url=server.url, timeout=30) as http:
            refused = http.post(PREVIEW, json={"sql": SELECT_SQL}, headers=headers)
        # Previews end by themselves, so waiting helps: a 429 (tests/api/test_quotas.py).
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        error = error_of(refused)
        assert error["code"] == "quota_exceeded" and "live previews" in error["message"]
        assert error["details"] == [{"limit": "previews", "value": 4, "current": 4,
                                     "requested": 1}]
    finally:
        hang_up.set()
        for stream in streams:
            stream.join(30)
    for job_id in _previews_of(server, tenant):  # hung up: each was asked to stop
        assert _wait_for_stop_mode(server, job_id) == "immediate"


def _previews_of(server: Server, tenant: TenantKeys) -> set[str]:
    with database_of(server.app).sessions() as session:
        return set(session.scalars(select(Job.id).where(
            Job.tenant_id == tenant.id, Job.kind == "preview")))
