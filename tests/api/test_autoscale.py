"""A pipeline's autoscale range through the API: set on create or PATCH, off with null,
kept consistent with its parallelism, and the autoscaler's last decision shown."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from spate.api.repositories.control import SqlControlStore
from tests.api.job_rows import database_of
from tests.api.support import TenantKeys, TestClient, error_of, pipeline_sql

PIPELINES = "/api/v1/pipelines"


@pytest.fixture
def tenant(tenant_factory: Callable[[], TenantKeys]) -> TenantKeys:
    return tenant_factory()


def _create(client: TestClient, tenant: TenantKeys, name: str, **extra: object) -> dict:
    response = client.post(PIPELINES, headers=tenant.auth("developer"),
                           json={"name": name, "sql": pipeline_sql(), "stopped": True, **extra})
    assert response.status_code == 201, response.text
    return dict(response.json())


def _patch(client: TestClient, tenant: TenantKeys, name: str, body: dict) -> dict:
    response = client.patch(f"{PIPELINES}/{name}", headers=tenant.auth("developer"), json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_range_given_on_create_starts_the_pipeline_at_its_minimum(
        client: TestClient, tenant: TenantKeys) -> None:
    created = _create(client, tenant, "auto", autoscale={"min": 2, "max": 6})
    assert created["parallelism"] == 2
    assert created["autoscale"] == {"min": 2, "max": 6, "last_decision": None,
                                    "last_decision_at": None}
    assert _create(client, tenant, "manual")["autoscale"] is None


def test_patch_sets_moves_and_turns_off_the_range(client: TestClient,
                                                  tenant: TenantKeys) -> None:
    _create(client, tenant, "p", parallelism=5)
    # A range that leaves the parallelism out brings it in.
    assert _patch(client, tenant, "p", {"autoscale": {"min": 1, "max": 3}})["parallelism"] == 3
    moved = _patch(client, tenant, "p", {"autoscale": {"min": 2, "max": 4}})
    assert (moved["parallelism"], moved["autoscale"]["max"]) == (3, 4)
    assert _patch(client, tenant, "p", {"description": "kept"})["autoscale"]["min"] == 2
    off = _patch(client, tenant, "p", {"autoscale": None})
    assert (off["autoscale"], off["parallelism"]) == (None, 3)


def test_a_parallelism_outside_the_range_is_refused_with_the_way_out(
        client: TestClient, tenant: TenantKeys) -> None:
    _create(client, tenant, "p", autoscale={"min": 1, "max": 2})
    dev = tenant.auth("developer")
    for response in (client.patch(f"{PIPELINES}/p", headers=dev, json={"parallelism": 4}),
                     client.post(f"{PIPELINES}/p/rescale", headers=dev,
                                 json={"parallelism": 4})):
        assert response.status_code == 400, response.text
        message = error_of(response)["message"]
        assert "outside the pipeline's autoscale range 1–2" in message
        assert "autoscale: null" in message
    # Inside it, a parallelism set by hand holds until the autoscaler decides again.
    assert _patch(client, tenant, "p", {"parallelism": 2})["parallelism"] == 2


@pytest.mark.parametrize("autoscale", [{"min": 4, "max": 2}, {"min": 0, "max": 2},
                                       {"min": 1}, {"min": 1, "max": 2, "step": 1}])
def test_a_bad_range_is_a_422(client: TestClient, tenant: TenantKeys,
                              autoscale: dict) -> None:
    response = client.post(PIPELINES, headers=tenant.auth("developer"),
                           json={"name": "p", "sql": pipeline_sql(), "autoscale": autoscale})
    assert response.status_code == 422, response.text


def test_the_autoscalers_decision_shows_until_the_parallelism_is_set_by_hand(
        client: TestClient, tenant: TenantKeys) -> None:
    created = _create(client, tenant, "p", autoscale={"min": 1, "max": 4})
    store = SqlControlStore(database_of(client.app))
    at = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    assert store.autoscale(created["id"], 2, "autoscale: 1 → 2: busy 95% of the time", at)
    shown = client.get(f"{PIPELINES}/p", headers=tenant.auth("viewer")).json()
    assert shown["parallelism"] == 2
    assert shown["autoscale"]["last_decision"] == "autoscale: 1 → 2: busy 95% of the time"
    assert shown["autoscale"]["last_decision_at"] == "2026-11-29T12:00:00Z"
    assert _patch(client, tenant, "p", {"parallelism": 3})["autoscale"]["last_decision"] is None
    # With autoscaling off, the autoscaler changes nothing.
    _patch(client, tenant, "p", {"autoscale": None})
    assert not store.autoscale(created["id"], 1, "autoscale: 3 → 1", at)
    assert client.get(f"{PIPELINES}/p", headers=tenant.auth()).json()["parallelism"] == 3
