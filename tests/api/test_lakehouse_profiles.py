"""A connection profile for the ``delta`` and ``iceberg`` sinks, through the API.

Saved as a tenant saves one, then *Test*: the delta profile looks at its path in
the tenant's storage root, the iceberg one connects to its SQL catalog on the real
PostgreSQL (the egress policy allows loopback here); the catalog password is a
write-only secret that never comes back, not even in a failure.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI

from tests.api.support import TenantKeys, TestClient, new_tenant

pytestmark = pytest.mark.e2e  # each /test runs a check in the tenant's compute unit

PROFILES = "/api/v1/connection-profiles"
PASSWORD = f"pw-{secrets.token_hex(6)}"


@pytest.fixture
def client(make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    app = make_app("sqlite", egress_allow="127.0.0.1")
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def _profile_test(client: TestClient, tenant: TenantKeys, connector: str,
                  config: dict[str, str], secret: dict[str, str]) -> dict[str, Any]:
    name = f"{connector}-{secrets.token_hex(3)}"
    created = client.post(PROFILES, headers=tenant.auth("developer"), json={
        "name": name, "connector": connector, "config": config, "secrets": secret})
    assert created.status_code == 201, created.text
    assert PASSWORD not in created.text
    checked = client.post(f"{PROFILES}/{name}/test", headers=tenant.auth("developer"))
    assert checked.status_code == 200, checked.text
    assert PASSWORD not in checked.text
    return dict(checked.json())


def test_lakehouse_profiles_reach_their_storage_and_catalog(client: TestClient) -> None:
    tenant = new_tenant(client)
    delta = _profile_test(client, tenant, "delta", {"path": "lake/orders"}, {})
    assert delta["ok"] is True and "first write creates it" in delta["message"], delta
    outside = _profile_test(client, tenant, "delta", {"path": "/etc/lake"}, {})
    assert outside["ok"] is False and "outside your storage" in outside["message"], outside

    catalog = {"catalog.uri": "postgresql+psycopg://postgres@127.0.0.1:5432/test",
               "catalog.name": f"spate_test_{secrets.token_hex(4)}",
               "catalog.warehouse": "lake/warehouse", "namespace": "sales",
               "table_name": "orders"}
    iceberg = _profile_test(client, tenant, "iceberg", catalog, {"catalog.password": PASSWORD})
    assert iceberg["ok"] is True, iceberg
    assert "will be created on the first write" in iceberg["message"], iceberg
    down = _profile_test(client, tenant, "iceberg",
                         catalog | {"catalog.uri": "postgresql+psycopg://me@127.0.0.1:1/test"},
                         {"catalog.password": PASSWORD})
    assert down["ok"] is False and "127.0.0.1:1" in down["message"], down
