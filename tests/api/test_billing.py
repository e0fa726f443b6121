"""Prices and bills: the price book, invoices (open while the month runs, frozen once
closed, JSON and CSV), budgets with alerts and a hard stop, and cost estimates."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from pydantic import ValidationError

from spate.api.models import Pipeline
from spate.api.repositories.control import SqlControlStore, add_usage
from spate.api.settings import Settings
from spate.scheduler.metering import COMPUTE_UNIT_SECONDS, CPU_SECONDS, EVENTS_IN
from spate.scheduler.store import UsageCharge
from tests.api.job_rows import database_of, insert_job, insert_usage
from tests.api.support import (
    TenantKeys,
    TestClient,
    error_of,
    new_tenant,
    pipeline_sql,
    platform_auth,
)

V1 = "/api/v1"
OCTOBER = datetime(2026, 10, 10, 12, 0, tzinfo=UTC)
#: 0.12 per SCU-hour until 15 October, 0.24 from then on.
TWO_VERSIONS = json.dumps([
    {"version": "v1", "effective_from": "2026-01-01", "currency": "EUR",
     "prices": {"compute_unit_seconds": 0.12, "events_in": 0.5}},
    {"version": "v2", "effective_from": "2026-10-15", "currency": "EUR",
     "prices": {"compute_unit_seconds": 0.24, "events_in": 0.5}},
])


@pytest.fixture
def priced(backend: str, make_app: Callable[..., FastAPI]) -> TestClient:
    with TestClient(make_app(backend, price_book=TWO_VERSIONS),
                    raise_server_exceptions=False) as test_client:
        yield test_client  # type: ignore[misc]


def _pipeline(client: TestClient, tenant: TenantKeys, name: str = "clicks",
              parallelism: int = 1) -> str:
    created = client.post(f"{V1}/pipelines", headers=tenant.auth("developer"),
                          json={"name": name, "sql": pipeline_sql(),
                                "parallelism": parallelism})
    assert created.status_code == 201, created.text
    return str(created.json()["id"])


def test_every_key_reads_the_price_book(priced: TestClient) -> None:
    tenant = new_tenant(priced)
    book = priced.get(f"{V1}/price-book", headers=tenant.auth("viewer"))
    assert book.status_code == 200, book.text
    body = book.json()
    assert [version["version"] for version in body["versions"]] == ["v1", "v2"]
    assert body["current"] == "v2"
    prices = {price["dimension"]: (price["unit"], price["price"])
              for price in body["versions"][1]["prices"]}
    assert prices[COMPUTE_UNIT_SECONDS] == ("SCU-hour", 0.24)
    assert prices["state_gb_seconds"][1] == 0.0  # left out of the version: free


def test_a_closed_months_invoice_prices_each_version_and_never_changes(
        priced: TestClient) -> None:
    tenant = new_tenant(priced)
    clicks = _pipeline(priced, tenant)
    # 2 SCU-hours before the price change, 1 after; 3 million rows read; a preview hour.
    insert_usage(priced.app, tenant.id, clicks, [
        (OCTOBER, COMPUTE_UNIT_SECONDS, 7200.0), (OCTOBER, EVENTS_IN, 3e6),
        (OCTOBER, CPU_SECONDS, 999.0),
        (OCTOBER + timedelta(days=10), COMPUTE_UNIT_SECONDS, 3600.0)])
    insert_usage(priced.app, tenant.id, None, [(OCTOBER, COMPUTE_UNIT_SECONDS, 3600.0)])
    response = priced.get(f"{V1}/invoices/2026-10", headers=tenant.auth())
    assert response.status_code == 200, response.text
    invoice = response.json()
    assert invoice["state"] == "closed" and invoice["currency"] == "EUR"
    lines = {(line["pipeline_name"], line["dimension"], line["price_book_version"]):
             (line["quantity"], line["amount"]) for line in invoice["lines"]}
    assert lines == {
        ("clicks", COMPUTE_UNIT_SECONDS, "v1"): (2.0, 0.24),
        ("clicks", COMPUTE_UNIT_SECONDS, "v2"): (1.0, 0.24),
        ("clicks", EVENTS_IN, "v1"): (3.0, 1.5),
        (None, COMPUTE_UNIT_SECONDS, "v1"): (1.0, 0.12),
    }  # CPU seconds are metered, not priced: compute is billed in SCU
    assert invoice["total"] == pytest.approx(2.1)

    # Usage that lands after the month closed does not change its invoice.
    insert_usage(priced.app, tenant.id, clicks, [(OCTOBER, COMPUTE_UNIT_SECONDS, 36000.0)])
    again = priced.get(f"{V1}/invoices/2026-10", headers=tenant.auth()).json()
    assert again == invoice

    as_csv = priced.get(f"{V1}/invoices/2026-10", headers=tenant.auth(),
                        params={"format": "csv"})
    assert as_csv.status_code == 200
    assert as_csv.headers["content-type"].startswith("text/csv")
    assert "spate-invoice-2026-10.csv" in as_csv.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(as_csv.text)))
    assert rows[-1]["dimension"] == "total" and float(rows[-1]["amount"]) == invoice["total"]
    assert sum(float(row["amount"]) for row in rows[:-1]) == pytest.approx(invoice["total"])


def test_the_current_months_invoice_is_open_and_grows(client: TestClient,
                                                      tenant_factory: Callable[[], TenantKeys]
                                                      ) -> None:
    tenant = tenant_factory()
    clicks = _pipeline(client, tenant)
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    period = f"{now.year:04d}-{now.month:02d}"
    insert_usage(client.app, tenant.id, clicks, [(now, COMPUTE_UNIT_SECONDS, 3600.0)])
    first = client.get(f"{V1}/invoices/{period}", headers=tenant.auth()).json()
    assert first["state"] == "open" and first["total"] == pytest.approx(0.12)
    insert_usage(client.app, tenant.id, clicks, [(now, COMPUTE_UNIT_SECONDS, 3600.0)])
    assert client.get(f"{V1}/invoices/{period}", headers=tenant.auth()).json()["total"] \
        == pytest.approx(0.24)
    listed = client.get(f"{V1}/invoices", headers=tenant.auth())
    assert listed.status_code == 200
    assert listed.json()[0]["period"] == period and listed.json()[0]["state"] == "open"


@pytest.mark.parametrize(("period", "status"), [("2026-13", 400), ("nov", 400), ("november", 422),
                                                 ("2999-01", 404)])
def test_bad_invoice_periods_get_a_clear_4xx(client: TestClient,
                                             tenant_factory: Callable[[], TenantKeys],
                                             period: str, status: int) -> None:
    response = client.get(f"{V1}/invoices/{period}", headers=tenant_factory().auth())
    assert response.status_code == status, response.text
    assert error_of(response)["message"]


def test_bills_are_the_tenant_admins(client: TestClient,
                                     tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    for path in ("/invoices", "/budget", "/invoices/2026-10"):
        assert client.get(f"{V1}{path}", headers=tenant.auth("developer")).status_code == 403
        assert client.get(f"{V1}{path}", headers=platform_auth()).status_code == 403


def test_a_budget_raises_each_alert_once_and_its_hard_stop_stops_the_pipelines(
        client: TestClient, tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    clicks = _pipeline(client, tenant)
    set_budget = client.put(f"{V1}/budget", headers=tenant.auth(),
                            json={"amount": 1.0, "thresholds": [50, 90], "hard_stop": True})
    assert set_budget.status_code == 200, set_budget.text
    store = SqlControlStore(database_of(client.app))
    now = datetime.now(UTC)

    five_scu_hours = [(now, COMPUTE_UNIT_SECONDS, 5 * 3600.0)]  # 0.60 each
    insert_usage(client.app, tenant.id, clicks, five_scu_hours)
    assert clicks not in store.enforce_budgets()
    store.enforce_budgets()  # again: no second alert
    budget = client.get(f"{V1}/budget", headers=tenant.auth()).json()
    assert budget["spent"] == pytest.approx(0.6)
    assert [(alert["kind"], alert["threshold"]) for alert in budget["alerts"]] == [
        ("threshold", 50)]

    insert_usage(client.app, tenant.id, clicks, five_scu_hours)  # 1.20 in all
    assert store.enforce_budgets() == [clicks]
    with database_of(client.app).sessions() as session:
        pipeline = session.get(Pipeline, clicks)
        assert pipeline is not None
        assert (pipeline.desired_state, pipeline.stop_mode) == ("stopped", "checkpoint")
    alerts = client.get(f"{V1}/budget", headers=tenant.auth()).json()["alerts"]
    assert [(alert["kind"], alert["threshold"]) for alert in alerts] == [
        ("threshold", 50), ("threshold", 90), ("hard_stop", 100)]

    # Nothing new starts while the budget is spent; stopping and reading still work.
    start = client.post(f"{V1}/pipelines/clicks/restart", headers=tenant.auth("developer"),
                        json={})
    assert start.status_code == 403, start.text
    error = error_of(start)
    assert error["code"] == "budget_exceeded" and "raise the budget" in error["message"]
    assert "/api/v1" not in error["message"]
    created = client.post(f"{V1}/pipelines", headers=tenant.auth("developer"),
                          json={"name": "more", "sql": pipeline_sql()})
    assert created.status_code == 403 and error_of(created)["code"] == "budget_exceeded"
    stopped = client.post(f"{V1}/pipelines", headers=tenant.auth("developer"),
                          json={"name": "later", "sql": pipeline_sql(), "stopped": True})
    assert stopped.status_code == 201, stopped.text
    raised = client.put(f"{V1}/budget", headers=tenant.auth(),
                        json={"amount": 5.0, "hard_stop": True})
    assert raised.status_code == 200
    assert client.post(f"{V1}/pipelines/clicks/restart", headers=tenant.auth("developer"),
                       json={}).status_code == 202

    assert client.delete(f"{V1}/budget", headers=tenant.auth()).status_code == 204
    assert client.get(f"{V1}/budget", headers=tenant.auth()).status_code == 404


@pytest.mark.parametrize("body", [{"amount": 0}, {"amount": 5, "thresholds": [0]},
                                  {"amount": 5, "thresholds": []}, {"thresholds": [50]}])
def test_bad_budgets_get_a_422(client: TestClient, tenant_factory: Callable[[], TenantKeys],
                               body: dict[str, object]) -> None:
    response = client.put(f"{V1}/budget", headers=tenant_factory().auth(), json=body)
    assert response.status_code == 422, response.text
    assert error_of(response)["message"]


def test_an_estimate_comes_from_the_last_weeks_runs(client: TestClient,
                                                    tenant_factory: Callable[[], TenantKeys]
                                                    ) -> None:
    tenant = tenant_factory()
    small = _pipeline(client, tenant, "small", parallelism=1)
    _pipeline(client, tenant, "big", parallelism=4)
    now = datetime.now(UTC)
    # A run of parallelism 1 for the last two hours that used 0.5 SCU throughout.
    job = insert_job(client.app, tenant.id, small, started_at=now - timedelta(hours=2),
                     ended_at=now)
    with database_of(client.app).sessions() as session:
        add_usage(session, [UsageCharge(job, tenant.id, small, now - timedelta(hours=1),
                                        COMPUTE_UNIT_SECONDS, 3600.0)])
        session.commit()
    estimate = client.get(f"{V1}/pipelines/big/estimate", headers=tenant.auth())
    assert estimate.status_code == 200, estimate.text
    body = estimate.json()
    assert body["compute_units"] == pytest.approx(2.0, rel=0.01)  # 0.5 per task × 4
    assert body["cost_per_hour"] == pytest.approx(0.24, rel=0.01)
    assert "tenant's runs" in body["basis"]
    missing = client.get(f"{V1}/pipelines/nope/estimate", headers=tenant.auth())
    assert missing.status_code == 404


def test_a_deleted_pipeline_keeps_its_name_on_the_bill_and_moves_no_estimate(
        client: TestClient, tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    now = datetime.now(UTC)
    # The usage falls in this month's invoice, also in a month's first 90 minutes (the
    # estimate sums usage and task-seconds over the week apart, so it may lie outside
    # its run).
    used_at = max(now - timedelta(minutes=90),
                  now.replace(day=1, hour=0, minute=0, second=0, microsecond=0))
    runs = {}
    for name, scu in (("kept", 1800.0), ("gone", 7200.0)):  # 0.5 and 2 SCU per task
        pipeline = _pipeline(client, tenant, name)
        job = insert_job(client.app, tenant.id, pipeline, state="stopped",
                         started_at=now - timedelta(hours=2), ended_at=now - timedelta(hours=1))
        insert_usage(client.app, tenant.id, pipeline,
                     [(used_at, COMPUTE_UNIT_SECONDS, scu)], job)
        runs[name] = pipeline
    _pipeline(client, tenant, "other", parallelism=2)
    client.patch(f"{V1}/pipelines/gone", headers=tenant.auth("developer"),
                 json={"desired_state": "stopped"})
    with database_of(client.app).sessions() as session:  # no scheduler runs here
        session.get(Pipeline, runs["gone"]).desired_state = "stopped"  # type: ignore[union-attr]
        session.commit()
    deleted = client.delete(f"{V1}/pipelines/gone", headers=tenant.auth("developer"))
    assert deleted.status_code == 204, deleted.text

    period = now.strftime("%Y-%m")
    invoice = client.get(f"{V1}/invoices/{period}", headers=tenant.auth()).json()
    named = {line["pipeline_id"]: line["pipeline_name"] for line in invoice["lines"]}
    assert named[runs["gone"]] == "gone" and named[runs["kept"]] == "kept"
    as_csv = client.get(f"{V1}/invoices/{period}", headers=tenant.auth(),
                        params={"format": "csv"}).text
    rows = list(csv.DictReader(io.StringIO(as_csv)))
    assert {row["pipeline_name"] for row in rows if row["pipeline_id"] == runs["gone"]} \
        == {"gone"}
    usage = client.get(f"{V1}/usage", headers=tenant.auth()).json()
    assert {row["pipeline_name"] for row in usage["items"]
            if row["pipeline_id"] == runs["gone"]} == {"gone"}
    # The estimate counts the kept runs only: usage and task-seconds alike.
    estimate = client.get(f"{V1}/pipelines/other/estimate", headers=tenant.auth()).json()
    assert estimate["compute_units"] == pytest.approx(1.0, rel=0.01)  # 0.5 per task × 2


def test_an_invalid_price_book_stops_the_server_at_start_with_the_reason() -> None:
    with pytest.raises(ValidationError, match="no such priced dimension: gold"):
        Settings(price_book=json.dumps([{"version": "x", "effective_from": "2026-01-01",
                                         "currency": "USD", "prices": {"gold": 1}}]))


def test_a_billing_key_reads_usage_and_bills_and_sets_the_budget_but_changes_nothing_else(
        client: TestClient, tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    _pipeline(client, tenant)
    made = client.post(f"{V1}/api-keys", headers=tenant.auth(),
                       json={"name": "finance", "role": "billing"})
    assert made.status_code == 201, made.text
    finance = {"Authorization": f"Bearer {made.json()['key']}"}
    for path in ("/usage", "/invoices", "/pipelines", "/quotas", "/price-book",
                 "/pipelines/clicks/estimate"):
        assert client.get(f"{V1}{path}", headers=finance).status_code == 200, path
    assert client.put(f"{V1}/budget", headers=finance, json={"amount": 50}).status_code == 200
    refused = client.post(f"{V1}/pipelines", headers=finance,
                          json={"name": "nope", "sql": pipeline_sql()})
    assert refused.status_code == 403
    assert "admin or developer role" in error_of(refused)["message"]
    assert client.get(f"{V1}/api-keys", headers=finance).status_code == 403
    assert client.delete(f"{V1}/pipelines/clicks", headers=finance).status_code == 403
