"""Prometheus scrapes: a tenant's own figures at /api/v1/metrics, every tenant's at /metrics."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.api.job_rows import insert_history, insert_job, insert_usage
from tests.api.support import TenantKeys, TestClient, error_of, pipeline_sql, platform_auth

V1 = "/api/v1"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _scrape(client: TestClient, path: str, headers: dict[str, str]) -> Samples:
    response = client.get(path, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.text)
            for sample in family.samples}


def _value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def _names_in(samples: Samples, label: str = "pipeline") -> set[str]:
    return {value for (_, labels) in samples for key, value in labels if key == label}


def _pipeline(client: TestClient, tenant: TenantKeys, name: str, **extra: Any) -> str:
    response = client.post(f"{V1}/pipelines", headers=tenant.auth("developer"),
                           json={"name": name, "sql": pipeline_sql(), **extra})
    assert response.status_code == 201
    return str(response.json()["id"])


@pytest.fixture
def two_tenants(client: TestClient,
                tenant_factory: Callable[[], TenantKeys]) -> tuple[TenantKeys, TenantKeys]:
    """A tenant with a running pipeline (two runs), an idle one and a stopped one; another
    tenant with a pipeline of its own."""
    mine, theirs = tenant_factory(), tenant_factory()
    clicks = _pipeline(client, mine, "clicks")
    _pipeline(client, mine, "idle")
    _pipeline(client, mine, "parked", stopped=True)
    old = insert_job(client.app, mine.id, clicks, state="stopped")
    insert_history(client.app, mine.id, old, checkpoints=3, rows_in=100, rows_out=10)
    current = insert_job(client.app, mine.id, clicks, state="running", last_epoch=2, metrics={
        "epoch": 2, "rows_in": 50, "rows_out": 5, "duration_ms": 100, "busy_ratio": 0.5,
        "state_bytes": 4096, "watermark_us": int((time.time() - 120) * 1_000_000),
        "rows_in_per_s": 500.0, "rows_out_per_s": 50.0})
    insert_history(client.app, mine.id, current, checkpoints=2, rows_in=50, rows_out=5)
    insert_job(client.app, mine.id, None, state="running")  # a preview is not a pipeline run
    secret = insert_job(client.app, theirs.id, _pipeline(client, theirs, "their-secret-flow"),
                        state="failed")
    insert_history(client.app, theirs.id, secret, checkpoints=1)
    return mine, theirs


def test_a_tenant_scrapes_its_own_pipelines(client: TestClient,
                                            two_tenants: tuple[TenantKeys, TenantKeys]) -> None:
    mine, _ = two_tenants
    samples = _scrape(client, f"{V1}/metrics", mine.auth("viewer"))

    assert _names_in(samples) == {"clicks", "idle", "parked"}
    assert "tenant" not in {key for (_, labels) in samples for key, _ in labels}
    assert _value(samples, "spate_pipeline_rows_in_total", pipeline="clicks") == 400
    assert _value(samples, "spate_pipeline_rows_out_total", pipeline="clicks") == 40
    assert _value(samples, "spate_pipeline_rows_in_total", pipeline="idle") == 0
    assert _value(samples, "spate_pipeline_rows_per_second", pipeline="clicks",
                  direction="in") == 500
    assert _value(samples, "spate_pipeline_rows_per_second", pipeline="clicks",
                  direction="out") == 50
    assert _value(samples, "spate_job_state", pipeline="clicks", state="running") == 1
    assert _value(samples, "spate_job_state", pipeline="clicks", state="stopped") == 0
    assert _value(samples, "spate_pipeline_last_epoch", pipeline="clicks") == 2
    assert 119 <= _value(samples, "spate_pipeline_watermark_lag_seconds",
                         pipeline="clicks") <= 200
    assert _value(samples, "spate_pipeline_backpressure", pipeline="clicks") == 0.5
    assert _value(samples, "spate_pipeline_state_bytes", pipeline="clicks") == 4096
    assert _value(samples, "spate_pipeline_desired_running", pipeline="parked") == 0
    assert _value(samples, "spate_pipeline_desired_running", pipeline="idle") == 1
    # A pipeline that never ran has totals but no job series.
    assert not any(name == "spate_job_state" and ("pipeline", "idle") in labels
                   for name, labels in samples)


def test_a_tenant_never_sees_another_tenants_pipelines(
        client: TestClient, two_tenants: tuple[TenantKeys, TenantKeys]) -> None:
    mine, theirs = two_tenants
    for role in ("viewer", "developer", "admin"):
        response = client.get(f"{V1}/metrics", headers=mine.auth(role))
        assert "their-secret-flow" not in response.text and theirs.id not in response.text
    their_samples = _scrape(client, f"{V1}/metrics", theirs.auth("viewer"))
    assert _names_in(their_samples) == {"their-secret-flow"}
    assert _value(their_samples, "spate_job_state", pipeline="their-secret-flow",
                  state="failed") == 1


def test_the_platform_scrapes_every_tenant(client: TestClient,
                                           two_tenants: tuple[TenantKeys, TenantKeys]) -> None:
    mine, theirs = two_tenants
    samples = _scrape(client, "/metrics", platform_auth())

    assert _value(samples, "spate_pipeline_rows_in_total", tenant=mine.id,
                  pipeline="clicks") == 400
    assert _value(samples, "spate_job_state", tenant=theirs.id, pipeline="their-secret-flow",
                  state="failed") == 1
    assert {mine.id, theirs.id} <= _names_in(samples, "tenant")
    assert _value(samples, "spate_tenants") >= 2
    assert _value(samples, "spate_pipelines", desired_state="stopped") >= 1
    assert _value(samples, "spate_pipelines", desired_state="running") >= 3
    assert _value(samples, "spate_jobs", kind="preview", state="running") >= 1
    assert _value(samples, "spate_jobs", kind="run", state="failed") >= 1


def test_scrapes_need_the_right_key(client: TestClient,
                                    two_tenants: tuple[TenantKeys, TenantKeys]) -> None:
    mine, _ = two_tenants
    for role in ("viewer", "developer", "admin"):
        refused = client.get("/metrics", headers=mine.auth(role))
        assert refused.status_code == 403
        assert "/api/v1/metrics" in error_of(refused)["message"]
        assert "clicks" not in refused.text
    assert client.get("/metrics").status_code == 401
    assert client.get(f"{V1}/metrics").status_code == 401
    assert client.get(f"{V1}/metrics", headers=platform_auth()).status_code == 403


def test_metered_usage_is_a_counter_per_pipeline_and_per_tenant_for_the_operator(
        client: TestClient, tenant_factory: Callable[[], TenantKeys]) -> None:
    mine, theirs = tenant_factory(), tenant_factory()
    clicks = _pipeline(client, mine, "clicks")
    minute = datetime(2026, 11, 2, 8, 0, tzinfo=UTC)
    insert_usage(client.app, mine.id, clicks, [(minute, "compute_unit_seconds", 90.0),
                                   (minute, "events_in", 1000)])
    insert_usage(client.app, mine.id, None, [(minute, "compute_unit_seconds", 10.0)])
    samples = _scrape(client, f"{V1}/metrics", mine.auth("viewer"))
    assert _value(samples, "spate_usage_total", pipeline="clicks",
                  dimension="compute_unit_seconds") == 90.0
    assert _value(samples, "spate_usage_total", pipeline="",
                  dimension="compute_unit_seconds") == 10.0
    assert _value(samples, "spate_usage_total", pipeline="clicks", dimension="events_in") == 1000
    theirs_samples = _scrape(client, f"{V1}/metrics", theirs.auth("viewer"))
    assert not [key for key in theirs_samples if key[0] == "spate_usage_total"]
    platform = _scrape(client, "/metrics", platform_auth())
    assert _value(platform, "spate_usage_total", tenant=mine.id,
                  dimension="compute_unit_seconds") == 100.0
