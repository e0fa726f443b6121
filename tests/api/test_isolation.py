"""Tenant isolation matrix: every endpoint × every role × another tenant's ids.

An attacker tenant, with each of its keys (and the platform key), calls every
operation of the OpenAPI document aimed at a victim tenant's pipeline, key or
tenant id. Each call must be refused (403 for a role that may not call it,
404 for the victim's ids) or act on the attacker's own tenant only — never
return or change the victim's data. A test also checks that the matrix covers
every operation, so a new route cannot skip it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi import FastAPI

from tests.api.job_rows import insert_history, insert_job, insert_usage
from tests.api.support import (
    ROLES,
    TenantKeys,
    TestClient,
    error_of,
    new_tenant,
    pipeline_sql,
    platform_auth,
)

V1 = "/api/v1"
#: The month of the victim's usage.
VICTIM_PERIOD = "2026-10"
#: A UDF file declaring a UDF named like the victim's pipeline (``{pipeline}``).
UDF_SOURCE = ("from spate.engine.udf import udf\n\n@udf\n"
              "def {pipeline}(x: int) -> int:\n    return x\n")


@dataclass(frozen=True)
class Victim:
    tenant: TenantKeys
    pipeline: str
    pipeline_id: str
    marker: str  # in the victim's SQL and description; must never reach the attacker
    job_id: str  # a run of the pipeline with history; its metrics name the marker

    def secrets(self) -> list[str]:
        """Strings whose appearance in an attacker's response would be a leak."""
        tokens = list(self.tenant.keys.values())
        return [self.marker, self.pipeline_id, self.tenant.id, self.tenant.name, *tokens]


@dataclass(frozen=True)
class Operation:
    """One operation of the API and what a tenant key of each role may do with it."""

    method: str
    path: str  # may name {pipeline}, {key_id}, {tenant_id}, {job_id}: the victim's
    min_role: str | None  # None: only the platform key may call it
    #: target: names victim ids | create: makes a row | upsert: sets the caller's own
    #: (200) | list | stateless | scrape: metrics | refused: a 400 before anything runs
    kind: str
    body: dict[str, Any] | None = None
    prefix: str = V1  # "" for the few routes outside /api/v1
    #: the platform key may call it too (the operator's view across tenants)
    platform_reads: bool = False

    def url(self, victim: Victim) -> str:
        return self.prefix + self.path.format(pipeline=victim.pipeline,
                                              key_id=victim.tenant.key_ids["developer"],
                                              tenant_id=victim.tenant.id, version=1,
                                              job_id=victim.job_id, period=VICTIM_PERIOD)


