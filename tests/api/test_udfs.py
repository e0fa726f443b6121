"""The UDFs resource: files checked as ``spate run --udf`` checks them, errors located in
the file, versions, pipelines that call UDFs by name, and deleting one in use."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi import FastAPI

from tests.api.job_rows import insert_job
from tests.api.support import TenantKeys, TestClient, error_of, new_tenant

UDFS = "/api/v1/udfs"
PIPELINES = "/api/v1/pipelines"

RATIO = """\
from typing import Optional

from spate.engine.udf import udf


@udf
def ratio(a: int, b: Optional[int]) -> Optional[float]:
    return None if not b else a / b
"""
SPREAD = """\
from spate.engine.udf import udaf


@udaf
def spread(values: list[float]) -> float:
    return max(values) - min(values) if values else 0.0
"""


def calling(select_list: str, marker: str = "") -> str:
    """A pipeline whose query's SELECT list (on line 4) is ``select_list`` over BIGINT
    columns a, b."""
    return (f"-- {marker}\nCREATE TABLE src WITH (connector = 'impulse', event_rate = '10');\n"
            "CREATE TABLE out WITH (connector = 'blackhole');\n"
            f"INSERT INTO out SELECT {select_list}\n"
            "FROM (SELECT counter AS a, subtask_index AS b FROM src);\n")


@pytest.fixture
def tenant(tenant_factory: Callable[[], TenantKeys]) -> TenantKeys:
    return tenant_factory()


def store(client: TestClient, tenant: TenantKeys, name: str, source: str,
          expected: int = 201) -> dict[str, object]:
    response = client.post(UDFS, headers=tenant.auth("developer"),
                           json={"name": name, "source": source})
    assert response.status_code == expected, response.text
    return dict(response.json())


def test_a_udf_is_stored_read_and_versioned(client: TestClient, tenant: TenantKeys) -> None:
    first = store(client, tenant, "ratio", RATIO)
    assert (first["name"], first["version"], first["kind"]) == ("ratio", 1, "scalar")
    assert first["signature"] == "ratio(a: int, b: Optional[int]) -> Optional[float]"
    assert first["source"] == RATIO and len(first["versions"]) == 1  # type: ignore[arg-type]

    assert store(client, tenant, "ratio", RATIO, expected=200) == first  # same source
    changed = RATIO.replace("a / b", "round(a / b, 2)")
    second = store(client, tenant, "ratio", changed)
    assert second["version"] == 2 and second["source"] == changed
    assert second["id"] == first["id"]

    viewer = tenant.auth("viewer")
    shown = client.get(f"{UDFS}/ratio", headers=viewer).json()
    assert shown == second
    assert [v["version"] for v in shown["versions"]] == [1, 2]
    old = client.get(f"{UDFS}/ratio/versions/1", headers=viewer).json()
    assert (old["source"], old["signature"]) == (RATIO, first["signature"])
    missing = client.get(f"{UDFS}/ratio/versions/3", headers=viewer)
    assert missing.status_code == 404 and "1 to 2" in error_of(missing)["message"]

    store(client, tenant, "spread", SPREAD)
    listed = client.get(UDFS, headers=viewer, params={"limit": 1}).json()
    assert [u["name"] for u in listed["items"]] == ["ratio"] and listed["next_cursor"]
    rest = client.get(UDFS, headers=viewer, params={"cursor": listed["next_cursor"]}).json()
    assert [(u["name"], u["kind"]) for u in rest["items"]] == [("spread", "aggregate")]


@pytest.mark.parametrize(("name", "source", "line", "column", "words"), [
    ("ratio", RATIO.replace("-> Optional[float]", ""), 7, 5, "has no return type hint"),
    ("ratio", RATIO.replace("return None", "return (None"), 8, 12, "syntax error"),
    ("ratio", RATIO.replace("from spate.engine.udf import udf\n", ""), 5, 2,
     "decorator 'udf' is not imported"),
    ("share", RATIO, 7, 5, "stored as UDF 'share', so it must declare one UDF, named share: "
                           "it declares UDF 'ratio'"),
    ("ratio", RATIO + SPREAD.replace("from spate.engine.udf import udaf\n", "")
     .replace("@udaf", "@udf"), 12, 5, "it also declares UDF 'spread'"),
    ("upper", RATIO.replace("ratio", "upper"), 7, 5, "the built-in function upper()"),
    ("ratio", "def ratio(a: int) -> int:\n    return a\n", 1, 1, "declares no UDF"),
])
def test_an_unusable_file_is_a_400_located_in_it(client: TestClient, tenant: TenantKeys,
                                                 name: str, source: str, line: int,
                                                 column: int, words: str) -> None:
    response = client.post(UDFS, headers=tenant.auth("developer"),
                           json={"name": name, "source": source})
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["code"] == "invalid_udf"
    [detail] = error["details"]
    assert words in detail["message"]
    assert (detail["line"], detail["column"]) == (line, column)
    assert error["message"] == f"{name}.py:{line}:{column}: {detail['message']}"
    assert client.get(f"{UDFS}/{name}", headers=tenant.auth()).status_code == 404

    checked = client.post(f"{UDFS}/validate", headers=tenant.auth("viewer"),
                          json={"name": name, "source": source}).json()
    assert checked["valid"] is False and checked["diagnostics"][0]["line"] == line


@pytest.mark.parametrize("body", [
    {"name": "Ratio", "source": RATIO}, {"name": "1ratio", "source": RATIO},
    {"name": "ra-tio", "source": RATIO}, {"name": "ratio", "source": ""},
    {"name": "ratio", "source": "#" * 100_001}, {"name": "ratio"},
    {"name": "ratio", "source": RATIO, "extra": 1},
])
def test_a_malformed_body_is_a_422(client: TestClient, tenant: TenantKeys,
                                   body: dict[str, object]) -> None:
    response = client.post(UDFS, headers=tenant.auth("developer"), json=body)
    assert response.status_code == 422, response.text
    assert error_of(response)["code"] == "validation_failed"


def test_validate_answers_the_signature_without_storing(client: TestClient,
                                                        tenant: TenantKeys) -> None:
    checked = client.post(f"{UDFS}/validate", headers=tenant.auth("viewer"),
                          json={"name": "spread", "source": SPREAD})
    assert checked.status_code == 200, checked.text
    assert checked.json() == {"valid": True, "diagnostics": [], "kind": "aggregate",
                              "signature": "spread(values: list[float]) -> float"}
    assert client.get(f"{UDFS}/spread", headers=tenant.auth()).status_code == 404


def test_roles_and_tenants(client: TestClient, tenant: TenantKeys,
                           tenant_factory: Callable[[], TenantKeys]) -> None:
    refused = client.post(UDFS, headers=tenant.auth("viewer"),
                          json={"name": "ratio", "source": RATIO})
    assert refused.status_code == 403
    store(client, tenant, "ratio", RATIO)
    assert client.delete(f"{UDFS}/ratio", headers=tenant.auth("viewer")).status_code == 403

    other = tenant_factory()
    assert client.get(f"{UDFS}/ratio", headers=other.auth()).status_code == 404
    assert client.get(UDFS, headers=other.auth()).json()["items"] == []
    assert client.delete(f"{UDFS}/ratio", headers=other.auth()).status_code == 404
    answer = client.post(f"{PIPELINES}/validate", headers=other.auth("viewer"),
                         json={"sql": calling("ratio(a, b) AS r")}).json()
    assert answer["valid"] is False
    assert "unknown function" in answer["diagnostics"][0]["message"].lower()
    # the same name is the other tenant's to take
    assert store(client, other, "ratio", SPREAD.replace("spread", "ratio"))["kind"] == "aggregate"


def test_pipelines_call_the_tenants_udfs_by_name(client: TestClient,
                                                 tenant: TenantKeys) -> None:
    dev = tenant.auth("developer")
    sql = calling("ratio(a, b) AS r")
    before = client.post(f"{PIPELINES}/validate", headers=dev, json={"sql": sql}).json()
    assert before["valid"] is False
    store(client, tenant, "ratio", RATIO)

    validated = client.post(f"{PIPELINES}/validate", headers=dev, json={"sql": sql}).json()
    assert validated["valid"] is True, validated
    assert "RATIO(" in validated["plan"]["explain"].upper()
    wrong = client.post(f"{PIPELINES}/validate", headers=dev,
                        json={"sql": calling("ratio(a) AS r")}).json()
    [diagnostic] = wrong["diagnostics"]
    assert "ratio(a: int, b: Optional[int]) -> Optional[float] takes 2 argument(s), got 1" \
        in diagnostic["message"]
    assert (diagnostic["line"], diagnostic["column"]) == (4, 24)

    created = client.post(PIPELINES, headers=dev, json={"name": "ratios", "sql": sql})
    assert created.status_code == 201, created.text
    updated = client.post(f"{PIPELINES}/ratios/plan-update", headers=dev,
                          json={"sql": calling("ratio(b, a) AS r", "swapped")})
    assert updated.status_code == 200, updated.text


def test_a_udf_a_running_pipeline_calls_cannot_be_deleted(client: TestClient,
                                                          tenant: TenantKeys) -> None:
    dev = tenant.auth("developer")
    store(client, tenant, "ratio", RATIO)
    for name, sql in (("caller", calling("ratio(a, b) AS r")),
                      ("column", calling("a AS ratio")),
                      ("comment", calling("a AS r", "ratio(a, b) is not called here"))):
        created = client.post(PIPELINES, headers=dev, json={"name": name, "sql": sql})
        assert created.status_code == 201, created.text

    refused = client.delete(f"{UDFS}/ratio", headers=dev)
    assert refused.status_code == 409
    error = error_of(refused)
    assert error["details"] == [{"pipeline": "caller"}]
    assert "UDF 'ratio' is called by running pipelines caller" in error["message"]

    stopped = client.patch(f"{PIPELINES}/caller", headers=dev, json={"stop": "immediate"})
    assert stopped.status_code == 200, stopped.text
    assert client.delete(f"{UDFS}/ratio", headers=dev).status_code == 204
    assert client.get(f"{UDFS}/ratio", headers=dev).status_code == 404
    assert client.delete(f"{UDFS}/ratio", headers=dev).status_code == 404


def test_a_live_job_on_an_older_version_holds_the_udf(client: TestClient,
                                                      tenant: TenantKeys) -> None:
    dev = tenant.auth("developer")
    store(client, tenant, "ratio", RATIO)
    created = client.post(PIPELINES, headers=dev, json={
        "name": "moving", "sql": calling("ratio(a, b) AS r"), "stopped": True})
    assert created.status_code == 201, created.text
    added = client.post(f"{PIPELINES}/moving/versions", headers=dev,
                        json={"sql": calling("a AS r")})
    assert added.status_code == 201, added.text
    # stopped, but its job (on version 1, which calls ratio) has not ended yet
    insert_job(client.app, tenant.id, created.json()["id"], state="stopping",
               pipeline_version=1)
    refused = client.delete(f"{UDFS}/ratio", headers=dev)
    assert refused.status_code == 409 and error_of(refused)["details"] == [
        {"pipeline": "moving"}]


def test_a_deployment_on_foundationdb_state_stores_no_udfs(
        make_app: Callable[..., FastAPI]) -> None:
    with TestClient(make_app("sqlite", state_url="fdb:///etc/foundationdb/fdb.cluster"),
                    raise_server_exceptions=False) as client:
        tenant = new_tenant(client)
        refused = client.post(UDFS, headers=tenant.auth("developer"),
                              json={"name": "ratio", "source": RATIO})
        assert refused.status_code == 403
        assert "FoundationDB" in error_of(refused)["message"]
        assert client.get(f"{UDFS}/ratio", headers=tenant.auth()).status_code == 404
