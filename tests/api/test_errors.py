"""Every error has one body shape, and nothing unexpected reaches a caller as a trace."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

import pytest
from fastapi import FastAPI

from spate.api.http.app import SchemaNotCurrentError, app_from_settings, create_app
from spate.api.settings import Settings
from tests.api.support import TenantKeys, TestClient, error_of, pipeline_sql

PIPELINES = "/api/v1/pipelines"


@pytest.fixture
def admin(tenant_factory: Callable[[], TenantKeys]) -> dict[str, str]:
    return tenant_factory().auth("admin")


def test_unknown_path_and_method(client: TestClient, admin: dict[str, str]) -> None:
    missing = client.get("/api/v1/nothing-here", headers=admin)
    assert missing.status_code == 404 and error_of(missing)["code"] == "not_found"
    wrong = client.delete(PIPELINES, headers=admin)
    assert wrong.status_code == 405 and error_of(wrong)["code"] == "method_not_allowed"


def test_validation_errors_list_each_problem_without_echoing_input(
        client: TestClient, admin: dict[str, str]) -> None:
    secret = "Spate_Supposedly_Secret_Value_0123456789"
    response = client.post(PIPELINES, headers=admin,
                           json={"name": secret, "sql": "", "parallelism": "many"})
    assert response.status_code == 422
    error = error_of(response)
    assert error["code"] == "validation_failed"
    locations = {d["location"] for d in error["details"]}
    assert locations == {"body.name", "body.sql", "body.parallelism"}
    assert secret not in response.text


def test_unknown_fields_are_refused(client: TestClient, admin: dict[str, str]) -> None:
    response = client.post(PIPELINES, headers=admin,
                           json={"name": "p", "sql": pipeline_sql(), "paralelism": 2})
    assert response.status_code == 422
    assert error_of(response)["details"][0]["location"] == "body.paralelism"


@pytest.mark.parametrize("body", [b"{not json", b"", b"[1, 2", b"\xff\xfe"])
def test_malformed_json_is_a_400(client: TestClient, admin: dict[str, str], body: bytes) -> None:
    response = client.post(PIPELINES, headers={**admin, "Content-Type": "application/json"},
                           content=body)
    assert response.status_code in (400, 422)
    assert error_of(response)["code"] in ("malformed_json", "validation_failed")


def test_wrong_shapes_of_json(client: TestClient, admin: dict[str, str]) -> None:
    for body in ([], "text", 3, None, {"name": None, "sql": None}):
        response = client.post(PIPELINES, headers=admin, json=body)
        assert response.status_code == 422, body
        error_of(response)


def test_oversized_bodies_are_413(backend: str, make_app: Callable[..., FastAPI],
                                  tenant_factory: Callable[[], TenantKeys]) -> None:
    admin = tenant_factory().auth()
    with TestClient(make_app(backend, max_body_bytes=4096)) as small:
        big = {"name": "big", "sql": pipeline_sql() + "--" + "x" * 5000}
        declared = small.post(PIPELINES, headers=admin, json=big)
        assert declared.status_code == 413
        assert error_of(declared)["code"] == "payload_too_large"

        def chunks() -> Iterator[bytes]:
            for _ in range(10):
                yield b" " * 1000

        streamed = small.post(PIPELINES, headers={**admin, "Content-Type": "application/json"},
                              content=chunks())
        assert streamed.status_code == 413
        fits = small.post(PIPELINES, headers=admin, json={"name": "fits", "sql": pipeline_sql()})
        assert fits.status_code == 201


def test_unexpected_errors_are_logged_and_answered_without_a_trace(
        backend: str, make_app: Callable[..., FastAPI],
        caplog: pytest.LogCaptureFixture) -> None:
    app = make_app(backend)

    @app.get("/api/v1/boom")
    def boom() -> None:
        raise RuntimeError("internal detail that must stay in the log")

    with TestClient(app, raise_server_exceptions=False) as test_client:
        response = test_client.get("/api/v1/boom")
    assert response.status_code == 500
    assert error_of(response)["code"] == "internal"
    assert "internal detail" not in response.text and "Traceback" not in response.text
    assert any(r.levelno == logging.ERROR and r.exc_info for r in caplog.records)


def test_the_app_refuses_to_start_on_an_unmigrated_database(tmp_path: object) -> None:
    app = create_app(Settings(database_url=f"sqlite:///{tmp_path}/empty.db"))
    with pytest.raises(SchemaNotCurrentError, match="spate db upgrade"), TestClient(app):
        pass


def test_openapi_and_docs_are_served(client: TestClient) -> None:
    document = client.get("/api/v1/openapi.json")
    assert document.status_code == 200
    paths = document.json()["paths"]
    assert "/api/v1/pipelines/{name}" in paths and "/api/v1/api-keys/{key_id}/rotate" in paths
    responses = paths["/api/v1/pipelines"]["post"]["responses"]
    assert responses["422"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/ErrorBody")
    assert client.get("/api/v1/docs").status_code == 200
    assert client.get("/api/v1/redoc").status_code == 200


def test_app_from_settings_reads_the_environment(
        migrated_urls: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPATE_DATABASE_URL", migrated_urls["sqlite"])
    monkeypatch.setenv("SPATE_MAX_BODY_BYTES", "2048")
    with TestClient(app_from_settings()) as client:
        response = client.post(PIPELINES, content=b"x" * 4096)
        assert response.status_code == 413
        assert "2048 bytes" in error_of(response)["message"]
