"""The control plane against a hostile tenant: unstorable text, guessed keys, SQL that
is expensive to plan, and what reaches the logs."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest
from fastapi import FastAPI

from spate.api.security import SECRET_CHARS
from tests.api.support import (
    TenantKeys,
    TestClient,
    error_of,
    new_tenant,
    pipeline_sql,
    platform_auth,
)

NUL = "\u0000"


def long_expression(terms: int) -> str:
    """A pipeline whose one expression has ``terms`` terms: slow and deep to plan."""
    added = "+".join(["counter"] * terms)
    return ("CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');\n"
            f"SELECT {added} AS total FROM src;\n")


@pytest.fixture
def tenant(client: TestClient) -> TenantKeys:
    return new_tenant(client)


@pytest.mark.parametrize("body", [
    json.dumps({"name": f"bad{NUL}name", "sql": pipeline_sql()}),
    json.dumps({"name": "fine", "description": f"a{NUL}b", "sql": pipeline_sql()}),
    json.dumps({"name": "fine", "sql": pipeline_sql() + f"-- {NUL}"}),
    # A lone surrogate is valid JSON (an escape) but not text a database can store.
    '{"name": "fine", "sql": "SELECT 1 -- \\ud800"}',
])
def test_unstorable_text_in_a_body_is_a_422_naming_where(client: TestClient, tenant: TenantKeys,
                                                         body: str) -> None:
    response = client.post("/api/v1/pipelines", content=body.encode(), headers={
        **tenant.auth("developer"), "Content-Type": "application/json"})
    assert response.status_code == 422, response.text
    error = error_of(response)
    assert error["code"] == "invalid_text"
    assert error["details"][0]["location"].startswith("body.")


def test_unstorable_text_in_the_url_is_a_422(client: TestClient, tenant: TenantKeys) -> None:
    for url in ("/api/v1/pipelines/a%00b", "/api/v1/pipelines?name_prefix=a%00",
                "/api/v1/pipelines?name_prefix=%ff"):
        response = client.get(url, headers=tenant.auth("viewer"))
        assert response.status_code == 422, (url, response.text)
        assert error_of(response)["code"] == "invalid_text"


def test_a_failed_statement_never_logs_its_parameters(
        client: TestClient, tenant: TenantKeys, caplog: pytest.LogCaptureFixture) -> None:
    secret_sql = pipeline_sql("do-not-log-this-sql")
    with caplog.at_level(logging.DEBUG):
        created = client.post("/api/v1/pipelines", headers=tenant.auth("developer"),
                              json={"name": "p1", "sql": secret_sql, "stopped": True})
        assert created.status_code == 201, created.text
        again = client.post("/api/v1/pipelines", headers=tenant.auth("developer"),
                            json={"name": "p1", "sql": secret_sql, "stopped": True})
        assert again.status_code == 409
    assert "do-not-log-this-sql" not in caplog.text


def test_failed_authentications_are_throttled_per_client(
        backend: str, make_app: Callable[..., FastAPI]) -> None:
    app = make_app(backend, auth_failures_per_minute=3, redis_url=None)
    with TestClient(app, client=("203.0.113.7", 40000)) as attacker, \
            TestClient(app, client=("198.51.100.9", 40000)) as bystander:
        tenant = new_tenant(bystander)
        statuses = [attacker.get("/api/v1/me", headers={
            "Authorization": f"Bearer spate_guess{i:02d}_{'x' * 30}"}).status_code
            for i in range(6)]
        assert statuses[:3] == [401, 401, 401]
        assert statuses[3:] == [429, 429, 429]
        # While throttled even the right key is refused from that client ...
        blocked = attacker.get("/api/v1/me", headers=tenant.auth())
        assert blocked.status_code == 429
        assert error_of(blocked)["code"] == "too_many_failed_authentications"
        assert int(blocked.headers["Retry-After"]) >= 1
        # ... and another client is not affected.
        assert bystander.get("/api/v1/me", headers=tenant.auth()).status_code == 200


def test_guessing_one_key_from_many_clients_is_throttled_per_key(
        backend: str, make_app: Callable[..., FastAPI]) -> None:
    app = make_app(backend, auth_failures_per_minute=3, redis_url=None)
    with TestClient(app, client=("198.51.100.1", 1)) as setup:
        tenant = new_tenant(setup)
    key_id = tenant.key_ids["admin"]
    statuses = []
    for i in range(5):
        with TestClient(app, client=(f"203.0.113.{i + 10}", 1)) as guesser:
            statuses.append(guesser.get("/api/v1/me", headers={
                "Authorization": f"Bearer spate_{key_id}_{'y' * SECRET_CHARS}"}).status_code)
    assert statuses == [401, 401, 401, 429, 429]


def test_a_plan_over_its_time_budget_is_a_422_naming_it(
        backend: str, make_app: Callable[..., FastAPI]) -> None:
    app = make_app(backend, plan_timeout_s=0.01)
    with TestClient(app) as client:
        tenant = new_tenant(client)
        response = client.post("/api/v1/pipelines/validate", headers=tenant.auth("viewer"),
                               json={"sql": long_expression(20_000)})
        assert response.status_code == 422, response.text
        error = error_of(response)
        assert error["code"] == "planning_budget_exceeded"
        assert "budget of 0.01 s" in error["message"]
        # The pool replaced the stopped worker: the next plan is answered.
        fine = client.post("/api/v1/pipelines/validate", headers=tenant.auth("viewer"),
                           json={"sql": pipeline_sql()})
        assert fine.status_code in (200, 422)


def test_a_pathological_expression_never_takes_the_api_down(client: TestClient,
                                                           tenant: TenantKeys) -> None:
    sql = long_expression(20_000)
    response = client.post("/api/v1/pipelines/validate", headers=tenant.auth("viewer"),
                           json={"sql": sql})
    assert response.status_code in (200, 422), response.text
    if response.status_code == 200:
        assert response.json()["valid"] in (True, False)
    assert client.get("/api/v1/me", headers=tenant.auth("viewer")).status_code == 200


def test_a_server_without_a_sandbox_serves_one_tenant(
        backend: str, make_app: Callable[..., FastAPI]) -> None:
    with TestClient(make_app(backend, sandbox="off")) as client:
        response = client.post("/api/v1/tenants", json={"name": "second"},
                               headers=platform_auth())
        assert response.status_code == 409
        assert "SPATE_SANDBOX=off" in error_of(response)["message"]