OPERATIONS = [
    Operation("POST", "/tenants", None, "create", {"name": "intruder"}),
    Operation("GET", "/tenants", None, "list"),
    Operation("GET", "/tenants/{tenant_id}", None, "target"),
    Operation("PATCH", "/tenants/{tenant_id}", None, "target", {"plan": None}),
    Operation("GET", "/tenants/{tenant_id}/quotas", None, "target"),
    Operation("POST", "/api-keys", "admin", "create", {"name": "mine", "role": "viewer"}),
    Operation("GET", "/api-keys", "admin", "list"),
    Operation("GET", "/api-keys/{key_id}", "admin", "target"),
    Operation("DELETE", "/api-keys/{key_id}", "admin", "target"),
    Operation("POST", "/api-keys/{key_id}/rotate", "admin", "target"),
    Operation("POST", "/pipelines/validate", "viewer", "stateless", {"sql": pipeline_sql()}),
    Operation("POST", "/pipelines", "developer", "create",
              {"name": "{pipeline}", "sql": pipeline_sql("attacker")}),
    Operation("GET", "/pipelines", "viewer", "list"),
    Operation("GET", "/pipelines/{pipeline}", "viewer", "target"),
    Operation("PUT", "/pipelines/{pipeline}", "developer", "create",
              {"sql": pipeline_sql("attacker")}),
    Operation("PATCH", "/pipelines/{pipeline}", "developer", "target", {"parallelism": 7}),
    Operation("DELETE", "/pipelines/{pipeline}", "developer", "target"),
    Operation("POST", "/pipelines/{pipeline}/versions", "developer", "target",
              {"sql": pipeline_sql("attacker-2")}),
    Operation("GET", "/pipelines/{pipeline}/versions", "viewer", "target"),
    Operation("GET", "/pipelines/{pipeline}/versions/{version}", "viewer", "target"),
    Operation("POST", "/pipelines/{pipeline}/plan-update", "viewer", "target",
              {"sql": pipeline_sql("attacker-3")}),
    Operation("POST", "/pipelines/{pipeline}/restart", "developer", "target",
              {"with_state": False}),
    Operation("POST", "/pipelines/{pipeline}/rescale", "developer", "target",
              {"parallelism": 3}),
    Operation("POST", "/pipelines/{pipeline}/move", "developer", "target",
              {"cluster": "default"}),
    Operation("GET", "/pipelines/{pipeline}/jobs", "viewer", "target"),
    # A preview runs in the caller's tenant; no scheduler runs here, so it times out.
    Operation("POST", "/pipelines/preview", "developer", "stateless",
              {"sql": pipeline_sql("attacker-preview"), "timeout_s": 1}),
    Operation("GET", "/jobs", "viewer", "list"),
    Operation("GET", "/jobs/{job_id}", "viewer", "target"),
    Operation("GET", "/jobs/{job_id}/events", "viewer", "target"),
    Operation("GET", "/jobs/{job_id}/checkpoints", "viewer", "target"),
    Operation("GET", "/jobs/{job_id}/errors", "viewer", "target"),
    Operation("GET", "/jobs/{job_id}/metrics", "viewer", "target"),
    Operation("GET", "/metrics", "viewer", "scrape"),
    Operation("GET", "/metrics", None, "scrape", prefix=""),
    # Connection profiles and tables: the victim owns one of each named like its pipeline.
    Operation("POST", "/connection-profiles", "developer", "create",
              {"name": "{pipeline}", "connector": "blackhole"}),
    Operation("GET", "/connection-profiles", "viewer", "list"),
    Operation("GET", "/connection-profiles/{pipeline}", "viewer", "target"),
    Operation("PATCH", "/connection-profiles/{pipeline}", "developer", "target",
              {"config": {"format": "raw_string"}}),
    Operation("DELETE", "/connection-profiles/{pipeline}", "developer", "target"),
    Operation("POST", "/connection-profiles/{pipeline}/test", "developer", "target"),
    # Checked before storing: an option no connector has is refused before anything runs.
    Operation("POST", "/connection-profiles/test", "developer", "refused",
              {"name": "{pipeline}", "connector": "single_file", "config": {"nope": "1"}}),
    Operation("POST", "/connection-tables", "developer", "create",
              {"name": "{pipeline}", "connector": "blackhole"}),
    Operation("GET", "/connection-tables", "viewer", "list"),
    Operation("GET", "/connection-tables/{pipeline}", "viewer", "target"),
    Operation("DELETE", "/connection-tables/{pipeline}", "developer", "target"),
    Operation("POST", "/connection-tables/{pipeline}/test", "developer", "target"),
    # The victim's profile is no profile of the caller's: refused, its secrets unused.
    Operation("POST", "/connection-tables/test", "developer", "refused",
              {"name": "{pipeline}", "connector": "single_file", "profile": "{pipeline}"}),
    # UDFs: the victim owns one named like its pipeline.
    Operation("POST", "/udfs/validate", "viewer", "stateless",
              {"name": "{pipeline}", "source": UDF_SOURCE}),
    Operation("POST", "/udfs", "developer", "create",
              {"name": "{pipeline}", "source": UDF_SOURCE}),
    Operation("GET", "/udfs", "viewer", "list"),
    Operation("GET", "/udfs/{pipeline}", "viewer", "target"),
    Operation("GET", "/udfs/{pipeline}/versions/{version}", "viewer", "target"),
    Operation("DELETE", "/udfs/{pipeline}", "developer", "target"),
    Operation("GET", "/connectors", "viewer", "stateless"),
    Operation("GET", "/me", "viewer", "stateless"),
    Operation("GET", "/quotas", "viewer", "stateless"),
    Operation("GET", "/usage", "admin", "stateless", platform_reads=True),
    Operation("GET", "/price-book", "viewer", "stateless", platform_reads=True),
    Operation("GET", "/invoices", "admin", "stateless"),
    Operation("GET", "/invoices/{period}", "admin", "stateless"),
    Operation("GET", "/budget", "admin", "target"),
    Operation("PUT", "/budget", "admin", "upsert", {"amount": 10}),
    Operation("DELETE", "/budget", "admin", "target"),
    Operation("GET", "/pipelines/{pipeline}/estimate", "admin", "target"),
]
RANK = {"viewer": 0, "developer": 1, "admin": 2}
#: Every operation with every tenant role, the platform key (on the tenants' own
#: operations) and no key at all.
CASES = [pytest.param(operation, caller, id=f"{operation.method} {operation.path} as {caller}")
         for operation in OPERATIONS for caller in (*ROLES, "platform", "anonymous")
         if not (caller == "platform" and operation.min_role is None)]


