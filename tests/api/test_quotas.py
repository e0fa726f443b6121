"""Tenants' plans: every limit refuses the request one over it (403 ``quota_exceeded``, or
429 where live previews stand in the way) and admits the one at it; a lower plan harms
nothing that runs; ``GET /quotas`` reports the plan and the tenant's use.

The apps here run a small default plan (:data:`LIMITS`) and two named ones
(:data:`PLANS`); previews the scheduler would run are job rows written through
the models (tests/api/job_rows.py).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from fastapi import FastAPI
from sqlalchemy import make_url

from spate.api.ids import new_id
from spate.api.models import Pipeline, utc_now
from spate.api.planning.sql import PlannedSource
from spate.api.quotas import generator_rate, new_pipeline
from spate.api.repositories.quotas import QuotaRepository
from spate.api.settings import Settings
from tests.api.job_rows import database_of, insert_job
from tests.api.support import (
    TenantKeys,
    TestClient,
    error_of,
    new_tenant,
    pipeline_sql,
    platform_auth,
)

PIPELINES = "/api/v1/pipelines"
QUOTAS = "/api/v1/quotas"
#: The default plan of these tests' apps, as quota_* settings.
LIMITS = {"quota_pipelines": 3, "quota_running_pipelines": 2, "quota_compute_units": 4,
          "quota_parallelism": 3, "quota_previews": 1, "quota_source_rate": 1000}
PLANS = {"big": {"pipelines": 10, "running_pipelines": 5, "compute_units": 20,
                 "parallelism": 8, "previews": 3, "source_rate": 100_000},
         "tiny": {"running_pipelines": 1, "compute_units": 1}}


@pytest.fixture
def app(backend: str, make_app: Callable[..., FastAPI]) -> FastAPI:
    return make_app(backend, plans=json.dumps(PLANS), **LIMITS)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def tenant(client: TestClient) -> TenantKeys:
    return new_tenant(client)


def impulse_sql(event_rate: int | float) -> str:
    return (f"CREATE TABLE src WITH (connector = 'impulse', event_rate = '{event_rate}');\n"
            "CREATE TABLE out WITH (connector = 'blackhole');\n"
            "INSERT INTO out SELECT counter FROM src;\n")


def nexmark_sql(options: str) -> str:
    return (f"CREATE TABLE bids WITH (connector = 'nexmark', event_rate = '100', {options});\n"
            "CREATE TABLE out WITH (connector = 'blackhole');\n"
            "INSERT INTO out SELECT bid.price FROM bids WHERE bid IS NOT NULL;\n")


def create(client: TestClient, tenant: TenantKeys, name: str, *, parallelism: int = 1,
           stopped: bool = False, sql: str | None = None) -> Any:
    return client.post(PIPELINES, headers=tenant.auth("developer"), json={
        "name": name, "sql": sql or pipeline_sql(name), "parallelism": parallelism,
        "stopped": stopped})


def created(client: TestClient, tenant: TenantKeys, name: str, **options: Any) -> None:
    response = create(client, tenant, name, **options)
    assert response.status_code == 201, response.text


def refusal(response: Any, limit: str, status: int = 403) -> tuple[dict[str, Any], str]:
    """The details and message of a quota refusal of ``limit`` with ``status``."""
    assert response.status_code == status, response.text
    error = error_of(response)
    assert error["code"] == "quota_exceeded"
    [details] = error["details"]
    assert details["limit"] == limit
    assert "ask the operator" in error["message"]
    if status == 429:
        assert int(response.headers["Retry-After"]) >= 1
    else:
        assert "Retry-After" not in response.headers
    return details, str(error["message"])


def patch(client: TestClient, tenant: TenantKeys, name: str, body: dict[str, Any]) -> Any:
    return client.patch(f"{PIPELINES}/{name}", headers=tenant.auth("developer"), json=body)


def put_on_plan(client: TestClient, tenant: TenantKeys, plan: str | None) -> None:
    response = client.patch(f"/api/v1/tenants/{tenant.id}", headers=platform_auth(),
                            json={"plan": plan})
    assert response.status_code == 200, response.text


def uses(client: TestClient, tenant: TenantKeys) -> dict[str, tuple[int | None, int | None]]:
    response = client.get(QUOTAS, headers=tenant.auth("viewer"))
    assert response.status_code == 200, response.text
    return {row["limit"]: (row["value"], row["current"]) for row in response.json()["limits"]}


def preview(client: TestClient, tenant: TenantKeys, sql: str, parallelism: int = 1) -> Any:
    """A preview that times out after a second (no scheduler runs here)."""
    return client.post(f"{PIPELINES}/preview", headers=tenant.auth("developer"), json={
        "sql": sql, "parallelism": parallelism, "timeout_s": 1})


def live_preview(app: FastAPI, tenant: TenantKeys, parallelism: int = 1) -> str:
    """A preview job still streaming, as the scheduler would run it."""
    return insert_job(app, tenant.id, None, parallelism=parallelism)


# -- each limit: one over is refused, the one at it passes ---------------------------


def test_pipelines(client: TestClient, tenant: TenantKeys) -> None:
    for name in ("a", "b", "c"):
        created(client, tenant, name, stopped=True)  # the third reaches the limit
    details, message = refusal(create(client, tenant, "d", stopped=True), "pipelines")
    assert details == {"limit": "pipelines", "value": 3, "current": 3, "requested": 1}
    assert "plan 'default' allows 3 pipelines; the tenant has 3" in message
    assert "delete a pipeline" in message
    # PUT of an existing pipeline adds nothing, so it is answered as before.
    same = client.put(f"{PIPELINES}/a", headers=tenant.auth("developer"),
                      json={"sql": pipeline_sql("a")})
    assert same.status_code == 200
    assert client.delete(f"{PIPELINES}/a", headers=tenant.auth("developer")).status_code == 204
    created(client, tenant, "d", stopped=True)


def test_running_pipelines(client: TestClient, tenant: TenantKeys) -> None:
    created(client, tenant, "a")
    created(client, tenant, "b")  # the second running one reaches the limit
    details, message = refusal(create(client, tenant, "c"), "running_pipelines")
    assert details == {"limit": "running_pipelines", "value": 2, "current": 2, "requested": 1}
    assert "stop a pipeline" in message
    created(client, tenant, "c", stopped=True)  # a stopped one takes no running slot
    dev = tenant.auth("developer")
    for request in (lambda: patch(client, tenant, "c", {"stop": "none"}),
                    lambda: client.post(f"{PIPELINES}/c/restart", headers=dev),
                    lambda: client.post(f"{PIPELINES}/c/move", headers=dev,
                                        json={"cluster": "default"})):
        refusal(request(), "running_pipelines")
    assert client.get(f"{PIPELINES}/c", headers=dev).json()["desired_state"] == "stopped"
    assert patch(client, tenant, "a", {"stop": "checkpoint"}).status_code == 200
    assert patch(client, tenant, "c", {"stop": "none"}).status_code == 200


def test_compute_units(client: TestClient, tenant: TenantKeys) -> None:
    created(client, tenant, "wide", parallelism=3)
    details, message = refusal(create(client, tenant, "more", parallelism=2), "compute_units")
    assert details == {"limit": "compute_units", "value": 4, "current": 3, "requested": 2}
    assert "lower a parallelism" in message
    created(client, tenant, "one")  # 3 + 1: at the limit
    dev = tenant.auth("developer")
    refusal(client.post(f"{PIPELINES}/one/rescale", headers=dev, json={"parallelism": 2}),
            "compute_units")
    # Lowering is never refused, and makes room.
    lowered = client.post(f"{PIPELINES}/wide/rescale", headers=dev, json={"parallelism": 2})
    assert lowered.status_code == 202
    assert client.post(f"{PIPELINES}/one/rescale", headers=dev,
                       json={"parallelism": 2}).status_code == 202


def test_parallelism(app: FastAPI, client: TestClient, tenant: TenantKeys) -> None:
    details, message = refusal(create(client, tenant, "p", parallelism=4, stopped=True),
                               "parallelism")
    assert details == {"limit": "parallelism", "value": 3, "current": 4}
    assert "at most 3 per pipeline or preview" in message and "lower the parallelism" in message
    created(client, tenant, "p", parallelism=3, stopped=True)
    dev = tenant.auth("developer")
    refusal(patch(client, tenant, "p", {"parallelism": 4}), "parallelism")
    refusal(client.post(f"{PIPELINES}/p/rescale", headers=dev, json={"parallelism": 4}),
            "parallelism")
    refusal(preview(client, tenant, impulse_sql(10), parallelism=4), "parallelism")
    assert client.get(f"{PIPELINES}/p", headers=dev).json()["parallelism"] == 3
    # An autoscale range reaches no higher than one pipeline may run.
    refusal(patch(client, tenant, "p", {"autoscale": {"min": 1, "max": 4}}), "parallelism")
    refusal(client.post(PIPELINES, headers=dev, json={
        "name": "q", "sql": pipeline_sql("q"), "autoscale": {"min": 1, "max": 4},
        "stopped": True}), "parallelism")
    assert patch(client, tenant, "p", {"autoscale": {"min": 1, "max": 3}}).status_code == 200


def test_previews_and_their_compute_units_are_429s(app: FastAPI, client: TestClient,
                                                   tenant: TenantKeys) -> None:
    at_the_limit = preview(client, tenant, impulse_sql(10))  # the tenant's one preview
    assert at_the_limit.status_code == 200, at_the_limit.text
    assert "event: end" in at_the_limit.text  # it timed out, so it is no longer live

    live_preview(app, tenant)
    details, message = refusal(preview(client, tenant, impulse_sql(10)), "previews", 429)
    assert details == {"limit": "previews", "value": 1, "current": 1, "requested": 1}
    assert "Previews end by themselves: retry in a few seconds" in message

    # 3 units of a pipeline and 1 of the preview: a pipeline of 1 fits once it ends ...
    created(client, tenant, "wide", parallelism=3)
    details, message = refusal(create(client, tenant, "one"), "compute_units", 429)
    assert details == {"limit": "compute_units", "value": 4, "current": 4, "requested": 1}
    assert "Live previews hold 1 of them and end by themselves" in message
    # ... one of 2 does not fit even then: waiting does not help.
    refusal(create(client, tenant, "two", parallelism=2), "compute_units", 403)


def test_a_generator_above_the_source_rate_is_refused(app: FastAPI, client: TestClient,
                                                      tenant: TenantKeys) -> None:
    details, message = refusal(create(client, tenant, "fast", sql=impulse_sql(1001)),
                               "source_rate")
    assert details == {"limit": "source_rate", "value": 1000, "current": 1001, "table": "src"}
    assert "table 'src' (impulse) would produce 1001 events/s" in message
    assert "lower its event_rate" in message
    created(client, tenant, "at-limit", sql=impulse_sql(1000))

    refusal(preview(client, tenant, impulse_sql(2000)), "source_rate")
    refusal(client.post(f"{PIPELINES}/at-limit/versions", headers=tenant.auth("developer"),
                        json={"sql": impulse_sql(5000)}), "source_rate")

    details, message = refusal(create(client, tenant, "unpaced",
                                      sql=nexmark_sql("rate_limited = 'false'")), "source_rate")
    assert details["current"] is None and "without end" in message
    created(client, tenant, "replay", stopped=True,  # bounded: counted at its event_rate
            sql=nexmark_sql("rate_limited = 'false', runtime = '10'"))


def test_connection_tables_are_held_to_the_source_rate(client: TestClient,
                                                       tenant: TenantKeys) -> None:
    """A job reads its connection tables again whenever it restarts, even by itself: a
    generator table is checked when it is stored or its profile changes."""
    dev = tenant.auth("developer")
    tables, profiles = "/api/v1/connection-tables", "/api/v1/connection-profiles"
    details, _ = refusal(client.post(tables, headers=dev, json={
        "name": "fast", "connector": "impulse", "config": {"event_rate": 2000}}), "source_rate")
    assert details == {"limit": "source_rate", "value": 1000, "current": 2000, "table": "fast"}
    made = client.post(profiles, headers=dev, json={
        "name": "ticks", "connector": "impulse", "config": {"event_rate": 10}})
    assert made.status_code == 201, made.text
    made = client.post(tables, headers=dev, json={
        "name": "ticks", "connector": "impulse", "profile": "ticks"})
    assert made.status_code == 201, made.text
    refusal(client.patch(f"{profiles}/ticks", headers=dev,
                         json={"config": {"event_rate": 5000}}), "source_rate")
    kept = client.get(f"{profiles}/ticks", headers=dev).json()["config"]
    assert kept == {"event_rate": "10"}
    assert client.patch(f"{profiles}/ticks", headers=dev,
                        json={"config": {"event_rate": 1000}}).status_code == 200


def test_starting_checks_the_stored_sql_against_the_plan_now(client: TestClient,
                                                             tenant: TenantKeys) -> None:
    put_on_plan(client, tenant, "big")
    created(client, tenant, "fast", stopped=True, sql=impulse_sql(5000))
    put_on_plan(client, tenant, None)  # back on the default plan: 1000 events/s
    details, _ = refusal(patch(client, tenant, "fast", {"stop": "none"}), "source_rate")
    assert details["current"] == 5000


# -- plans ---------------------------------------------------------------------------


def test_a_lower_plan_harms_nothing_that_runs(client: TestClient, tenant: TenantKeys) -> None:
    put_on_plan(client, tenant, "big")
    for name in ("a", "b", "c", "d"):
        created(client, tenant, name, parallelism=2)
    put_on_plan(client, tenant, "tiny")  # the operator's action: never refused

    dev = tenant.auth("developer")
    listed = client.get(PIPELINES, headers=dev).json()["items"]
    assert [p["desired_state"] for p in listed] == ["running"] * 4
    assert uses(client, tenant)["running_pipelines"] == (1, 4)
    # New admissions are refused ...
    refusal(create(client, tenant, "e", stopped=True), "pipelines")
    refusal(client.post(f"{PIPELINES}/a/rescale", headers=dev, json={"parallelism": 3}),
            "compute_units")
    # ... while what adds nothing, or takes away, is not.
    assert client.post(f"{PIPELINES}/a/restart", headers=dev).status_code == 202
    assert patch(client, tenant, "a", {"description": "kept"}).status_code == 200
    assert client.post(f"{PIPELINES}/b/rescale", headers=dev,
                       json={"parallelism": 1}).status_code == 202
    assert patch(client, tenant, "c", {"stop": "checkpoint"}).status_code == 200
    refusal(patch(client, tenant, "c", {"stop": "none"}), "running_pipelines")
    assert client.delete(f"{PIPELINES}/c", headers=dev).status_code == 204


def test_the_platform_key_sets_plans_and_reads_any_tenants_quotas(
        client: TestClient, tenant: TenantKeys) -> None:
    unknown = client.patch(f"/api/v1/tenants/{tenant.id}", headers=platform_auth(),
                           json={"plan": "gold"})
    assert unknown.status_code == 400
    assert error_of(unknown)["details"] == [{"known_plans": ["default", "big", "tiny"]}]
    put_on_plan(client, tenant, "big")
    assert client.get(f"/api/v1/tenants/{tenant.id}",
                      headers=platform_auth()).json()["plan"] == "big"
    read = client.get(f"/api/v1/tenants/{tenant.id}/quotas", headers=platform_auth())
    assert read.status_code == 200 and read.json()["plan"] == "big"
    assert client.get("/api/v1/tenants/nope/quotas", headers=platform_auth()).status_code == 404
    # A tenant's key reads only its own quotas; the platform key has no tenant of its own.
    assert client.get(f"/api/v1/tenants/{tenant.id}/quotas",
                      headers=tenant.auth()).status_code == 403
    assert client.get(QUOTAS, headers=platform_auth()).status_code == 403
    put_on_plan(client, tenant, "default")
    assert client.get(QUOTAS, headers=tenant.auth()).json()["plan"] == "default"


def test_get_quotas_reports_the_plan_and_use(app: FastAPI, client: TestClient,
                                             tenant: TenantKeys) -> None:
    fresh = client.get(QUOTAS, headers=tenant.auth("viewer"))
    assert fresh.status_code == 200
    assert (fresh.json()["tenant_id"], fresh.json()["plan"]) == (tenant.id, "default")
    assert uses(client, tenant) == {
        "pipelines": (3, 0), "running_pipelines": (2, 0), "compute_units": (4, 0),
        "parallelism": (3, 0), "previews": (1, 0), "source_rate": (1000, None),
        "api_requests_per_minute": (1_000_000, None)}
    created(client, tenant, "runs", parallelism=2)
    created(client, tenant, "waits", parallelism=3, stopped=True)
    live_preview(app, tenant)
    assert uses(client, tenant) == {
        "pipelines": (3, 2), "running_pipelines": (2, 1), "compute_units": (4, 3),
        "parallelism": (3, 2), "previews": (1, 1), "source_rate": (1000, None),
        "api_requests_per_minute": (1_000_000, None)}


# -- floods and races ----------------------------------------------------------------


def test_a_flood_of_creates_stops_at_the_limit(client: TestClient, tenant: TenantKeys) -> None:
    statuses = [create(client, tenant, f"flood-{i}").status_code for i in range(12)]
    assert statuses == [201] * 2 + [403] * 10
    stopped = [create(client, tenant, f"quiet-{i}", stopped=True) for i in range(12)]
    assert [r.status_code for r in stopped] == [201] + [403] * 11
    details, message = refusal(stopped[-1], "pipelines")
    assert details["current"] == 3 and "allows 3 pipelines" in message
    assert len(client.get(PIPELINES, headers=tenant.auth()).json()["items"]) == 3


def test_concurrent_creates_do_not_both_take_the_last_slot(client: TestClient,
                                                           tenant: TenantKeys) -> None:
    created(client, tenant, "first", stopped=True)
    created(client, tenant, "second", stopped=True)
    start = threading.Barrier(4)
    statuses: list[int] = []

    def race(index: int) -> None:
        start.wait()
        statuses.append(create(client, tenant, f"racer-{index}", stopped=True).status_code)

    racers = [threading.Thread(target=race, args=(i,)) for i in range(4)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(60)
    assert sorted(statuses) == [201, 403, 403, 403]
    assert len(client.get(PIPELINES, headers=tenant.auth()).json()["items"]) == 3


def test_an_admission_waits_for_the_tenant_row_lock(make_app: Callable[..., FastAPI]) -> None:
    """While one transaction holds a tenant's last slot, another's admission waits for it
    (PostgreSQL: a row lock, seen in pg_stat_activity) and then counts its row."""
    app = make_app("postgresql", quota_pipelines=1)
    with TestClient(app, raise_server_exceptions=False) as client:
        tenant = new_tenant(client)
        with database_of(app).sessions() as holder:
            QuotaRepository(holder, tenant.id, app.state.spate.plans).admit(
                new_pipeline(1, running=False, sources=()))
            holder.add(Pipeline(id=new_id(), tenant_id=tenant.id, name="held",
                                created_at=utc_now(), updated_at=utc_now()))
            holder.flush()
            answers: list[Any] = []
            waiter = threading.Thread(target=lambda: answers.append(
                create(client, tenant, "waits", stopped=True)))
            waiter.start()
            _wait_for_a_lock_waiter(str(database_of(app).engine.url))
            holder.commit()
        waiter.join(60)
    details, _ = refusal(answers[0], "pipelines")
    assert details["current"] == 1


def _wait_for_a_lock_waiter(url: str) -> None:
    conninfo = make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)
    deadline = time.monotonic() + 30
    with psycopg.connect(conninfo, autocommit=True) as connection:
        while True:
            waiting = connection.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock'").fetchone()
            if waiting is not None and waiting[0] > 0:
                return
            assert time.monotonic() < deadline, "no admission waited for the tenant's lock"
            time.sleep(0.05)


# -- the request rate ----------------------------------------------------------------


def test_a_plans_request_rate_applies_to_its_tenants(backend: str,
                                                     make_app: Callable[..., FastAPI]) -> None:
    plans = {"slow": {"api_requests_per_minute": 1}}
    with TestClient(make_app(backend, plans=json.dumps(plans)),
                    raise_server_exceptions=False) as client:
        slow, other = new_tenant(client), new_tenant(client)
        put_on_plan(client, slow, "slow")
        assert client.get(QUOTAS, headers=slow.auth()).status_code == 200
        limited = client.get(QUOTAS, headers=slow.auth())
        assert limited.status_code == 429 and error_of(limited)["code"] == "rate_limited"
        assert client.get(QUOTAS, headers=other.auth()).status_code == 200
        # The platform key's own actions are not held to the tenant's plan.
        for _ in range(3):
            assert client.get(f"/api/v1/tenants/{slow.id}/quotas",
                              headers=platform_auth()).status_code == 200


# -- settings and rates, without a server --------------------------------------------


@pytest.mark.parametrize(("plans", "complaint"), [
    ('{"default": {"pipelines": 1}}', "'default' is the plan of the quota_* settings"),
    ('{"pro": {"pipelnes": 5}}', "pro.pipelnes"),
    ('{"pro": {"parallelism": 0}}', "pro.parallelism"),
    ('{"Pro": {}}', "should match pattern"),
    ("[]", "Input should be an object"),
])
def test_bad_plans_stop_the_server_from_starting(plans: str, complaint: str) -> None:
    with pytest.raises(ValueError, match="plans") as refused:
        Settings(plans=plans)
    assert complaint in str(refused.value)


@pytest.mark.parametrize(("connector", "options", "bounded", "rate"), [
    ("impulse", {"event_rate": "250.5"}, False, 250.5),
    ("nexmark", {"event_rate": "100"}, False, 100.0),
    ("nexmark", {"event_rate": "100", "rate_limited": "false", "runtime": "5"}, True, 100.0),
    ("nexmark", {"event_rate": "100", "rate_limited": "false"}, False, float("inf")),
    ("single_file", {"path": "x.jsonl", "format": "json"}, True, None),
])
def test_generator_rates(connector: str, options: dict[str, str], bounded: bool,
                         rate: float | None) -> None:
    assert generator_rate(PlannedSource("t", connector, options, bounded)) == rate
