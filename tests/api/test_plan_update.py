"""Whether new SQL can keep a pipeline's state: plan-update, validate with a pipeline,
and a restart keeping state that the current version cannot read refused before any
job is stopped.

The state is the one the pipeline's latest job wrote: a job row of version 1 stands
for it, written as the scheduler writes them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.api.job_rows import insert_job, read_pipeline
from tests.api.support import TenantKeys, TestClient, error_of

PIPELINES = "/api/v1/pipelines"
# Five-second windows of ticks per subtask; the sink gets each window's start, key, count.
WINDOWED = """CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out
SELECT w.start AS second, k, n
FROM (SELECT TUMBLE(INTERVAL '5' SECOND) AS w, subtask_index AS k, count(*) AS n
      FROM src GROUP BY 1, 2);
"""
#: Output columns computed from the window, the key and the count: no new state.
ADDED_COLUMNS = WINDOWED.replace("SELECT w.start AS second, k, n",
                                 "SELECT w.start AS second, w.end AS until, k, n, n * 2 AS twice")
WIDER_WINDOW = WINDOWED.replace("'5' SECOND", "'10' SECOND")
OTHER_KEY = WINDOWED.replace("subtask_index AS k", "counter % 7 AS k")
#: A second query after the first: its window is new, the first one's state is kept.
ANOTHER_QUERY = WINDOWED + ("INSERT INTO out SELECT w.start, k, n FROM (SELECT "
                            "TUMBLE(INTERVAL '1' MINUTE) AS w, counter AS k, count(*) AS n "
                            "FROM src GROUP BY 1, 2);\n")
STATELESS = """CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter FROM src;
"""


@pytest.fixture
def tenant(tenant_factory: Callable[[], TenantKeys]) -> TenantKeys:
    return tenant_factory()


def ran(client: TestClient, tenant: TenantKeys, name: str, sql: str = WINDOWED) -> str:
    """A pipeline ``name`` whose version 1 has run (its job stopped): its id."""
    created = client.post(PIPELINES, headers=tenant.auth("developer"),
                          json={"name": name, "sql": sql, "stopped": True})
    assert created.status_code == 201, created.text
    pipeline_id = str(created.json()["id"])
    insert_job(client.app, tenant.id, pipeline_id, state="stopped", pipeline_version=1)
    return pipeline_id


def plan_update(client: TestClient, tenant: TenantKeys, name: str, sql: str,
                role: str = "viewer") -> dict[str, Any]:
    response = client.post(f"{PIPELINES}/{name}/plan-update", headers=tenant.auth(role),
                           json={"sql": sql})
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_added_output_columns_keep_the_state(client: TestClient, tenant: TenantKeys) -> None:
    ran(client, tenant, "p")
    plan = plan_update(client, tenant, "p", ADDED_COLUMNS)
    assert plan["verdict"] == "compatible" and plan["state_version"] == 1
    [window] = plan["operators"]
    assert window["operator"] == "q0_window" and window["kind"] == "window"
    assert window["status"] == "kept" and window["reasons"] == []
    assert window["label"] == "TUMBLE 5 s by k: count(*) AS n"
    assert plan["dropped"] == []
    assert "can resume from the state of version 1" in plan["message"]


@pytest.mark.parametrize(("sql", "reason"), [
    (WIDER_WINDOW, "its window changed: TUMBLE 5 s → TUMBLE 10 s"),
    (OTHER_KEY, "its GROUP BY keys changed: subtask_index → counter % 7"),
], ids=["window width", "group by key"])
def test_a_changed_window_or_key_cannot_keep_the_state(client: TestClient, tenant: TenantKeys,
                                                       sql: str, reason: str) -> None:
    ran(client, tenant, "p")
    plan = plan_update(client, tenant, "p", sql)
    assert plan["verdict"] == "incompatible"
    [window] = plan["dropped"]
    assert window["operator"] == "q0_window" and window["status"] == "changed"
    assert window["reasons"] == [reason]
    assert reason in plan["message"] and "restart without state" in plan["message"]


def test_a_new_query_starts_empty_and_a_removed_one_drops_its_state(
        client: TestClient, tenant: TenantKeys) -> None:
    ran(client, tenant, "p")
    grown = plan_update(client, tenant, "p", ANOTHER_QUERY)
    assert grown["verdict"] == "compatible" and grown["dropped"] == []
    assert [(o["operator"], o["status"]) for o in grown["operators"]] == [
        ("q0_window", "kept"), ("q1_window", "new")]

    shrunk = plan_update(client, tenant, "p", STATELESS)
    assert shrunk["verdict"] == "compatible"
    [removed] = shrunk["dropped"]
    assert removed["operator"] == "q0_window" and removed["status"] == "removed"
    assert "the state of q0_window is no longer read" in shrunk["message"]


def test_a_pipeline_that_never_ran_has_no_state_to_keep(client: TestClient,
                                                        tenant: TenantKeys) -> None:
    created = client.post(PIPELINES, headers=tenant.auth("developer"),
                          json={"name": "fresh", "sql": WINDOWED, "stopped": True})
    assert created.status_code == 201, created.text
    plan = plan_update(client, tenant, "fresh", WIDER_WINDOW)
    assert plan["verdict"] == "compatible" and plan["state_version"] is None
    assert [o["status"] for o in plan["operators"]] == ["new"]
    assert "has not run yet" in plan["message"]


def test_the_state_is_the_latest_jobs_not_the_current_versions(client: TestClient,
                                                               tenant: TenantKeys) -> None:
    ran(client, tenant, "p")
    added = client.post(f"{PIPELINES}/p/versions", headers=tenant.auth("developer"),
                        json={"sql": WIDER_WINDOW})
    assert added.status_code == 201, added.text
    # The job still ran version 1: the current version's own SQL cannot keep its state.
    assert plan_update(client, tenant, "p", WIDER_WINDOW)["verdict"] == "incompatible"
    assert plan_update(client, tenant, "p", WINDOWED)["verdict"] == "compatible"


def test_bad_requests_are_4xx_in_the_one_error_shape(client: TestClient,
                                                     tenant: TenantKeys) -> None:
    ran(client, tenant, "p")
    path = f"{PIPELINES}/p/plan-update"
    invalid = client.post(path, headers=tenant.auth(), json={"sql": "SELEC 1"})
    assert invalid.status_code == 400 and error_of(invalid)["code"] == "invalid_sql"
    assert error_of(invalid)["details"][0]["line"] == 1
    bare = client.post(path, headers=tenant.auth(), json={"sql": WINDOWED.split("INSERT")[0]
                                                          + "SELECT counter FROM src"})
    assert bare.status_code == 400 and "INSERT INTO" in error_of(bare)["message"]
    missing = client.post(f"{PIPELINES}/nope/plan-update", headers=tenant.auth(),
                          json={"sql": WINDOWED})
    assert missing.status_code == 404 and error_of(missing)["code"] == "not_found"
    for body in ({}, {"sql": ""}, {"sql": WINDOWED, "state": "keep"}, [1]):
        response = client.post(path, headers=tenant.auth(), json=body)
        assert response.status_code == 422, (body, response.text)
        assert error_of(response)["code"] == "validation_failed"
    assert client.post(path, json={"sql": WINDOWED}).status_code == 401


def test_another_tenants_pipeline_is_not_found(client: TestClient, tenant: TenantKeys,
                                               tenant_factory: Callable[[], TenantKeys]) -> None:
    ran(client, tenant, "p")
    other = tenant_factory()
    for path, body in ((f"{PIPELINES}/p/plan-update", {"sql": WINDOWED}),
                       (f"{PIPELINES}/validate", {"sql": WINDOWED, "pipeline": "p"})):
        response = client.post(path, headers=other.auth(), json=body)
        assert response.status_code == 404, response.text
        assert error_of(response)["code"] == "not_found"


def test_validate_with_a_pipeline_gives_the_same_verdict(client: TestClient,
                                                         tenant: TenantKeys) -> None:
    ran(client, tenant, "p")
    for sql, verdict in ((ADDED_COLUMNS, "compatible"), (OTHER_KEY, "incompatible")):
        answer = client.post(f"{PIPELINES}/validate", headers=tenant.auth("viewer"),
                             json={"sql": sql, "pipeline": "p"}).json()
        assert answer["valid"] is True and answer["plan"]["nodes"]
        assert answer["state"] == plan_update(client, tenant, "p", sql)
        assert answer["state"]["verdict"] == verdict
    plain = client.post(f"{PIPELINES}/validate", headers=tenant.auth(),
                        json={"sql": OTHER_KEY}).json()
    assert plain["valid"] is True and plain["state"] is None
    invalid = client.post(f"{PIPELINES}/validate", headers=tenant.auth(),
                          json={"sql": "SELEC 1", "pipeline": "p"}).json()
    assert invalid["valid"] is False and invalid["state"] is None


def test_a_restart_keeping_state_the_new_sql_cannot_read_is_refused(
        client: TestClient, tenant: TenantKeys) -> None:
    dev = tenant.auth("developer")
    pipeline_id = ran(client, tenant, "p")
    # keep a job running version 1: the refusal must come before it is asked to stop
    insert_job(client.app, tenant.id, pipeline_id, state="running", pipeline_version=1)
    assert client.post(f"{PIPELINES}/p/versions", headers=dev,
                       json={"sql": OTHER_KEY}).status_code == 201
    refused = client.post(f"{PIPELINES}/p/restart", headers=dev, json={"with_state": True})
    assert refused.status_code == 409, refused.text
    error = error_of(refused)
    assert error["code"] == "state_incompatible"
    assert "cannot restart on version 2 keeping its state" in error["message"]
    assert error["message"].endswith("restart without state to run it")
    [dropped] = error["details"]
    assert dropped["operator"] == "q0_window" and dropped["status"] == "changed"
    assert dropped["reasons"] == ["its GROUP BY keys changed: subtask_index → counter % 7"]
    assert read_pipeline(client.app, pipeline_id).restart_generation == 0  # nothing asked
    # the default body keeps state too
    assert client.post(f"{PIPELINES}/p/restart", headers=dev).status_code == 409

    dropped_ok = client.post(f"{PIPELINES}/p/restart", headers=dev, json={"with_state": False})
    assert dropped_ok.status_code == 202, dropped_ok.text
    assert dropped_ok.json()["restart_generation"] == 1


def test_a_restart_on_sql_that_keeps_the_state_goes_ahead(client: TestClient,
                                                          tenant: TenantKeys) -> None:
    dev = tenant.auth("developer")
    ran(client, tenant, "p")
    assert client.post(f"{PIPELINES}/p/versions", headers=dev,
                       json={"sql": ADDED_COLUMNS}).status_code == 201
    restarted = client.post(f"{PIPELINES}/p/restart", headers=dev, json={"with_state": True})
    assert restarted.status_code == 202, restarted.text
    # a pipeline that never ran restarts (starts) with whatever SQL it has
    client.post(PIPELINES, headers=dev, json={"name": "fresh", "sql": WINDOWED,
                                              "stopped": True})
    client.post(f"{PIPELINES}/fresh/versions", headers=dev, json={"sql": OTHER_KEY})
    assert client.post(f"{PIPELINES}/fresh/restart", headers=dev).status_code == 202
