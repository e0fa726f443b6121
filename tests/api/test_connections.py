"""Connection profiles and tables: validation, write-only encrypted secrets, checks, catalog.

Against PostgreSQL and SQLite; secrets are looked for in the raw database rows.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from fastapi import FastAPI
from sqlalchemy import text

from spate.api.connections import split_options
from spate.api.crypto import SecretBox, SecretKeyMismatchError
from spate.api.db import create_database
from spate.api.http.errors import BadRequestError
from spate.api.models import ConnectionTable
from spate.api.planning.sql import PlanRequest, check_sql, plan_request
from spate.api.repositories.connections import ConnectionRepository, job_tables
from spate.api.settings import Settings
from spate.engine.planner import plan_pipeline
from spate.engine.planner.external import TableDefinition, tables_from_definitions
from tests.api.support import TenantKeys, TestClient, error_of, new_tenant, storage_root

V1 = "/api/v1"
PROFILES = f"{V1}/connection-profiles"
TABLES = f"{V1}/connection-tables"
KEY = Fernet.generate_key().decode()


@pytest.fixture
def keyed_client(backend: str, make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    with TestClient(make_app(backend, secret_key=KEY), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture
def tenant(keyed_client: TestClient) -> TenantKeys:
    return new_tenant(keyed_client)


@pytest.fixture
def raw_row(backend: str,
            migrated_urls: dict[str, str]) -> Iterator[Callable[[str, str], dict[str, str]]]:
    """The stored row of a profile or table, each column as text: what someone reading
    the database sees."""
    engine = create_database(migrated_urls[backend]).engine

    def read(table: str, row_id: str) -> dict[str, str]:
        with engine.connect() as connection:
            row = connection.execute(text(f"SELECT * FROM {table} WHERE id = :id"),
                                     {"id": row_id}).one()
        return {column: value if isinstance(value, str) else json.dumps(value, default=str)
                for column, value in row._mapping.items()}

    yield read
    engine.dispose()


def _secret_path(tmp_path: Path) -> str:
    """A path inside the tenant's storage root (it is relative to it), itself a secret."""
    del tmp_path
    return f"token-{secrets.token_hex(8)}/orders.jsonl"


def _profile(client: TestClient, tenant: TenantKeys, path: str, name: str = "files") -> Any:
    response = client.post(PROFILES, headers=tenant.auth("developer"), json={
        "name": name, "connector": "single_file", "config": {"format": "json"},
        "secrets": {"path": path}})
    assert response.status_code == 201, response.text
    return response.json()


def _orders(client: TestClient, tenant: TenantKeys, **extra: Any) -> Any:
    body = {"name": "orders", "connector": "single_file", "profile": "files",
            "config": {"type": "source", "event_time_field": "ts"},
            "fields": [{"name": "id", "type": "BIGINT", "nullable": False},
                       {"name": "price", "type": "DECIMAL(10, 2)"},
                       {"name": "ts", "type": "TIMESTAMP", "nullable": False}], **extra}
    return client.post(TABLES, headers=tenant.auth("developer"), json=body)


def test_secrets_are_write_only_and_encrypted_at_rest(
        keyed_client: TestClient, tenant: TenantKeys, tmp_path: Path,
        raw_row: Callable[[str, str], dict[str, str]]) -> None:
    path = _secret_path(tmp_path)
    created = _profile(keyed_client, tenant, path)
    assert created["secrets"] == {"path": "********"}
    assert created["config"] == {"format": "json"}

    shown = [keyed_client.get(f"{PROFILES}/files", headers=tenant.auth("viewer")),
             keyed_client.get(PROFILES, headers=tenant.auth("viewer"))]
    for response in shown:
        assert response.status_code == 200
        assert path not in response.text and "token-" not in response.text
    assert shown[1].json()["items"][0]["secrets"] == {"path": "********"}

    stored = raw_row("connection_profiles", created["id"])
    assert not any("token-" in value for value in stored.values())
    assert json.loads(stored["config"]) == {"format": "json"}  # plain options stay plain
    token = json.loads(stored["secrets"])["path"]
    assert SecretBox(Settings(secret_key=KEY).secret_key).decrypt(token) == path


