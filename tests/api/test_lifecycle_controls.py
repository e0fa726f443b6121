"""Pipeline lifecycle controls: start on create, stop modes, restart, rescale, delete.

The API records desired state; these tests read it back over the API and check
what the scheduler would act on. Job rows the scheduler would write are
inserted through the models (tests/api/job_rows.py).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from spate.api.http.routes import pipelines as pipeline_routes
from tests.api.job_rows import insert_job, read_job, read_pipeline, update_job
from tests.api.support import TenantKeys, TestClient, error_of, pipeline_sql

PIPELINES = "/api/v1/pipelines"


@pytest.fixture
def tenant(tenant_factory: Callable[[], TenantKeys]) -> TenantKeys:
    return tenant_factory()


def _create(client: TestClient, tenant: TenantKeys, name: str = "p", **extra: object) -> dict:
    response = client.post(PIPELINES, headers=tenant.auth("developer"),
                           json={"name": name, "sql": pipeline_sql(), **extra})
    assert response.status_code == 201, response.text
    return dict(response.json())


def test_a_new_pipeline_runs_unless_created_stopped(client: TestClient,
                                                    tenant: TenantKeys) -> None:
    running = _create(client, tenant, "runs")
    assert (running["desired_state"], running["stop_mode"], running["job"]) == (
        "running", None, None)
    stopped = _create(client, tenant, "waits", stopped=True)
    assert stopped["desired_state"] == "stopped" and stopped["stop_mode"] is None

    put = client.put(f"{PIPELINES}/put-stopped", headers=tenant.auth("developer"),
                     json={"sql": pipeline_sql(), "stopped": True})
    assert put.status_code == 201 and put.json()["desired_state"] == "stopped"
    # 'stopped' only applies on creation: a retried PUT is the same pipeline, not a conflict.
    again = client.put(f"{PIPELINES}/put-stopped", headers=tenant.auth("developer"),
                       json={"sql": pipeline_sql()})
    assert again.status_code == 200 and again.json()["desired_state"] == "stopped"


@pytest.mark.parametrize("mode", ["checkpoint", "graceful", "immediate", "force"])
def test_each_stop_mode_is_recorded_and_none_runs_again(client: TestClient, tenant: TenantKeys,
                                                        mode: str) -> None:
    _create(client, tenant)
    dev = tenant.auth("developer")
    stopped = client.patch(f"{PIPELINES}/p", headers=dev, json={"stop": mode})
    assert stopped.status_code == 200, stopped.text
    assert (stopped.json()["desired_state"], stopped.json()["stop_mode"]) == ("stopped", mode)
    assert client.get(f"{PIPELINES}/p", headers=tenant.auth("viewer")).json()["stop_mode"] == mode

    resumed = client.patch(f"{PIPELINES}/p", headers=dev, json={"stop": "none"})
    assert (resumed.json()["desired_state"], resumed.json()["stop_mode"]) == ("running", None)


def test_stop_and_settings_change_together_and_bad_stops_are_422(client: TestClient,
                                                                 tenant: TenantKeys) -> None:
    _create(client, tenant)
    dev = tenant.auth("developer")
    both = client.patch(f"{PIPELINES}/p", headers=dev, json={"stop": "graceful",
                                                             "parallelism": 4})
    assert both.status_code == 200
    assert (both.json()["parallelism"], both.json()["desired_state"]) == (4, "stopped")
    for body in ({"stop": None}, {"stop": "pause"}, {"stop": True}, {"stop": ""}):
        response = client.patch(f"{PIPELINES}/p", headers=dev, json=body)
        assert response.status_code == 422, body
        assert error_of(response)["code"] == "validation_failed"
    assert client.get(f"{PIPELINES}/p", headers=dev).json()["stop_mode"] == "graceful"


def test_restart_raises_the_generation_with_or_without_state(client: TestClient,
                                                             tenant: TenantKeys) -> None:
    created = _create(client, tenant)
    dev = tenant.auth("developer")
    assert created["restart_generation"] == 0

    first = client.post(f"{PIPELINES}/p/restart", headers=dev)
    assert first.status_code == 202, first.text
    assert first.json()["restart_generation"] == 1 and first.json()["desired_state"] == "running"

    client.patch(f"{PIPELINES}/p", headers=dev, json={"stop": "checkpoint"})
    second = client.post(f"{PIPELINES}/p/restart", headers=dev, json={"with_state": False})
    assert second.status_code == 202
    body = second.json()
    assert (body["restart_generation"], body["desired_state"], body["stop_mode"]) == (
        2, "running", None)
    assert read_restart_with_state(client, body["id"]) is False

    third = client.post(f"{PIPELINES}/p/restart", headers=dev, json={"with_state": True})
    assert third.json()["restart_generation"] == 3
    assert read_restart_with_state(client, body["id"]) is True

    assert client.post(f"{PIPELINES}/p/restart", headers=dev,
                       json={"with_state": "maybe"}).status_code == 422
    assert client.post(f"{PIPELINES}/nope/restart", headers=dev).status_code == 404


def read_restart_with_state(client: TestClient, pipeline_id: str) -> bool:
    return read_pipeline(client.app, pipeline_id).restart_with_state


@pytest.mark.parametrize("body", [{"parallelism": 0}, {"parallelism": 129}, {"parallelism": "x"},
                                  {}, {"parallelism": 2, "extra": 1}])
def test_rescale_validates_parallelism(client: TestClient, tenant: TenantKeys,
                                       body: dict) -> None:
    _create(client, tenant)
    response = client.post(f"{PIPELINES}/p/rescale", headers=tenant.auth("developer"),
                           json=body)
    assert response.status_code == 422
    assert client.get(f"{PIPELINES}/p", headers=tenant.auth()).json()["parallelism"] == 1


def test_rescale_records_the_new_parallelism(client: TestClient, tenant: TenantKeys) -> None:
    _create(client, tenant)
    for parallelism in (16, 1, 7):  # 16: the default plan's most (tests/api/test_quotas.py)
        response = client.post(f"{PIPELINES}/p/rescale", headers=tenant.auth("developer"),
                               json={"parallelism": parallelism})
        assert response.status_code == 202
        assert response.json()["parallelism"] == parallelism
    assert client.get(f"{PIPELINES}/p", headers=tenant.auth("viewer")).json()["parallelism"] == 7
    assert client.post(f"{PIPELINES}/nope/rescale", headers=tenant.auth("developer"),
                       json={"parallelism": 2}).status_code == 404


def test_a_viewer_cannot_control_a_pipeline(client: TestClient, tenant: TenantKeys) -> None:
    before = _create(client, tenant)
    viewer = tenant.auth("viewer")
    for method, path, body in (("PATCH", "/p", {"stop": "force"}), ("POST", "/p/restart", {}),
                               ("POST", "/p/rescale", {"parallelism": 3}),
                               ("DELETE", "/p?force=true", None)):
        response = client.request(method, f"{PIPELINES}{path}", headers=viewer, json=body)
        assert response.status_code == 403, (method, path)
        assert error_of(response)["code"] == "forbidden"
    assert client.get(f"{PIPELINES}/p", headers=viewer).json() == before


def test_the_pipeline_shows_its_latest_run(client: TestClient, tenant: TenantKeys) -> None:
    pipeline = _create(client, tenant)
    other = _create(client, tenant, "other")
    insert_job(client.app, tenant.id, pipeline["id"], state="stopped")
    latest = insert_job(client.app, tenant.id, pipeline["id"], state="running",
                        parallelism=3, last_epoch=41, metrics={
                            "epoch": 41, "rows_in": 500, "rows_out": 50, "duration_ms": 250,
                            "rows_in_per_s": 1000.5, "rows_out_per_s": 100.25})
    insert_job(client.app, tenant.id, None, state="running")

    job = client.get(f"{PIPELINES}/p", headers=tenant.auth("viewer")).json()["job"]
    assert job["id"] == latest and job["state"] == "running" and job["parallelism"] == 3
    assert (job["last_epoch"], job["rows_in_per_s"], job["rows_out_per_s"]) == (
        41, 1000.5, 100.25)
    listed = client.get(PIPELINES, headers=tenant.auth("viewer")).json()["items"]
    assert {p["name"]: (p["job"] or {}).get("id") for p in listed} == {"p": latest,
                                                                       "other": None}
    assert other["job"] is None


def test_a_failed_run_shows_its_message_and_missing_rates_are_null(
        client: TestClient, tenant: TenantKeys) -> None:
    pipeline = _create(client, tenant)
    insert_job(client.app, tenant.id, pipeline["id"], state="failed",
               failure_message="the embedded sqlite state store lives on one machine",
               metrics={"rows_in": "many", "operators": "none"})
    job = client.get(f"{PIPELINES}/p", headers=tenant.auth()).json()["job"]
    assert job["state"] == "failed" and "sqlite" in job["failure_message"]
    assert job["rows_in_per_s"] is None and job["last_epoch"] is None


def test_deleting_a_running_pipeline_needs_a_stop_first(client: TestClient,
                                                        tenant: TenantKeys) -> None:
    pipeline = _create(client, tenant)
    job_id = insert_job(client.app, tenant.id, pipeline["id"], state="running")
    dev = tenant.auth("developer")
    refused = client.delete(f"{PIPELINES}/p", headers=dev)
    assert refused.status_code == 409
    error = error_of(refused)
    assert "stop it first" in error["message"] and error["details"] == [
        {"job_id": job_id, "state": "running"}]
    assert "PATCH" not in error["message"] and "?force" not in error["message"]
    assert client.get(f"{PIPELINES}/p", headers=dev).status_code == 200

    update_job(client.app, job_id, state="stopped")
    assert client.delete(f"{PIPELINES}/p", headers=dev).status_code == 204
    assert client.get(f"{PIPELINES}/p", headers=dev).status_code == 404
    assert client.get(f"/api/v1/jobs/{job_id}", headers=dev).status_code == 404


def test_force_delete_stops_the_job_first(client: TestClient, tenant: TenantKeys) -> None:
    pipeline = _create(client, tenant)
    job_id = insert_job(client.app, tenant.id, pipeline["id"], state="running")

    def scheduler_kills_it() -> None:
        """What the scheduler does for desired stopped/force: kill, then record it."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            response = client.get(f"{PIPELINES}/p", headers=tenant.auth())
            if response.status_code == 200 and response.json()["stop_mode"] == "force":
                update_job(client.app, job_id, state="stopped")
                return
            time.sleep(0.05)

    killer = threading.Thread(target=scheduler_kills_it)
    killer.start()
    response = client.delete(f"{PIPELINES}/p", headers=tenant.auth("developer"),
                             params={"force": "true"})
    killer.join()
    assert response.status_code == 204, response.text
    assert client.get(f"{PIPELINES}/p", headers=tenant.auth()).status_code == 404


