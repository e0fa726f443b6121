"""``spate pipelines …`` and ``spate keys …`` against a real app and database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from spate.api.cli import main
from tests.api.support import TenantKeys, TestClient, new_tenant, pipeline_sql


@pytest.fixture
def backend() -> str:
    """The commands are HTTP clients; one database backend is enough to drive them."""
    return "sqlite"


def spate(client: TestClient, key: str, *args: str) -> Result:
    """Run ``spate <args>`` with ``key``, its HTTP calls going to ``client``'s app."""
    return CliRunner().invoke(main, list(args), obj={"http": client},
                              env={"SPATE_API_KEY": key, "SPATE_SERVER": "http://testserver"})


@pytest.fixture
def tenant(client: TestClient) -> TenantKeys:
    return new_tenant(client)


def test_keys_create_list_rotate_revoke(client: TestClient, tenant: TenantKeys) -> None:
    admin = tenant.keys["admin"]
    created = spate(client, admin, "keys", "create", "ci", "--role", "viewer", "--json")
    assert created.exit_code == 0, created.output
    key = json.loads(created.stdout)
    assert key["key"].startswith("spate_") and key["role"] == "viewer"

    listed = spate(client, admin, "keys", "list")
    assert key["id"] in listed.stdout and key["key"] not in listed.stdout

    rotated = spate(client, admin, "keys", "rotate", key["id"])
    assert rotated.exit_code == 0, rotated.output
    new_secret = rotated.stdout.split("key: ", 1)[1].strip()
    assert new_secret != key["key"]
    assert spate(client, key["key"], "pipelines", "list").exit_code == 1  # old secret is dead
    assert spate(client, new_secret, "pipelines", "list").exit_code == 0

    revoked = spate(client, admin, "keys", "revoke", key["id"])
    assert revoked.exit_code == 0, revoked.output
    refused = spate(client, new_secret, "pipelines", "list")
    assert refused.exit_code == 1 and "invalid or revoked" in refused.stderr


def test_pipeline_commands_drive_the_desired_state(client: TestClient, tenant: TenantKeys,
                                                   tmp_path: Path) -> None:
    developer = tenant.keys["developer"]
    sql_file = tmp_path / "p.sql"
    sql_file.write_text(pipeline_sql())

    created = spate(client, developer, "pipelines", "create", "clicks", str(sql_file),
                    "-p", "2", "--stopped", "--json")
    assert created.exit_code == 0, created.output
    assert json.loads(created.stdout)["desired_state"] == "stopped"

    started = spate(client, developer, "pipelines", "start", "clicks", "--json")
    assert json.loads(started.stdout)["desired_state"] == "running"
    stopped = spate(client, developer, "pipelines", "stop", "clicks", "--mode", "immediate",
                    "--json")
    body = json.loads(stopped.stdout)
    assert (body["desired_state"], body["stop_mode"]) == ("stopped", "immediate")

    rescaled = spate(client, developer, "pipelines", "rescale", "clicks", "3", "--json")
    assert json.loads(rescaled.stdout)["parallelism"] == 3
    restarted = spate(client, developer, "pipelines", "restart", "clicks", "--without-state",
                      "--json")
    assert restarted.exit_code == 0, restarted.output
    assert json.loads(restarted.stdout)["desired_state"] == "running"

    listed = spate(client, developer, "pipelines", "list")
    assert listed.stdout.splitlines()[0].split()[:2] == ["NAME", "DESIRED"]
    assert "clicks" in listed.stdout
    assert spate(client, developer, "pipelines", "get", "clicks").exit_code == 0


def test_bad_sql_prints_the_located_diagnostic(client: TestClient, tenant: TenantKeys,
                                               tmp_path: Path) -> None:
    sql_file = tmp_path / "bad.sql"
    sql_file.write_text("CREATE TABLE t WITH (connector = 'impulse');\nSELEC 1;\n")
    result = spate(client, tenant.keys["developer"], "pipelines", "create", "bad",
                   str(sql_file))
    assert result.exit_code == 1
    assert "line 2, column" in result.stderr


def test_a_viewer_is_refused_and_told_why(client: TestClient, tenant: TenantKeys,
                                          tmp_path: Path) -> None:
    sql_file = tmp_path / "p.sql"
    sql_file.write_text(pipeline_sql())
    result = spate(client, tenant.keys["viewer"], "pipelines", "create", "x", str(sql_file))
    assert result.exit_code == 1 and "developer role" in result.stderr


def test_an_unreachable_server_is_a_clear_error() -> None:
    result = CliRunner().invoke(main, ["pipelines", "list"], env={
        "SPATE_API_KEY": "spate_x_y", "SPATE_SERVER": "http://127.0.0.1:9"})
    assert result.exit_code == 1
    assert "cannot reach the Spate server at http://127.0.0.1:9" in result.stderr
    assert "spate_x_y" not in result.output
