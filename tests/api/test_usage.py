"""GET /api/v1/usage: a tenant's usage by minute or day, per pipeline and dimension, with
totals; only the tenant's admin (and the operator's platform key) may read it, and a
tenant never sees another's."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from spate.scheduler.metering import COMPUTE_UNIT_SECONDS, EVENTS_IN
from tests.api.job_rows import insert_job, insert_usage
from tests.api.support import TenantKeys, TestClient, error_of, pipeline_sql, platform_auth

V1 = "/api/v1"
DAY1 = datetime(2026, 10, 5, 23, 58, tzinfo=UTC)


@pytest.fixture
def metered_tenant(client: TestClient, tenant_factory: Callable[[], TenantKeys]
                   ) -> tuple[TenantKeys, str]:
    tenant = tenant_factory()
    created = client.post(f"{V1}/pipelines", headers=tenant.auth("developer"),
                          json={"name": "clicks", "sql": pipeline_sql()})
    assert created.status_code == 201, created.text
    pipeline_id = created.json()["id"]
    # Two runs over a midnight, and a preview.
    insert_usage(client.app, tenant.id, pipeline_id, [
        (DAY1, COMPUTE_UNIT_SECONDS, 30.0), (DAY1 + timedelta(minutes=1), EVENTS_IN, 100)])
    insert_usage(client.app, tenant.id, pipeline_id, [
        (DAY1 + timedelta(minutes=2), COMPUTE_UNIT_SECONDS, 12.5),
        (DAY1, COMPUTE_UNIT_SECONDS, 1.5)])
    insert_usage(client.app, tenant.id, None, [(DAY1, COMPUTE_UNIT_SECONDS, 4.0)])
    return tenant, pipeline_id


def _usage(client: TestClient, headers: dict[str, str], **query: str) -> dict[str, object]:
    response = client.get(f"{V1}/usage", headers=headers, params=query)
    assert response.status_code == 200, response.text
    body: dict[str, object] = response.json()
    return body


def test_usage_by_day_sums_each_pipelines_runs_and_the_previews(
        client: TestClient, metered_tenant: tuple[TenantKeys, str]) -> None:
    tenant, pipeline_id = metered_tenant
    body = _usage(client, tenant.auth(), start="2026-10-01T00:00:00Z",
                  end="2026-11-01T00:00:00Z")
    items = {(item["period_start"][:10], item["pipeline_id"], item["dimension"]):  # type: ignore[index]
             item["quantity"] for item in body["items"]}  # type: ignore[attr-defined]
    assert items == {
        ("2026-10-05", pipeline_id, COMPUTE_UNIT_SECONDS): 31.5,
        ("2026-10-05", None, COMPUTE_UNIT_SECONDS): 4.0,
        ("2026-10-06", pipeline_id, COMPUTE_UNIT_SECONDS): 12.5,
        ("2026-10-05", pipeline_id, EVENTS_IN): 100,
    }
    assert body["totals"] == {COMPUTE_UNIT_SECONDS: 48.0, EVENTS_IN: 100}
    names = {item["pipeline_name"] for item in body["items"]}  # type: ignore[attr-defined]
    assert names == {"clicks", None}


def test_a_deleted_pipelines_usage_keeps_its_name_and_says_it_is_deleted(
        client: TestClient, tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    developer = tenant.auth("developer")

    def metered(name: str) -> str:
        created = client.post(f"{V1}/pipelines", headers=developer,
                              json={"name": name, "sql": pipeline_sql(), "stopped": True})
        assert created.status_code == 201, created.text
        pipeline_id: str = created.json()["id"]
        job = insert_job(client.app, tenant.id, pipeline_id, state="stopped")
        insert_usage(client.app, tenant.id, pipeline_id, [(DAY1, EVENTS_IN, 7)], job)
        return pipeline_id

    gone = metered("clicks")
    assert client.delete(f"{V1}/pipelines/clicks", headers=developer).status_code == 204
    # A new pipeline of the same name is another pipeline: its usage is not the old one's.
    again = metered("clicks")
    body = _usage(client, tenant.auth(), start="2026-10-01T00:00:00Z",
                  end="2026-11-01T00:00:00Z")
    shown = {(item["pipeline_id"], item["pipeline_name"], item["pipeline_deleted"])  # type: ignore[index]
             for item in body["items"]}  # type: ignore[attr-defined]
    assert shown == {(gone, "clicks", True), (again, "clicks", False)}


def test_usage_by_minute_filtered_by_pipeline_and_dimension(
        client: TestClient, metered_tenant: tuple[TenantKeys, str]) -> None:
    tenant, pipeline_id = metered_tenant
    body = _usage(client, tenant.auth(), granularity="minute", pipeline_id=pipeline_id,
                  dimension=COMPUTE_UNIT_SECONDS, start="2026-10-05T23:00:00Z",
                  end="2026-10-06T01:00:00Z")
    minutes = [(item["period_start"], item["quantity"])  # type: ignore[index]
               for item in body["items"]]  # type: ignore[attr-defined]
    assert [(at[11:16], quantity) for at, quantity in minutes] == [
        ("23:58", 31.5), ("00:00", 12.5)]


def test_only_the_tenants_admin_and_the_operator_read_usage(
        client: TestClient, metered_tenant: tuple[TenantKeys, str],
        tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant, _pipeline = metered_tenant
    for role in ("developer", "viewer"):
        refused = client.get(f"{V1}/usage", headers=tenant.auth(role))
        assert refused.status_code == 403
        assert "admin or billing role" in error_of(refused)["message"]
    other = tenant_factory()
    assert _usage(client, other.auth(), start="2026-10-01T00:00:00Z")["items"] == []
    operator = _usage(client, platform_auth(), start="2026-10-01T00:00:00Z",
                      tenant_id=tenant.id)
    assert operator["totals"] == {COMPUTE_UNIT_SECONDS: 48.0, EVENTS_IN: 100}
    assert {item["tenant_id"] for item in operator["items"]} == {tenant.id}  # type: ignore[attr-defined]
    mixed = client.get(f"{V1}/usage", headers=tenant.auth(), params={"tenant_id": other.id})
    assert mixed.status_code == 400


@pytest.mark.parametrize(("query", "status"), [
    ({"granularity": "minute", "start": "2026-10-01T00:00:00Z",
      "end": "2026-10-05T00:00:00Z"}, 400),
    ({"start": "2026-10-05T00:00:00Z", "end": "2026-10-01T00:00:00Z"}, 400),
    ({"granularity": "hour"}, 422),
    ({"dimension": "gold"}, 422),
])
def test_bad_usage_queries_get_a_clear_4xx(client: TestClient,
                                           tenant_factory: Callable[[], TenantKeys],
                                           query: dict[str, str], status: int) -> None:
    response = client.get(f"{V1}/usage", headers=tenant_factory().auth(), params=query)
    assert response.status_code == status, response.text
    assert error_of(response)["message"]