@pytest.fixture(scope="module")
def module_client(backend: str, make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    with TestClient(make_app(backend), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="module")
def victim(module_client: TestClient) -> Victim:
    tenant = new_tenant(module_client)
    marker = f"victim-secret-{secrets.token_hex(6)}"
    name = f"victim_{secrets.token_hex(4)}"  # also a valid connection-table name
    created = module_client.post(f"{V1}/pipelines", headers=tenant.auth("developer"), json={
        "name": name, "sql": pipeline_sql(marker), "description": marker})
    assert created.status_code == 201, created.text
    for resource, body in (
            ("connection-profiles", {"name": name, "connector": "single_file",
                                     "config": {"format": "json", "path": f"{marker}.jsonl"}}),
            ("connection-tables", {"name": name, "connector": "single_file", "profile": name,
                                   "config": {"type": "sink"}})):
        made = module_client.post(f"{V1}/{resource}", headers=tenant.auth("developer"), json=body)
        assert made.status_code == 201, made.text
    udf = module_client.post(f"{V1}/udfs", headers=tenant.auth("developer"), json={
        "name": name, "source": f"# {marker}\n" + UDF_SOURCE.format(pipeline=name)})
    assert udf.status_code == 201, udf.text
    pipeline_id = created.json()["id"]
    job_id = insert_job(module_client.app, tenant.id, pipeline_id, state="running",
                        metrics={"epoch": 2, "rows_in": 10, "operators": [
                            {"operator": f"source:{marker}", "kind": "source", "rows_out": 1}]})
    insert_history(module_client.app, tenant.id, job_id, checkpoints=2)
    insert_usage(module_client.app, tenant.id, pipeline_id, [
        (datetime(2026, 10, 3, 9, 0, tzinfo=UTC), "compute_unit_seconds", 3600.0)], job_id)
    return Victim(tenant=tenant, pipeline=name, pipeline_id=pipeline_id, marker=marker,
                  job_id=job_id)


@pytest.fixture(scope="module")
def attacker(module_client: TestClient) -> TenantKeys:
    """Shared by the calls that cannot change the attacker's own state."""
    return new_tenant(module_client)


def _expected(operation: Operation, caller: str) -> int:
    if caller == "anonymous":
        return 401
    if caller == "platform" and operation.platform_reads:
        return 200
    if operation.min_role is None or caller == "platform":
        return 403  # tenant keys on the tenants' resource, the platform key on tenant data
    if RANK[caller] < RANK[operation.min_role]:
        return 403
    return {"target": 404, "create": 201, "upsert": 200, "list": 200, "stateless": 200,
            "scrape": 200, "refused": 400}[operation.kind]


def _call(client: TestClient, operation: Operation, victim: Victim,
          headers: dict[str, str]) -> Any:
    body = operation.body
    if body is not None:
        body = {k: (v.format(pipeline=victim.pipeline) if isinstance(v, str) else v)
                for k, v in body.items()}
        if operation.path == "/tenants":
            body = {"name": f"intruder-{secrets.token_hex(4)}"}
    return client.request(operation.method, operation.url(victim), headers=headers, json=body)


def _assert_victim_intact(client: TestClient, victim: Victim) -> None:
    owner = victim.tenant.auth("viewer")
    pipeline = client.get(f"{V1}/pipelines/{victim.pipeline}", headers=owner)
    assert pipeline.status_code == 200
    body = pipeline.json()
    assert (body["id"], body["version"], body["parallelism"], body["description"]) == (
        victim.pipeline_id, 1, 1, victim.marker)
    assert victim.marker in body["sql"]
    assert (body["desired_state"], body["stop_mode"], body["restart_generation"]) == (
        "running", None, 0)
    assert body["job"]["id"] == victim.job_id and body["job"]["state"] == "running"
    keys = client.get(f"{V1}/api-keys", headers=victim.tenant.auth("admin")).json()["items"]
    assert {k["id"] for k in keys} == set(victim.tenant.key_ids.values())
    assert all(k["rotated_at"] is None for k in keys)
    for resource in ("connection-profiles", "connection-tables"):
        kept = client.get(f"{V1}/{resource}/{victim.pipeline}", headers=owner)
        assert kept.status_code == 200, kept.text
    profile = client.get(f"{V1}/connection-profiles/{victim.pipeline}", headers=owner).json()
    assert profile["config"] == {"format": "json", "path": f"{victim.marker}.jsonl"}
    udf = client.get(f"{V1}/udfs/{victim.pipeline}", headers=owner).json()
    assert udf["version"] == 1 and victim.marker in udf["source"]


@pytest.mark.parametrize(("operation", "caller"), CASES)
def test_another_tenants_ids_are_never_served(
        module_client: TestClient, victim: Victim, attacker: TenantKeys,
        operation: Operation, caller: str) -> None:
    # A create succeeds in the attacker's tenant; give it a fresh one so the
    # shared attacker never owns a pipeline named like the victim's.
    fresh = operation.kind in ("create", "upsert") and caller != "anonymous"
    tenant = new_tenant(module_client) if fresh else attacker
    if caller in ("platform", "anonymous"):
        headers = platform_auth() if caller == "platform" else {}
    else:
        headers = tenant.auth(caller)

    response = _call(module_client, operation, victim, headers)

    assert response.status_code == _expected(operation, caller), response.text
    operator_view = caller == "platform" and operation.platform_reads
    for secret in victim.secrets() if not operator_view else ():
        assert secret not in response.text
    if response.status_code >= 400:
        error_of(response)
    if operation.kind == "scrape":
        assert victim.pipeline not in response.text
    if operation.kind == "list" and response.status_code == 200:
        ids = {item["id"] for item in response.json()["items"]}
        assert not ids & {victim.pipeline_id, victim.job_id, *victim.tenant.key_ids.values()}
    if operation.kind == "create" and operation.path.startswith("/pipelines") \
            and response.status_code == 201:
        owned = module_client.get(f"{V1}/pipelines/{victim.pipeline}", headers=tenant.auth())
        assert owned.json()["id"] == response.json()["id"] != victim.pipeline_id
    _assert_victim_intact(module_client, victim)


def test_the_matrix_covers_every_operation(module_client: TestClient) -> None:
    document = module_client.get(f"{V1}/openapi.json").json()
    documented = {(method.upper(), path.replace("{name}", "{pipeline}"))
                  for path, item in document["paths"].items() for method in item}
    assert documented == {(o.method, o.prefix + o.path) for o in OPERATIONS}
