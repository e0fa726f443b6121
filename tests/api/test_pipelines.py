"""The pipelines resource: SQL checked on the way in, immutable versions, PUT by name."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from tests.api.support import QUICKSTART_SQL, TenantKeys, TestClient, error_of, pipeline_sql

PIPELINES = "/api/v1/pipelines"


@pytest.fixture
def dev(tenant_factory: Callable[[], TenantKeys]) -> dict[str, str]:
    return tenant_factory().auth("developer")


def test_create_get_and_delete(client: TestClient, dev: dict[str, str]) -> None:
    created = client.post(PIPELINES, headers=dev, json={
        "name": "bids", "sql": QUICKSTART_SQL, "description": "bids per second",
        "parallelism": 4, "checkpoint_interval_ms": 5000})
    assert created.status_code == 201, created.text
    body = created.json()
    assert body["name"] == "bids" and body["version"] == 1 and body["sql"] == QUICKSTART_SQL
    assert body["parallelism"] == 4 and body["checkpoint_interval_ms"] == 5000
    assert body["created_at"].endswith("Z")

    assert client.get(f"{PIPELINES}/bids", headers=dev).json() == body
    again = client.post(PIPELINES, headers=dev, json={"name": "bids", "sql": QUICKSTART_SQL})
    assert again.status_code == 409
    # In the user's words (the console shows it as it is): no HTTP verbs or paths.
    assert again.json()["error"]["message"] == (
        "a pipeline named 'bids' already exists; choose another name, or delete it first")

    assert client.delete(f"{PIPELINES}/bids", headers=dev).status_code == 204
    assert client.get(f"{PIPELINES}/bids", headers=dev).status_code == 404
    assert client.get(f"{PIPELINES}/bids/versions/1", headers=dev).status_code == 404
    assert client.delete(f"{PIPELINES}/bids", headers=dev).status_code == 404


def test_invalid_sql_is_a_400_with_line_and_column(client: TestClient,
                                                   dev: dict[str, str]) -> None:
    sql = "CREATE TABLE t WITH (connector = 'impulse', event_rate = '1');\nSELEC counter FROM t"
    response = client.post(PIPELINES, headers=dev, json={"name": "bad", "sql": sql})
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == "invalid_sql"
    [diagnostic] = error["details"]
    assert diagnostic["line"] == 2 and diagnostic["column"] >= 1
    assert diagnostic["message"] and diagnostic["severity"] == "error"
    assert f"line {diagnostic['line']}, column {diagnostic['column']}" in error["message"]
    assert client.get(f"{PIPELINES}/bad", headers=dev).status_code == 404


def test_a_pipeline_needs_a_sink_but_validate_and_preview_take_a_bare_select(
        client: TestClient, dev: dict[str, str]) -> None:
    sql = "CREATE TABLE t WITH (connector = 'impulse', event_rate = '1');\nSELECT counter FROM t"
    for method, path, body in (("POST", PIPELINES, {"name": "bare", "sql": sql}),
                               ("PUT", f"{PIPELINES}/bare", {"sql": sql})):
        response = client.request(method, path, headers=dev, json=body)
        assert response.status_code == 400, response.text
        [diagnostic] = error_of(response)["details"]
        assert (diagnostic["line"], diagnostic["column"]) == (2, 1)
        assert "INSERT INTO <sink>" in diagnostic["message"]
    checked = client.post(f"{PIPELINES}/validate", headers=dev, json={"sql": sql})
    assert checked.json()["valid"] is True


def test_an_unknown_connector_option_is_a_400_naming_it(client: TestClient,
                                                        dev: dict[str, str]) -> None:
    sql = ("CREATE TABLE t WITH (connector = 'impulse', event_rate = '1',\n"
           "    evnt_rate_typo = '2');\nCREATE TABLE o WITH (connector = 'blackhole');\n"
           "INSERT INTO o SELECT counter FROM t;")
    response = client.post(PIPELINES, headers=dev, json={"name": "typo", "sql": sql})
    assert response.status_code == 400
    [diagnostic] = error_of(response)["details"]
    assert "evnt_rate_typo" in diagnostic["message"]
    assert diagnostic["line"] == 2 and diagnostic["column"] == 5


def test_environment_references_are_refused(client: TestClient, dev: dict[str, str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPATE_TEST_SECRET_VALUE", "do-not-leak-this")
    sql = ("CREATE TABLE t WITH (connector = 'impulse', event_rate = '1',\n"
           "  event_time_field = '{{ SPATE_TEST_SECRET_VALUE }}');\n"
           "CREATE TABLE o WITH (connector = 'blackhole');\nINSERT INTO o SELECT counter FROM t;")
    for response in (client.post(PIPELINES, headers=dev, json={"name": "env", "sql": sql}),
                     client.post(f"{PIPELINES}/validate", headers=dev, json={"sql": sql})):
        assert "do-not-leak-this" not in response.text
        assert "environment references" in response.text
    diagnostic = client.post(f"{PIPELINES}/validate", headers=dev,
                             json={"sql": sql}).json()["diagnostics"][0]
    assert (diagnostic["line"], diagnostic["column"]) == (2, 23)


def test_deeply_nested_sql_is_a_diagnostic(client: TestClient, dev: dict[str, str]) -> None:
    sql = "SELECT " + "(" * 5000 + "1" + ")" * 5000 + " FROM t"
    response = client.post(f"{PIPELINES}/validate", headers=dev, json={"sql": sql})
    assert response.status_code == 200
    assert response.json()["valid"] is False


def test_versions_are_immutable_and_numbered(client: TestClient, dev: dict[str, str]) -> None:
    client.post(PIPELINES, headers=dev, json={"name": "p", "sql": pipeline_sql("one")})
    second = client.post(f"{PIPELINES}/p/versions", headers=dev, json={"sql": pipeline_sql("two")})
    assert second.status_code == 201 and second.json()["version"] == 2
    same = client.post(f"{PIPELINES}/p/versions", headers=dev, json={"sql": pipeline_sql("two")})
    assert same.status_code == 200 and same.json() == second.json()
    bad = client.post(f"{PIPELINES}/p/versions", headers=dev, json={"sql": "SELECT"})
    assert bad.status_code == 400

    current = client.get(f"{PIPELINES}/p", headers=dev).json()
    assert current["version"] == 2 and current["sql"] == pipeline_sql("two")
    first = client.get(f"{PIPELINES}/p/versions/1", headers=dev).json()
    assert first["sql"] == pipeline_sql("one") and first["created_by_key_id"]
    versions = client.get(f"{PIPELINES}/p/versions", headers=dev).json()["items"]
    assert [v["version"] for v in versions] == [1, 2]
    assert client.get(f"{PIPELINES}/p/versions/3", headers=dev).status_code == 404
    # No route edits a stored version.
    assert client.put(f"{PIPELINES}/p/versions/1", headers=dev,
                      json={"sql": pipeline_sql()}).status_code == 405


def test_patch_changes_settings_not_sql(client: TestClient, dev: dict[str, str]) -> None:
    client.post(PIPELINES, headers=dev, json={"name": "p", "sql": pipeline_sql()})
    patched = client.patch(f"{PIPELINES}/p", headers=dev,
                           json={"parallelism": 8, "checkpoint_interval_ms": 2000})
    assert patched.status_code == 200
    assert patched.json()["parallelism"] == 8 and patched.json()["version"] == 1
    cleared = client.patch(f"{PIPELINES}/p", headers=dev, json={"checkpoint_interval_ms": None})
    assert cleared.json()["checkpoint_interval_ms"] is None and cleared.json()["parallelism"] == 8
    for body in ({"sql": pipeline_sql("2")}, {"parallelism": None}, {"parallelism": 0},
                 {"parallelism": 129}, {"name": "renamed"}):
        assert client.patch(f"{PIPELINES}/p", headers=dev, json=body).status_code == 422, body


def test_put_creates_once_then_returns_the_same(client: TestClient, dev: dict[str, str]) -> None:
    spec = {"sql": pipeline_sql(), "parallelism": 2}
    created = client.put(f"{PIPELINES}/by-name", headers=dev, json=spec)
    assert created.status_code == 201
    again = client.put(f"{PIPELINES}/by-name", headers=dev, json=spec)
    assert again.status_code == 200 and again.json() == created.json()

    differing = client.put(f"{PIPELINES}/by-name", headers=dev,
                           json={"sql": pipeline_sql("other"), "parallelism": 3})
    assert differing.status_code == 409
    assert [d["field"] for d in error_of(differing)["details"]] == ["sql", "parallelism"]
    assert client.get(f"{PIPELINES}/by-name", headers=dev).json() == created.json()


@pytest.mark.parametrize("name", ["validate", "preview", "Upper", "1abc", "a" * 64, "a.b"])
def test_put_refuses_bad_or_reserved_names(client: TestClient, dev: dict[str, str],
                                           name: str) -> None:
    response = client.put(f"{PIPELINES}/{name}", headers=dev, json={"sql": pipeline_sql()})
    assert response.status_code in (405, 422)
    assert client.post(PIPELINES, headers=dev,
                       json={"name": name, "sql": pipeline_sql()}).status_code == 422


def test_listing_pages_and_filters(client: TestClient, dev: dict[str, str]) -> None:
    names = ["alpha-1", "alpha-2", "beta-1", "alpha_3", "alphax"]
    for name in names:
        assert client.post(PIPELINES, headers=dev,
                           json={"name": name, "sql": pipeline_sql()}).status_code == 201

    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get(PIPELINES, headers=dev, params=params).json()
        assert len(page["items"]) <= 2
        seen.extend(p["name"] for p in page["items"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == names  # oldest first, none skipped or repeated

    prefixed = client.get(PIPELINES, headers=dev, params={"name_prefix": "alpha_"}).json()
    assert [p["name"] for p in prefixed["items"]] == ["alpha_3"]  # '_' is not a wildcard
    prefixed = client.get(PIPELINES, headers=dev, params={"name_prefix": "alpha"}).json()
    assert [p["name"] for p in prefixed["items"]] == ["alpha-1", "alpha-2", "alpha_3", "alphax"]

    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert client.get(PIPELINES, headers=dev,
                      params={"created_after": future}).json()["items"] == []
    assert len(client.get(PIPELINES, headers=dev, params={"created_after": past,
                                                          "created_before": future}
                          ).json()["items"]) == 5
    naive = client.get(PIPELINES, headers=dev, params={"created_after": "2024-01-01T00:00:00"})
    assert naive.status_code == 422


@pytest.mark.parametrize("cursor", ["nonsense", "eyJhZnRlciI6IDF9", "e30", "%%%"])
def test_a_foreign_cursor_is_a_400(client: TestClient, dev: dict[str, str], cursor: str) -> None:
    response = client.get(PIPELINES, headers=dev, params={"cursor": cursor})
    assert response.status_code == 400
    assert "cursor" in error_of(response)["message"]


def test_validate_returns_the_plan_graph(client: TestClient,
                                         tenant_factory: Callable[[], TenantKeys]) -> None:
    viewer = tenant_factory().auth("viewer")
    response = client.post(f"{PIPELINES}/validate", headers=viewer, json={"sql": QUICKSTART_SQL})
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is True and body["diagnostics"] == []
    plan = body["plan"]
    assert plan["bounded"] is True
    assert "Pipeline plan" in plan["explain"] and "[spate]" in plan["explain"]
    kinds = {node["id"]: node["kind"] for node in plan["nodes"]}
    assert kinds == {"source:nexmark": "source", "q0:pre_aggregate": "pre_aggregate",
                     "q0:q0_window": "window_aggregate", "q0:project": "projection",
                     "sink:per_second": "sink"}
    edges = [(e["source"], e["target"]) for e in plan["edges"]]
    assert edges == [("source:nexmark", "q0:pre_aggregate"),
                     ("q0:pre_aggregate", "q0:q0_window"), ("q0:q0_window", "q0:project"),
                     ("q0:project", "sink:per_second")]
    window = next(n for n in plan["nodes"] if n["kind"] == "window_aggregate")
    assert window["runs_on"] == "spate" and window["detail"]["width_us"] == 1_000_000


def test_validate_reports_diagnostics_without_storing(client: TestClient,
                                                      dev: dict[str, str]) -> None:
    response = client.post(f"{PIPELINES}/validate", headers=dev,
                           json={"sql": "CREATE TABLE t WITH (connector = 'nope');\nSELECT 1"})
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is False and body["plan"] is None
    [diagnostic] = body["diagnostics"]
    assert "unknown connector 'nope'" in diagnostic["message"] and diagnostic["line"] == 1
    assert client.get(PIPELINES, headers=dev).json()["items"] == []


#: SQL mistakes users made, and the located diagnostic validate answers for each.
_MISTAKES = [
    ("SELECT counter FROM impulse_typo",
     (2, 21, "unknown table 'impulse_typo' (did you mean 'impulse'?)")),
    ("SELECT countr FROM impulse",
     (2, 8, "unknown column 'countr' (did you mean 'counter'?)")),
    ("SELECT counter,\nFROM impulse",
     (2, 15, "the SELECT list ends with a comma before FROM; remove it")),
    ("SELECT count(counter\nFROM impulse",
     (3, 1, "expected ')' to close the '(' at line 2, column 13, found the keyword FROM")),
]


@pytest.mark.parametrize(("query", "expected"), _MISTAKES,
                         ids=["table", "column", "trailing-comma", "syntax"])
def test_validate_locates_mistakes_in_the_users_words(
        client: TestClient, dev: dict[str, str], query: str,
        expected: tuple[int, int, str]) -> None:
    sql = f"CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '1');\n{query}"
    response = client.post(f"{PIPELINES}/validate", headers=dev, json={"sql": sql})
    assert response.status_code == 200
    [diagnostic] = response.json()["diagnostics"]
    line, column, message = expected
    assert (diagnostic["line"], diagnostic["column"]) == (line, column), diagnostic
    assert message in diagnostic["message"]