@pytest.mark.e2e  # its /test runs a check in the tenant's compute unit
def test_patch_replaces_a_secret_without_echoing_it(
        keyed_client: TestClient, tenant: TenantKeys, tmp_path: Path,
        raw_row: Callable[[str, str], dict[str, str]]) -> None:
    created = _profile(keyed_client, tenant, _secret_path(tmp_path))
    new_path = _secret_path(tmp_path)
    written = storage_root(keyed_client, tenant.id) / new_path
    written.parent.mkdir()
    written.write_text('{"id": 1}\n')

    patched = keyed_client.patch(f"{PROFILES}/files", headers=tenant.auth("developer"),
                                 json={"secrets": {"path": new_path},
                                       "config": {"json.timestamp_format": "unix_millis"}})
    assert patched.status_code == 200, patched.text
    assert new_path not in patched.text
    assert patched.json()["secrets"] == {"path": "********"}
    assert patched.json()["config"] == {"format": "json",
                                        "json.timestamp_format": "unix_millis"}
    assert new_path not in json.dumps(raw_row("connection_profiles", created["id"]))
    # The new secret is the one in use: the file it names is found.
    checked = keyed_client.post(f"{PROFILES}/files/test", headers=tenant.auth("developer"))
    assert checked.json() == {"ok": True, "message": "file ******** is readable"}

    removed = keyed_client.patch(f"{PROFILES}/files", headers=tenant.auth("developer"),
                                 json={"config": {"json.timestamp_format": None}})
    assert removed.json()["config"] == {"format": "json"}


def test_options_sent_as_secrets_are_secret_and_credentials_need_a_known_option() -> None:
    options = split_options("single_file", {"format": "json"}, {"path": "p"})
    assert (options.plain, options.secret) == ({"format": "json"}, {"path": "p"})
    with pytest.raises(BadRequestError, match="unknown option 'password'") as caught:
        split_options("single_file", {"password": "hunter2"}, {})
    assert "hunter2" not in caught.value.message
    with pytest.raises(BadRequestError, match="given twice"):
        split_options("single_file", {"path": "a"}, {"path": "b"})


def test_a_wrong_key_fails_with_a_clear_message(
        backend: str, make_app: Callable[..., FastAPI], keyed_client: TestClient,
        tenant: TenantKeys, tmp_path: Path) -> None:
    path = _secret_path(tmp_path)
    _profile(keyed_client, tenant, path)
    other_key = Fernet.generate_key().decode()
    with TestClient(make_app(backend, secret_key=other_key),
                    raise_server_exceptions=False) as other:
        listed = other.get(f"{PROFILES}/files", headers=tenant.auth("viewer"))
        assert listed.status_code == 200  # reading never needs the key
        checked = other.post(f"{PROFILES}/files/test", headers=tenant.auth("developer"))
        assert checked.status_code == 200
        assert checked.json()["ok"] is False
        assert "cannot be decrypted with the configured key" in checked.json()["message"]
        assert path not in checked.text
        session = other.app.state.spate.database.sessions()  # type: ignore[attr-defined]
        try:
            repository = ConnectionRepository(session, tenant.id,
                                              other.app.state.spate.secret_box)  # type: ignore
            _orders(keyed_client, tenant)
            with pytest.raises(SecretKeyMismatchError, match="SPATE_SECRET_KEY"):
                repository.definitions()
        finally:
            session.close()


def test_invalid_keys_are_refused_at_start_without_echoing_them() -> None:
    with pytest.raises(ValueError, match="must be a Fernet key") as caught:
        Settings(secret_key="not-a-fernet-key-at-all")
    assert "not-a-fernet-key-at-all" not in str(caught.value)


