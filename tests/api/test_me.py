"""GET /me (who a key is) and GET /connectors (what SQL may declare): the console's
sign-in and catalog."""

from __future__ import annotations

import pytest

from tests.api.support import ROLES, TestClient, error_of, new_tenant, platform_auth


@pytest.mark.parametrize("role", ROLES)
def test_me_names_the_keys_tenant_name_and_role(client: TestClient, role: str) -> None:
    tenant = new_tenant(client)
    response = client.get("/api/v1/me", headers=tenant.auth(role))
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["tenant_id"], body["tenant"], body["key_id"], body["role"]) == (
        tenant.id, tenant.name, tenant.key_ids[role], role)
    if role != "admin":  # the tenant's first admin key is named by the platform
        assert body["key_name"] == f"{role} key"
    assert tenant.keys[role] not in response.text  # never the secret


def test_me_refuses_the_platform_key_and_strangers(client: TestClient) -> None:
    platform = client.get("/api/v1/me", headers=platform_auth())
    assert platform.status_code == 403 and error_of(platform)["code"] == "forbidden"
    anonymous = client.get("/api/v1/me")
    assert anonymous.status_code == 401 and error_of(anonymous)["code"] == "unauthenticated"


def test_connectors_lists_what_sql_may_declare(client: TestClient) -> None:
    tenant = new_tenant(client)
    response = client.get("/api/v1/connectors", headers=tenant.auth("viewer"))
    assert response.status_code == 200, response.text
    roles = {c["name"]: c["roles"] for c in response.json()["items"]}
    assert roles["impulse"] == ["source"] and roles["blackhole"] == ["sink"]
    assert roles["single_file"] == ["sink", "source"]
    assert "preview" not in roles  # the engine's implicit sink cannot be declared
    # Each connector's options, as the console's connection forms show them.
    options = {c["name"]: {o["name"]: o for o in c["options"]}
               for c in response.json()["items"]}
    path = options["single_file"]["path"]
    assert (path["roles"], path["secret"], path["required"], path["kind"]) == (
        ["sink", "source"], False, True, "text")
    assert "tenant's storage root" in path["description"]
    assert options["single_file"]["event_time_field"]["roles"] == ["source"]
    assert options["postgres"]["password"]["secret"] is True
    # What a form needs to offer a field: its type, choices and default.
    bad_data = options["kafka"]["bad_data"]
    assert (bad_data["kind"], bad_data["choices"], bad_data["default"], bad_data["required"]) \
        == ("choice", ["fail", "drop", "dead_letter"], "fail", False)
    assert options["impulse"]["event_rate"]["required"] is True
    assert options["blackhole"]["type"]["choices"] == ["source", "sink"]
    assert all(option["description"] for connector in options.values()
               for option in connector.values()), "an option without a meaning"