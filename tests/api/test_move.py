"""Moving a pipeline to another Spark cluster: ``POST /pipelines/{name}/move`` and
``spate pipelines move``, on a deployment with two named standalone clusters.

The API only records the cluster (and that the pipeline runs); the scheduler's
side is tested in tests/scheduler/test_move.py. Job rows the scheduler would
write are inserted through the models.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from click.testing import CliRunner, Result
from fastapi import FastAPI
from pydantic import ValidationError

from spate.api.cli import main
from spate.api.settings import Settings, known_clusters
from tests.api.job_rows import insert_job, read_pipeline
from tests.api.support import TenantKeys, TestClient, error_of, new_tenant, pipeline_sql

PIPELINES = "/api/v1/pipelines"
CLUSTERS = "a=spark://127.0.0.1:7077,b=spark://127.0.0.1:7078"


@pytest.fixture
def two_clusters(backend: str, make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    """A client of an app whose deployment names the standalone clusters a and b."""
    app = make_app(backend, cluster_backend="standalone", spark_clusters=CLUSTERS)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def tenant(two_clusters: TestClient) -> TenantKeys:
    return new_tenant(two_clusters)


def _create(client: TestClient, tenant: TenantKeys, name: str = "p", **extra: object) -> dict:
    response = client.post(PIPELINES, headers=tenant.auth("developer"),
                           json={"name": name, "sql": pipeline_sql(), **extra})
    assert response.status_code == 201, response.text
    return dict(response.json())


def _move(client: TestClient, tenant: TenantKeys, cluster: object, name: str = "p",
          role: str = "developer") -> object:
    return client.post(f"{PIPELINES}/{name}/move", headers=tenant.auth(role),
                       json={"cluster": cluster})


def test_a_move_records_the_cluster_and_the_pipeline_runs(two_clusters: TestClient,
                                                          tenant: TenantKeys) -> None:
    created = _create(two_clusters, tenant)
    assert created["cluster"] is None  # never moved: the default cluster
    insert_job(two_clusters.app, tenant.id, created["id"], state="running", cluster="a")
    moved = _move(two_clusters, tenant, "b")
    assert moved.status_code == 202, moved.text  # type: ignore[attr-defined]
    body = moved.json()  # type: ignore[attr-defined]
    assert (body["cluster"], body["desired_state"], body["stop_mode"]) == ("b", "running", None)
    # The job shown is still the one on a: the scheduler replaces it.
    assert body["job"]["cluster"] == "a"
    got = two_clusters.get(f"{PIPELINES}/p", headers=tenant.auth("viewer")).json()
    assert got["cluster"] == "b"
    assert read_pipeline(two_clusters.app, created["id"]).cluster == "b"
    # Moving again to the same cluster changes nothing but is not an error.
    again = _move(two_clusters, tenant, "b")
    assert again.status_code == 202 and again.json()["cluster"] == "b"  # type: ignore[attr-defined]


def test_a_stopped_pipeline_is_started_on_the_cluster(two_clusters: TestClient,
                                                      tenant: TenantKeys) -> None:
    created = _create(two_clusters, tenant, stopped=True)
    insert_job(two_clusters.app, tenant.id, created["id"], state="stopped", cluster="a")
    dev = tenant.auth("developer")
    assert two_clusters.patch(f"{PIPELINES}/p", headers=dev,
                              json={"stop": "immediate"}).status_code == 200
    moved = _move(two_clusters, tenant, "b")
    body = moved.json()  # type: ignore[attr-defined]
    assert (body["cluster"], body["desired_state"], body["stop_mode"]) == ("b", "running", None)


def test_an_unknown_cluster_is_a_400_naming_the_known_ones(two_clusters: TestClient,
                                                           tenant: TenantKeys) -> None:
    _create(two_clusters, tenant)
    refused = _move(two_clusters, tenant, "c")
    assert refused.status_code == 400  # type: ignore[attr-defined]
    error = error_of(refused)
    assert error["code"] == "bad_request"
    assert error["message"] == "unknown cluster 'c'; known clusters: a, b"
    assert error["details"] == [{"known_clusters": ["a", "b"]}]
    got = two_clusters.get(f"{PIPELINES}/p", headers=tenant.auth("viewer")).json()
    assert got["cluster"] is None


def test_a_malformed_move_is_a_422(two_clusters: TestClient, tenant: TenantKeys) -> None:
    _create(two_clusters, tenant)
    for body in ({}, {"cluster": ""}, {"cluster": 7}, {"cluster": None},
                 {"cluster": "b", "extra": 1}, {"cluster": "x" * 64}):
        response = two_clusters.post(f"{PIPELINES}/p/move", headers=tenant.auth("developer"),
                                     json=body)
        assert response.status_code == 422, body
        assert error_of(response)["code"] == "validation_failed"


def test_moving_needs_a_developer_and_an_existing_pipeline(two_clusters: TestClient,
                                                           tenant: TenantKeys) -> None:
    _create(two_clusters, tenant)
    viewer = _move(two_clusters, tenant, "b", role="viewer")
    assert viewer.status_code == 403  # type: ignore[attr-defined]
    assert error_of(viewer)["code"] == "forbidden"
    missing = _move(two_clusters, tenant, "c", name="nope")
    assert missing.status_code == 404  # type: ignore[attr-defined]
    # Another tenant cannot move it either: for it the pipeline does not exist.
    other = new_tenant(two_clusters)
    assert _move(two_clusters, other, "b").status_code == 404  # type: ignore[attr-defined]
    got = two_clusters.get(f"{PIPELINES}/p", headers=tenant.auth("viewer")).json()
    assert got["cluster"] is None


def test_jobs_show_their_cluster(two_clusters: TestClient, tenant: TenantKeys) -> None:
    created = _create(two_clusters, tenant)
    job_id = insert_job(two_clusters.app, tenant.id, created["id"], state="running",
                        cluster="b")
    viewer = tenant.auth("viewer")
    assert two_clusters.get(f"{PIPELINES}/p", headers=viewer).json()["job"]["cluster"] == "b"
    assert two_clusters.get(f"/api/v1/jobs/{job_id}", headers=viewer).json()["cluster"] == "b"
    listed = two_clusters.get(f"{PIPELINES}/p/jobs", headers=viewer).json()["items"]
    assert [job["cluster"] for job in listed] == ["b"]


def test_a_deployment_without_named_clusters_has_only_the_default(
        client: TestClient) -> None:
    tenant = new_tenant(client)
    _create(client, tenant)
    refused = _move(client, tenant, "b")
    assert refused.status_code == 400  # type: ignore[attr-defined]
    assert error_of(refused)["details"] == [{"known_clusters": ["default"]}]
    assert _move(client, tenant, "default").status_code == 202  # type: ignore[attr-defined]


def test_the_default_cluster_is_the_one_spark_master_names() -> None:
    both = "a=spark://h1:7077,b=spark://h2:7077"
    assert list(known_clusters(Settings(spark_clusters=both))) == ["a", "b"]
    assert list(known_clusters(Settings(spark_clusters=both,
                                        spark_master="spark://h2:7077"))) == ["b", "a"]
    assert list(known_clusters(Settings(spark_clusters=both,
                                        spark_master="spark://h3:7077"))) == [
        "default", "a", "b"]
    assert known_clusters(Settings()) == {"default": None}


@pytest.mark.parametrize(("value", "problem"), [
    ("a", "is not name=master"), ("A=spark://h:1", "is not name=master"),
    ("a=", "is not name=master"), ("a=spark://h:1,a=spark://h:2", "named twice"),
])
def test_bad_cluster_settings_are_refused(value: str, problem: str) -> None:
    with pytest.raises(ValidationError, match=problem):
        Settings(spark_clusters=value)


# -- spate pipelines move ------------------------------------------------------------


def spate(client: TestClient, key: str, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), obj={"http": client},
                              env={"SPATE_API_KEY": key, "SPATE_SERVER": "http://testserver"})


@pytest.fixture
def cli_client(make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    """The commands are HTTP clients; one database backend is enough to drive them."""
    app = make_app("sqlite", cluster_backend="standalone", spark_clusters=CLUSTERS)
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def test_the_move_command_records_the_cluster(cli_client: TestClient) -> None:
    tenant = new_tenant(cli_client)
    created = _create(cli_client, tenant)
    developer = tenant.keys["developer"]
    moved = spate(cli_client, developer, "pipelines", "move", "p", "--cluster", "b",
                  "--no-wait", "--json")
    assert moved.exit_code == 0, moved.output
    assert json.loads(moved.stdout)["cluster"] == "b"
    # With a job already running on b there is nothing to wait for: the table shows it.
    insert_job(cli_client.app, tenant.id, created["id"], state="running", cluster="b")
    waited = spate(cli_client, developer, "pipelines", "move", "p", "--cluster", "b")
    assert waited.exit_code == 0, waited.output
    header, row = waited.stdout.splitlines()
    assert header.split()[-1] == "CLUSTER" and row.split()[-1] == "b"
    jobs = spate(cli_client, developer, "pipelines", "jobs", "p")
    header, row = jobs.stdout.splitlines()
    assert header.split()[3] == "CLUSTER" and row.split()[3] == "b"


def test_the_move_command_prints_a_refusal_once(cli_client: TestClient) -> None:
    tenant = new_tenant(cli_client)
    _create(cli_client, tenant)
    refused = spate(cli_client, tenant.keys["developer"], "pipelines", "move", "p",
                    "--cluster", "c")
    assert refused.exit_code == 1
    assert refused.stderr.splitlines() == [
        "error: unknown cluster 'c'; known clusters: a, b"]
    missing = spate(cli_client, tenant.keys["developer"], "pipelines", "move", "nope",
                    "--cluster", "b")
    assert missing.exit_code == 1 and "'spate pipelines list'" in missing.stderr