def test_the_embedded_default_generates_a_private_key_file_once(tmp_path: Path) -> None:
    first = SecretBox(None, tmp_path / "data")
    token = first.encrypt("hunter2")
    key_file = tmp_path / "data" / "secret.key"
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert SecretBox(None, tmp_path / "data").decrypt(token) == "hunter2"
    assert "hunter2" not in key_file.read_text()


def test_unknown_options_connectors_and_types_are_named(
        keyed_client: TestClient, tenant: TenantKeys) -> None:
    dev = tenant.auth("developer")
    cases = [
        (PROFILES, {"name": "p", "connector": "single_file", "config": {"colour": "red"}},
         "unknown option 'colour'"),
        (PROFILES, {"name": "p", "connector": "fluvio"}, "unknown connector 'fluvio'"),
        (PROFILES, {"name": "p", "connector": "preview"}, "unknown connector 'preview'"),
        (TABLES, {"name": "t", "connector": "impulse", "config": {"event_rate": 5, "rows": 1}},
         "unknown option 'rows'"),
        (TABLES, {"name": "t", "connector": "impulse", "config": {}},
         "needs option 'event_rate'"),
        (TABLES, {"name": "t", "connector": "single_file",
                  "config": {"type": "source", "format": "json", "path": "x"},
                  "fields": [{"name": "a", "type": "WIDGET"}]}, "unsupported column type"),
        (TABLES, {"name": "t", "connector": "blackhole", "profile": "nope"},
         "connection profile 'nope' not found"),
    ]
    for url, body, message in cases:
        response = keyed_client.post(url, headers=dev, json=body)
        assert response.status_code == 400, (body, response.text)
        assert message in error_of(response)["message"]
    named = keyed_client.post(TABLES, headers=dev, json=cases[3][1])
    assert error_of(named)["details"] == [{"option": "rows", "in": "config"}]


@pytest.mark.e2e  # its /test runs a check in the tenant's compute unit
def test_a_profile_and_a_table_are_checked_before_they_are_stored(
        keyed_client: TestClient, tenant: TenantKeys, tmp_path: Path) -> None:
    developer = tenant.auth("developer")
    path = _secret_path(tmp_path)
    draft = {"name": "files", "connector": "single_file", "config": {"format": "json"},
             "secrets": {"path": path}}
    source = {"name": "orders", "connector": "single_file",
              "config": {"type": "source", "format": "json"}, "secrets": {"path": path},
              "fields": [{"name": "id", "type": "BIGINT"}]}
    missing = keyed_client.post(f"{TABLES}/test", headers=developer, json=source)
    assert missing.json() == {"ok": False, "message": "file ******** does not exist"}
    written = storage_root(keyed_client, tenant.id) / path
    written.parent.mkdir()
    written.write_text('{"id": 1, "ts": "2024-01-01T00:00:00Z"}\n')
    found = keyed_client.post(f"{PROFILES}/test", headers=developer, json=draft)
    assert found.json() == {"ok": True, "message": "file ******** is readable"}
    assert keyed_client.get(PROFILES, headers=developer).json()["items"] == []  # none stored

    # A table over a stored profile: the profile's secret is used, never shown.
    _profile(keyed_client, tenant, path)
    table = {"name": "orders", "connector": "single_file", "profile": "files",
             "config": {"type": "source"}, "fields": [{"name": "id", "type": "BIGINT"}]}
    checked = keyed_client.post(f"{TABLES}/test", headers=developer, json=table)
    assert checked.json()["ok"] is True and path not in checked.text
    assert keyed_client.get(TABLES, headers=developer).json()["items"] == []
    # What CREATE TABLE refuses is a failed check; what the request gets wrong, a 400.
    as_sink = {"type": "sink", "event_time_field": "id"}
    sink_only = keyed_client.post(f"{TABLES}/test", headers=developer,
                                  json={**table, "config": as_sink})
    assert sink_only.json()["ok"] is False and "event_time_field" in sink_only.json()["message"]
    unknown = keyed_client.post(f"{TABLES}/test", headers=developer,
                                json={**table, "config": {"no_such_option": "1"}})
    assert unknown.status_code == 400 and "no_such_option" in error_of(unknown)["message"]
    nowhere = keyed_client.post(f"{TABLES}/test", headers=developer,
                                json={**table, "profile": "nope"})
    assert nowhere.status_code == 400 and error_of(nowhere)["details"] == [{"field": "profile"}]
    viewer = keyed_client.post(f"{PROFILES}/test", headers=tenant.auth("viewer"), json=draft)
    assert viewer.status_code == 403


