"""Keys, roles and the platform key over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from sqlalchemy import select

from spate.api.db import create_database
from spate.api.models import ApiKey
from tests.api.support import (
    PLATFORM_KEY,
    TenantKeys,
    TestClient,
    error_of,
    pipeline_sql,
    platform_auth,
)

PIPELINES = "/api/v1/pipelines"
KEYS = "/api/v1/api-keys"


@pytest.mark.parametrize("headers", [
    {},
    {"Authorization": "Bearer"},
    {"Authorization": "Basic dXNlcjpwYXNz"},
    {"Authorization": "Bearer not-a-key"},
    {"Authorization": "Bearer spate_01m82jh63y3yjkvhbt69sdwqpn_" + "a" * 43},
])
def test_missing_or_wrong_keys_are_401(client: TestClient, headers: dict[str, str]) -> None:
    response = client.get(PIPELINES, headers=headers)
    assert response.status_code == 401
    assert error_of(response)["code"] == "unauthenticated"
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_a_right_id_with_a_wrong_secret_is_401(client: TestClient,
                                               tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    token = tenant.keys["viewer"]
    forged = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    response = client.get(PIPELINES, headers={"Authorization": f"Bearer {forged}"})
    assert response.status_code == 401


def test_the_key_is_shown_once_and_stored_hashed(client: TestClient, backend: str,
                                                 migrated_urls: dict[str, str],
                                                 tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    created = client.post(KEYS, headers=tenant.auth(), json={"name": "ci", "role": "developer"})
    assert created.status_code == 201
    token, key_id = created.json()["key"], created.json()["id"]
    assert created.json()["prefix"] == token[:len("spate_") + 26 + 5]

    listed = client.get(KEYS, headers=tenant.auth()).json()["items"]
    shown = next(k for k in listed if k["id"] == key_id)
    assert "key" not in shown and token not in str(listed)
    assert token not in client.get(f"{KEYS}/{key_id}", headers=tenant.auth()).text

    database = create_database(migrated_urls[backend])
    try:
        with database.sessions() as session:
            row = session.scalars(select(ApiKey).where(ApiKey.id == key_id)).one()
            assert token.split("_")[2] not in (row.secret_sha256, row.prefix)
            assert len(row.secret_sha256) == 64
    finally:
        database.dispose()


def test_a_revoked_key_stops_working_at_once(client: TestClient,
                                             tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    developer = tenant.auth("developer")
    assert client.get(PIPELINES, headers=developer).status_code == 200

    revoked = client.delete(f"{KEYS}/{tenant.key_ids['developer']}", headers=tenant.auth())
    assert revoked.status_code == 204

    response = client.get(PIPELINES, headers=developer)
    assert response.status_code == 401
    assert error_of(response)["message"] == "invalid or revoked API key"
    listed = client.get(KEYS, headers=tenant.auth()).json()["items"]
    assert tenant.key_ids["developer"] not in {k["id"] for k in listed}
    with_revoked = client.get(KEYS, params={"include_revoked": True}, headers=tenant.auth())
    entry = next(k for k in with_revoked.json()["items"] if k["id"] == tenant.key_ids["developer"])
    assert entry["revoked_at"] is not None
    # Revoking again is harmless; rotating a revoked key is refused.
    assert client.delete(f"{KEYS}/{tenant.key_ids['developer']}",
                         headers=tenant.auth()).status_code == 204
    rotate = client.post(f"{KEYS}/{tenant.key_ids['developer']}/rotate", headers=tenant.auth())
    assert rotate.status_code == 409


def test_rotation_replaces_the_secret_at_once(client: TestClient,
                                              tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    old = tenant.auth("viewer")
    rotated = client.post(f"{KEYS}/{tenant.key_ids['viewer']}/rotate", headers=tenant.auth())
    assert rotated.status_code == 200
    body = rotated.json()
    assert body["id"] == tenant.key_ids["viewer"] and body["role"] == "viewer"
    assert body["rotated_at"] is not None and body["key"] != tenant.keys["viewer"]
    assert client.get(PIPELINES, headers=old).status_code == 401
    new = {"Authorization": f"Bearer {body['key']}"}
    assert client.get(PIPELINES, headers=new).status_code == 200


def test_the_last_admin_key_cannot_be_revoked(client: TestClient,
                                              tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    response = client.delete(f"{KEYS}/{tenant.key_ids['admin']}", headers=tenant.auth())
    assert response.status_code == 409
    assert "last active admin key" in error_of(response)["message"]
    second = client.post(KEYS, headers=tenant.auth(), json={"name": "backup", "role": "admin"})
    assert client.delete(f"{KEYS}/{tenant.key_ids['admin']}",
                         headers=tenant.auth()).status_code == 204
    assert client.get(PIPELINES, headers=tenant.auth()).status_code == 401
    backup = {"Authorization": f"Bearer {second.json()['key']}"}
    assert client.get(KEYS, headers=backup).status_code == 200


def test_viewers_cannot_mutate(client: TestClient,
                               tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    client.post(PIPELINES, headers=tenant.auth("developer"),
                json={"name": "mine", "sql": pipeline_sql()})
    viewer = tenant.auth("viewer")
    attempts = [
        client.post(PIPELINES, headers=viewer, json={"name": "v", "sql": pipeline_sql()}),
        client.put(f"{PIPELINES}/v", headers=viewer, json={"sql": pipeline_sql()}),
        client.patch(f"{PIPELINES}/mine", headers=viewer, json={"parallelism": 2}),
        client.delete(f"{PIPELINES}/mine", headers=viewer),
        client.post(f"{PIPELINES}/mine/versions", headers=viewer, json={"sql": pipeline_sql("2")}),
        client.post(KEYS, headers=viewer, json={"name": "x", "role": "admin"}),
        client.delete(f"{KEYS}/{tenant.key_ids['viewer']}", headers=viewer),
        client.post(f"{KEYS}/{tenant.key_ids['viewer']}/rotate", headers=viewer),
    ]
    for response in attempts:
        assert response.status_code == 403, response.request.url
        assert error_of(response)["code"] == "forbidden"
    pipeline = client.get(f"{PIPELINES}/mine", headers=viewer).json()
    assert pipeline["version"] == 1 and pipeline["parallelism"] == 1
    assert client.get(f"{PIPELINES}/v", headers=viewer).status_code == 404


def test_developers_cannot_manage_keys(client: TestClient,
                                       tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    developer = tenant.auth("developer")
    assert client.get(KEYS, headers=developer).status_code == 403
    assert client.post(KEYS, headers=developer,
                       json={"name": "x", "role": "admin"}).status_code == 403


def test_the_platform_key_manages_tenants_only(client: TestClient,
                                               tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    assert client.get(PIPELINES, headers=platform_auth()).status_code == 403
    assert client.get(KEYS, headers=platform_auth()).status_code == 403
    for role in ("admin", "developer", "viewer"):
        assert client.get("/api/v1/tenants", headers=tenant.auth(role)).status_code == 403
        assert client.post("/api/v1/tenants", headers=tenant.auth(role),
                           json={"name": "sneaky"}).status_code == 403
    got = client.get(f"/api/v1/tenants/{tenant.id}", headers=platform_auth())
    assert got.status_code == 200 and got.json()["name"] == tenant.name


def test_tenant_names_are_unique(client: TestClient,
                                 tenant_factory: Callable[[], TenantKeys]) -> None:
    tenant = tenant_factory()
    again = client.post("/api/v1/tenants", headers=platform_auth(), json={"name": tenant.name})
    assert again.status_code == 409


def test_tenant_listing_pages(client: TestClient,
                              tenant_factory: Callable[[], TenantKeys]) -> None:
    made = {tenant_factory().id for _ in range(3)}
    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get("/api/v1/tenants", headers=platform_auth(), params=params).json()
        seen.extend(t["id"] for t in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert made <= set(seen) and len(seen) == len(set(seen)) and seen == sorted(seen)


def test_without_a_platform_key_no_one_creates_tenants(
        backend: str, make_app: Callable[..., object]) -> None:
    with TestClient(make_app(backend, platform_admin_key=None)) as bare:
        response = bare.post("/api/v1/tenants", json={"name": "x"},
                             headers={"Authorization": f"Bearer {PLATFORM_KEY}"})
        assert response.status_code == 401


def test_keys_never_reach_the_logs(client: TestClient, caplog: pytest.LogCaptureFixture,
                                   tenant_factory: Callable[[], TenantKeys]) -> None:
    caplog.set_level(logging.DEBUG)
    tenant = tenant_factory()
    client.post(f"{KEYS}/{tenant.key_ids['viewer']}/rotate", headers=tenant.auth())
    client.get(PIPELINES, headers={"Authorization": "Bearer " + tenant.keys["viewer"]})
    text = caplog.text
    for token in [*tenant.keys.values(), PLATFORM_KEY]:
        assert token not in text
