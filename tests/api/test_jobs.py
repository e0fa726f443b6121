"""Jobs over the API: listings with filters and pages, one job, its state history,
checkpoints, errors and latest metrics — read from rows the scheduler writes."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, get_args

import pytest

from spate.api.http.schemas.jobs import JobState
from spate.api.ids import new_id
from spate.api.models import JOB_STATES
from tests.api.job_rows import insert_history, insert_job
from tests.api.support import TenantKeys, TestClient, error_of, pipeline_sql

V1 = "/api/v1"


@pytest.fixture
def tenant(tenant_factory: Callable[[], TenantKeys]) -> TenantKeys:
    return tenant_factory()


def _pipeline(client: TestClient, tenant: TenantKeys, name: str) -> str:
    response = client.post(f"{V1}/pipelines", headers=tenant.auth("developer"),
                           json={"name": name, "sql": pipeline_sql()})
    assert response.status_code == 201
    return str(response.json()["id"])


def _all_pages(client: TestClient, path: str, headers: dict[str, str],
               **params: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        query = {**params, "limit": 2, **({"cursor": cursor} if cursor else {})}
        response = client.get(path, headers=headers, params=query)
        assert response.status_code == 200, response.text
        page = response.json()
        assert len(page["items"]) <= 2
        items.extend(page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            return items


def test_jobs_are_listed_in_pages_and_filtered(client: TestClient, tenant: TenantKeys) -> None:
    a, b = _pipeline(client, tenant, "a"), _pipeline(client, tenant, "b")
    ids = [insert_job(client.app, tenant.id, a, state="stopped"),
           insert_job(client.app, tenant.id, b, state="running"),
           insert_job(client.app, tenant.id, a, state="running"),
           insert_job(client.app, tenant.id, None, state="finished"),
           insert_job(client.app, tenant.id, a, state="failed", failure_message="boom")]
    viewer = tenant.auth("viewer")

    listed = _all_pages(client, f"{V1}/jobs", viewer)
    assert [j["id"] for j in listed] == ids  # oldest first, none skipped or repeated
    assert [j["pipeline"] for j in listed] == ["a", "b", "a", None, "a"]
    assert [j["kind"] for j in listed] == ["run", "run", "run", "preview", "run"]

    def ids_of(**params: str) -> list[str]:
        return [j["id"] for j in _all_pages(client, f"{V1}/jobs", viewer, **params)]

    assert ids_of(pipeline="a") == [ids[0], ids[2], ids[4]]
    assert ids_of(state="running") == [ids[1], ids[2]]
    assert ids_of(kind="preview") == [ids[3]]
    assert ids_of(pipeline="a", state="running") == [ids[2]]
    assert ids_of(pipeline="nope") == []
    for params in ({"state": "sleeping"}, {"kind": "batch"}, {"limit": 0}, {"limit": 201}):
        assert client.get(f"{V1}/jobs", headers=viewer, params=params).status_code == 422
    assert client.get(f"{V1}/jobs", headers=viewer, params={"cursor": "x"}).status_code == 400

    runs = _all_pages(client, f"{V1}/pipelines/a/jobs", viewer)
    assert [j["id"] for j in runs] == [ids[0], ids[2], ids[4]]
    failed = _all_pages(client, f"{V1}/pipelines/a/jobs", viewer, state="failed")
    assert [(j["id"], j["failure_message"]) for j in failed] == [(ids[4], "boom")]
    missing = client.get(f"{V1}/pipelines/nope/jobs", headers=viewer)
    assert missing.status_code == 404 and error_of(missing)["code"] == "not_found"


def test_one_job_and_its_history(client: TestClient, tenant: TenantKeys) -> None:
    pipeline_id = _pipeline(client, tenant, "p")
    job_id = insert_job(client.app, tenant.id, pipeline_id, state="running", parallelism=4,
                        checkpoint_interval_ms=2000, attempt=1, last_epoch=3,
                        handle={"pid": 123}, channel_url="file:///tmp/x")
    insert_history(client.app, tenant.id, job_id, checkpoints=5, rows_in=70, rows_out=7)
    viewer = tenant.auth("viewer")

    job = client.get(f"{V1}/jobs/{job_id}", headers=viewer).json()
    assert (job["pipeline"], job["pipeline_id"], job["state"], job["parallelism"]) == (
        "p", pipeline_id, "running", 4)
    assert (job["attempt"], job["last_epoch"], job["checkpoint_interval_ms"]) == (1, 3, 2000)
    assert "handle" not in job and "channel_url" not in job  # the scheduler's business

    events = _all_pages(client, f"{V1}/jobs/{job_id}/events", viewer)
    assert [(e["state"], e["message"]) for e in events] == [
        ("created", "now created"), ("starting", "now starting"), ("running", "now running")]
    checkpoints = _all_pages(client, f"{V1}/jobs/{job_id}/checkpoints", viewer)
    assert [c["epoch"] for c in checkpoints] == [1, 2, 3, 4, 5]
    assert checkpoints[2] == {"epoch": 3, "committed_at": "2026-11-22T12:00:13Z",
                              "duration_ms": 300, "state_bytes": 3000, "rows_in": 70,
                              "rows_out": 7}
    [error] = _all_pages(client, f"{V1}/jobs/{job_id}/errors", viewer)
    assert error["message"] == "source hiccup" and error["detail"].startswith("Traceback")

    unknown = new_id()
    for suffix in ("", "/events", "/checkpoints", "/errors", "/metrics"):
        response = client.get(f"{V1}/jobs/{unknown}{suffix}", headers=viewer)
        assert response.status_code == 404, suffix
        assert error_of(response)["code"] == "not_found"
    assert client.get(f"{V1}/jobs/not-an-id", headers=viewer).status_code == 404


def test_metrics_read_the_latest_epoch(client: TestClient, tenant: TenantKeys) -> None:
    pipeline_id = _pipeline(client, tenant, "p")
    watermark_us = int((time.time() - 30) * 1_000_000)
    job_id = insert_job(client.app, tenant.id, pipeline_id, metrics={
        "epoch": 9, "rows_in": 400, "rows_out": 40, "duration_ms": 200,
        "watermark_us": watermark_us, "busy_ratio": 0.75, "state_bytes": 2048,
        "cache_hits": 12, "cache_misses": 3, "remote_bytes": 4096,
        "rows_in_per_s": 350.0, "rows_out_per_s": 35.0,
        "operators": [{"operator": "source:src", "kind": "source", "rows_out": 400,
                       "rows_out_per_s": 390.5},
                      {"operator": "q0", "kind": "window", "rows_in": 400, "rows_out": 40,
                       "rows_in_per_s": 390.5, "rows_out_per_s": 0.2, "busy_ratio": 0.05},
                      {"operator": "sink:out", "kind": "sink", "rows_in": 40,
                       "rows_in_per_s": 0.2, "busy_ratio": "lots"}]})

    metrics = client.get(f"{V1}/jobs/{job_id}/metrics", headers=tenant.auth("viewer")).json()
    assert (metrics["epoch"], metrics["rows_in"], metrics["rows_out"]) == (9, 400, 40)
    assert (metrics["rows_in_per_s"], metrics["rows_out_per_s"]) == (350.0, 35.0)
    assert (metrics["backpressure"], metrics["state_bytes"]) == (0.75, 2048)
    assert (metrics["state_cache_hits"], metrics["state_cache_misses"],
            metrics["state_remote_bytes"]) == (12, 3, 4096)
    assert 29 <= metrics["watermark_lag_s"] <= 60
    # Each operator's own rates and busy ratio (over the job's last minute), not the job's.
    assert metrics["operators"] == [
        {"operator": "source:src", "kind": "source", "rows_in": None, "rows_out": 400,
         "rows_in_per_s": None, "rows_out_per_s": 390.5, "busy_ratio": None},
        {"operator": "q0", "kind": "window", "rows_in": 400, "rows_out": 40,
         "rows_in_per_s": 390.5, "rows_out_per_s": 0.2, "busy_ratio": 0.05},
        {"operator": "sink:out", "kind": "sink", "rows_in": 40, "rows_out": None,
         "rows_in_per_s": 0.2, "rows_out_per_s": None, "busy_ratio": None}]


@pytest.mark.parametrize("stored", [
    None, {}, [], "garbage", {"rows_in": "many", "busy_ratio": True, "operators": "none",
                              "watermark_us": 2**80, "duration_ms": 0},
    {"operators": [1, {"kind": "sink"}, {"operator": 5}], "epoch": 1e300},
])
def test_unreadable_metrics_are_nulls_not_errors(client: TestClient, tenant: TenantKeys,
                                                 stored: Any) -> None:
    job_id = insert_job(client.app, tenant.id, _pipeline(client, tenant, "p"), metrics=stored)
    response = client.get(f"{V1}/jobs/{job_id}/metrics", headers=tenant.auth("viewer"))
    assert response.status_code == 200
    body = response.json()
    assert body["operators"] == []
    assert all(body[k] is None for k in ("epoch", "rows_in", "rows_in_per_s", "backpressure",
                                         "watermark_lag_s", "state_bytes", "state_remote_bytes"))


def test_rates_fall_back_to_rows_over_the_epoch_duration(client: TestClient,
                                                         tenant: TenantKeys) -> None:
    job_id = insert_job(client.app, tenant.id, _pipeline(client, tenant, "p"),
                        metrics={"rows_in": 300, "rows_out": 30, "duration_ms": 1500,
                                 "watermark_us": int((time.time() + 60) * 1_000_000)})
    body = client.get(f"{V1}/jobs/{job_id}/metrics", headers=tenant.auth()).json()
    assert (body["rows_in_per_s"], body["rows_out_per_s"]) == (200.0, 20.0)
    assert body["watermark_lag_s"] == 0  # a watermark ahead of the clock is no lag


def test_another_tenants_job_is_a_404(client: TestClient,
                                      tenant_factory: Callable[[], TenantKeys]) -> None:
    owner, other = tenant_factory(), tenant_factory()
    job_id = insert_job(client.app, owner.id, _pipeline(client, owner, "p"))
    insert_history(client.app, owner.id, job_id, checkpoints=2)
    for suffix in ("", "/events", "/checkpoints", "/errors", "/metrics"):
        response = client.get(f"{V1}/jobs/{job_id}{suffix}", headers=other.auth())
        assert response.status_code == 404 and job_id in error_of(response)["message"]
    assert client.get(f"{V1}/jobs", headers=other.auth()).json()["items"] == []


def test_an_idle_job_says_when_it_resumes(client: TestClient, tenant: TenantKeys) -> None:
    quiet, busy = _pipeline(client, tenant, "quiet"), _pipeline(client, tenant, "busy")
    due = datetime(2026, 11, 27, 12, 0, 5, tzinfo=UTC)
    last_epoch = {"epoch": 4, "rows_in": 1, "rows_out": 1, "duration_ms": 150,
                  "rows_in_per_s": 6.7, "rows_out_per_s": 6.7}
    job_id = insert_job(client.app, tenant.id, quiet, state="idle", next_attempt_at=due,
                        metrics=last_epoch)
    other = insert_job(client.app, tenant.id, busy, state="restarting", next_attempt_at=due,
                       metrics=last_epoch)  # a restart's backoff is not a resumption
    viewer = tenant.auth("viewer")

    job = client.get(f"{V1}/jobs/{job_id}", headers=viewer).json()
    assert (job["state"], job["resumes_at"]) == ("idle", "2026-11-27T12:00:05Z")
    assert client.get(f"{V1}/jobs/{other}", headers=viewer).json()["resumes_at"] is None
    idle = client.get(f"{V1}/jobs", headers=viewer, params={"state": "idle"}).json()["items"]
    assert [j["id"] for j in idle] == [job_id]
    # Idle reads and writes nothing, whatever its last epoch's rate was.
    summary = client.get(f"{V1}/pipelines/quiet", headers=viewer).json()["job"]
    assert (summary["state"], summary["rows_in_per_s"], summary["rows_out_per_s"]) == (
        "idle", 0.0, 0.0)
    assert summary["resumes_at"] == "2026-11-27T12:00:05Z"
    restarting = client.get(f"{V1}/pipelines/busy", headers=viewer).json()["job"]
    assert restarting["rows_in_per_s"] == 6.7


@pytest.mark.parametrize("state", ["stopped", "finished", "failed"])
def test_an_ended_job_shows_no_live_figures(client: TestClient, tenant: TenantKeys,
                                            state: str) -> None:
    last_epoch = {"epoch": 9, "rows_in": 300, "rows_out": 30, "duration_ms": 1000,
                  "rows_in_per_s": 29.5, "rows_out_per_s": 3.0, "busy_ratio": 0.8,
                  "operators": [{"operator": "sink:out", "kind": "sink", "rows_in": 30,
                                 "rows_in_per_s": 3.0, "busy_ratio": 0.4}]}
    job_id = insert_job(client.app, tenant.id, _pipeline(client, tenant, "done"), state=state,
                        metrics=last_epoch)
    viewer = tenant.auth("viewer")
    summary = client.get(f"{V1}/pipelines/done", headers=viewer).json()["job"]
    assert (summary["rows_in_per_s"], summary["rows_out_per_s"]) == (None, None)
    metrics = client.get(f"{V1}/jobs/{job_id}/metrics", headers=viewer).json()
    assert (metrics["rows_in_per_s"], metrics["backpressure"]) == (None, None)
    assert [(o["rows_in_per_s"], o["busy_ratio"]) for o in metrics["operators"]] == [
        (None, None)]
    # What the last epoch did stays: it is history, not a live figure.
    assert (metrics["epoch"], metrics["rows_in"], metrics["operators"][0]["rows_in"]) == (
        9, 300, 30)


def test_the_apis_job_states_are_the_models() -> None:
    assert set(get_args(JobState)) == set(JOB_STATES)


@pytest.mark.parametrize("state", JOB_STATES)
def test_a_job_says_whether_it_is_active_and_live(client: TestClient, tenant: TenantKeys,
                                                  state: str) -> None:
    """The console reads these flags instead of keeping lists of states."""
    job_id = insert_job(client.app, tenant.id, _pipeline(client, tenant, "p"), state=state)
    viewer = tenant.auth("viewer")
    expected = {"active": state in {"created", "starting", "running", "stopping", "restarting"},
                "live": state in {"running", "stopping", "restarting"}}
    job = client.get(f"{V1}/jobs/{job_id}", headers=viewer).json()
    summary = client.get(f"{V1}/pipelines/p", headers=viewer).json()["job"]
    assert {k: job[k] for k in expected} == expected
    assert {k: summary[k] for k in expected} == expected