@pytest.mark.e2e  # its /test runs a check in the tenant's compute unit
def test_tables_validate_like_create_table_and_use_their_profile(
        keyed_client: TestClient, tenant: TenantKeys, tmp_path: Path) -> None:
    path = _secret_path(tmp_path)
    _profile(keyed_client, tenant, path)
    created = _orders(keyed_client, tenant)
    assert created.status_code == 201, created.text
    body = created.json()
    assert (body["role"], body["bounded"], body["profile"]) == ("source", True, "files")
    assert path not in created.text

    missing = keyed_client.post(f"{TABLES}/orders/test", headers=tenant.auth("developer"))
    assert missing.json() == {"ok": False, "message": "file ******** does not exist"}
    written = storage_root(keyed_client, tenant.id) / path
    written.parent.mkdir()
    written.write_text('{"id": 1, "ts": "2024-01-01T00:00:00Z"}\n')
    found = keyed_client.post(f"{TABLES}/orders/test", headers=tenant.auth("developer"))
    assert found.json()["ok"] is True

    # A profile change that would break the table is refused; the profile cannot go first.
    broken = keyed_client.patch(f"{PROFILES}/files", headers=tenant.auth("developer"),
                                json={"config": {"format": "raw_string"}})
    assert broken.status_code == 400
    assert "would break connection table 'orders'" in error_of(broken)["message"]
    in_use = keyed_client.delete(f"{PROFILES}/files", headers=tenant.auth("developer"))
    assert in_use.status_code == 409
    assert keyed_client.delete(f"{TABLES}/orders",
                               headers=tenant.auth("developer")).status_code == 204
    assert keyed_client.delete(f"{PROFILES}/files",
                               headers=tenant.auth("developer")).status_code == 204


def test_viewers_read_developers_write(keyed_client: TestClient, tenant: TenantKeys) -> None:
    body = {"name": "sink", "connector": "blackhole"}
    for url in (PROFILES, TABLES):
        refused = keyed_client.post(url, headers=tenant.auth("viewer"), json=body)
        assert refused.status_code == 403
        assert keyed_client.post(url, headers=tenant.auth("developer"),
                                 json=body).status_code == 201
        assert keyed_client.get(f"{url}/sink", headers=tenant.auth("viewer")).status_code == 200
        for method, suffix in (("DELETE", ""), ("POST", "/test")):
            response = keyed_client.request(method, f"{url}/sink{suffix}",
                                            headers=tenant.auth("viewer"))
            assert response.status_code == 403
    duplicate = keyed_client.post(TABLES, headers=tenant.auth("developer"), json=body)
    assert duplicate.status_code == 409


def test_pipelines_plan_over_the_tenants_connection_tables(
        keyed_client: TestClient, tenant: TenantKeys, tmp_path: Path) -> None:
    _profile(keyed_client, tenant, _secret_path(tmp_path))
    assert _orders(keyed_client, tenant).status_code == 201
    sink = keyed_client.post(TABLES, headers=tenant.auth("developer"),
                             json={"name": "totals", "connector": "blackhole"})
    assert sink.status_code == 201
    sql = ("INSERT INTO totals\nSELECT TUMBLE(INTERVAL '1' MINUTE) AS w, count(*) AS n\n"
           "FROM orders GROUP BY w;")
    session = keyed_client.app.state.spate.database.sessions()  # type: ignore[attr-defined]
    try:
        box = keyed_client.app.state.spate.secret_box  # type: ignore[attr-defined]
        catalog = tables_from_definitions(
            ConnectionRepository(session, tenant.id, box).catalog_definitions())
    finally:
        session.close()
    assert set(catalog) == {"orders", "totals"}
    # Planning sees the secret only as a placeholder.
    assert catalog["orders"].config.options["path"] == "********"
    checked = check_sql(sql, catalog)
    assert checked.plan is not None and checked.diagnostics == []
    assert [t.name for t in checked.plan.sources] == ["orders"]

    unknown = check_sql("INSERT INTO totals\nSELECT id FROM nope;", catalog)
    assert [(d.line, d.column) for d in unknown.diagnostics] == [(2, 16)]
    assert "unknown table 'nope'" in unknown.diagnostics[0].message
    # Another tenant's catalog does not have them.
    other = new_tenant(keyed_client)
    session = keyed_client.app.state.spate.database.sessions()  # type: ignore[attr-defined]
    try:
        assert ConnectionRepository(session, other.id, box).catalog_definitions() == []
    finally:
        session.close()