def test_force_delete_of_a_job_that_does_not_end_is_a_409(
        client: TestClient, tenant: TenantKeys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pipeline_routes, "FORCE_DELETE_WAIT_S", 0.5)
    pipeline = _create(client, tenant)
    job_id = insert_job(client.app, tenant.id, pipeline["id"], state="stopping")
    response = client.delete(f"{PIPELINES}/p", headers=tenant.auth("developer"),
                             params={"force": "true"})
    assert response.status_code == 409
    assert "retry the delete" in error_of(response)["message"]
    after = client.get(f"{PIPELINES}/p", headers=tenant.auth()).json()
    assert (after["desired_state"], after["stop_mode"]) == ("stopped", "force")
    assert read_job(client.app, job_id).state == "stopping"


def test_pipelines_and_previews_plan_over_the_tenants_connection_tables(
        client: TestClient, tenant: TenantKeys) -> None:
    dev = tenant.auth("developer")
    made = client.post("/api/v1/connection-tables", headers=dev,
                       json={"name": "sink_table", "connector": "blackhole"})
    assert made.status_code == 201, made.text
    sql = ("CREATE TABLE src WITH (connector = 'impulse', event_rate = '1');\n"
           "INSERT INTO sink_table SELECT counter FROM src;\n")
    assert client.post(f"{PIPELINES}/validate", headers=dev,
                       json={"sql": sql}).json()["valid"] is True
    assert client.post(PIPELINES, headers=dev, json={"name": "p", "sql": sql}).status_code == 201
    assert client.put(f"{PIPELINES}/q", headers=dev, json={"sql": sql}).status_code == 201
    assert client.post(f"{PIPELINES}/q/versions", headers=dev,
                       json={"sql": sql + "-- 2\n"}).status_code == 201

    unknown = sql.replace("sink_table", "nope")
    for method, path, body in (("POST", PIPELINES, {"name": "r", "sql": unknown}),
                               ("POST", f"{PIPELINES}/preview", {"sql": unknown})):
        response = client.request(method, path, headers=dev, json=body)
        assert response.status_code == 400, path
        [diagnostic] = error_of(response)["details"]
        assert "nope" in diagnostic["message"] and diagnostic["line"] == 2