def test_a_starting_job_gets_the_real_secrets_and_plans_with_them(
        keyed_client: TestClient, tenant: TenantKeys, tmp_path: Path) -> None:
    path = _secret_path(tmp_path)
    _profile(keyed_client, tenant, path)
    assert _orders(keyed_client, tenant).status_code == 201
    state = keyed_client.app.state.spate  # type: ignore[attr-defined]

    resolved = job_tables(state.database.sessions, tenant.id, state.secret_box)

    assert [t["name"] for t in resolved] == ["orders"]
    assert resolved[0]["options"]["path"] == path
    json.dumps(resolved)  # JSON-safe, for the job's spec
    boundary = state.boundary(tenant.id)
    tables = tables_from_definitions((TableDefinition.from_dict(t) for t in resolved), boundary)
    plan = plan_pipeline("SELECT id, price FROM orders", {}, tables=tables, boundary=boundary)
    assert plan.sources[0].config.options["path"] == path
    assert job_tables(state.database.sessions, new_tenant(keyed_client).id,
                      state.secret_box) == []


@pytest.mark.e2e  # its /test runs a check in the tenant's compute unit
def test_without_a_key_the_app_keeps_one_in_its_data_directory(
        backend: str, make_app: Callable[..., FastAPI], tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with TestClient(make_app(backend, data_dir=data_dir),
                    raise_server_exceptions=False) as client:
        tenant = new_tenant(client)
        assert not (data_dir / "secret.key").exists()  # made on first use only
        _profile(client, tenant, _secret_path(tmp_path))
    assert stat.S_IMODE(os.stat(data_dir / "secret.key").st_mode) == 0o600
    with TestClient(make_app(backend, data_dir=data_dir),
                    raise_server_exceptions=False) as again:
        checked = again.post(f"{PROFILES}/files/test", headers=tenant.auth("developer"))
        assert checked.json()["ok"] is True  # the same key opens the secret after a restart


def test_a_stored_table_that_no_longer_validates_is_listed_and_deletable(
        keyed_client: TestClient, tenant: TenantKeys) -> None:
    created = keyed_client.post(TABLES, headers=tenant.auth("developer"),
                                json={"name": "old", "connector": "blackhole"})
    assert created.status_code == 201
    state = keyed_client.app.state.spate  # type: ignore[attr-defined]
    with state.database.sessions() as session:  # as if the engine's rules changed since
        row = session.get(ConnectionTable, created.json()["id"])
        assert row is not None
        row.config = {"type": "sink", "retired_option": "1"}
        session.commit()

    listed = keyed_client.get(TABLES, headers=tenant.auth("viewer"))
    assert listed.status_code == 200 and listed.json()["items"][0]["role"] == "sink"
    with state.database.sessions() as session:
        definitions = ConnectionRepository(session, tenant.id,
                                           state.secret_box).catalog_definitions()
    answer = plan_request(PlanRequest(sql="SELECT 1 FROM old", tables=tuple(definitions)))
    assert "unknown table 'old'" in answer.diagnostics[0]["message"]
    assert keyed_client.delete(f"{TABLES}/old",
                               headers=tenant.auth("developer")).status_code == 204
