"""``spate udfs …`` against a real app and database: files stored and versioned, errors
at their place in the file, and a delete the server refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from spate.api.cli import main
from tests.api.support import TenantKeys, TestClient, new_tenant
from tests.api.test_udfs import RATIO, calling

#: How the API (not the CLI) says what to do; none of it may reach the terminal.
API_VERBS = ("PATCH", "PUT /", "POST /", "DELETE /", "?force", "stop=")


@pytest.fixture
def backend() -> str:
    """The commands are HTTP clients; one database backend is enough to drive them."""
    return "sqlite"


@pytest.fixture
def tenant(client: TestClient) -> TenantKeys:
    return new_tenant(client)


def spate(client: TestClient, key: str, *args: str) -> Result:
    return CliRunner().invoke(main, list(args), obj={"http": client},
                              env={"SPATE_API_KEY": key, "SPATE_SERVER": "http://testserver"})


def test_create_list_get_and_delete(client: TestClient, tenant: TenantKeys,
                                    tmp_path: Path) -> None:
    developer = tenant.keys["developer"]
    source = tmp_path / "ratio.py"
    source.write_text(RATIO)
    created = spate(client, developer, "udfs", "create", "ratio", str(source))
    assert created.exit_code == 0, created.output
    assert created.stdout.split("\n")[1].split()[:3] == ["ratio", "1", "scalar"]
    assert "ratio(a: int, b: Optional[int]) -> Optional[float]" in created.stdout

    source.write_text(RATIO.replace("a / b", "b / a"))
    second = json.loads(spate(client, developer, "udfs", "create", "ratio", str(source),
                              "--json").stdout)
    assert second["version"] == 2

    listed = spate(client, tenant.keys["viewer"], "udfs", "list")
    assert listed.exit_code == 0 and "ratio" in listed.stdout and "scalar" in listed.stdout
    shown = spate(client, developer, "udfs", "get", "ratio")
    assert shown.exit_code == 0 and shown.stdout.splitlines()[-1].startswith("versions: 1 (")
    first = spate(client, developer, "udfs", "get", "ratio", "--version", "1", "--source")
    assert first.stdout == RATIO

    deleted = spate(client, developer, "udfs", "delete", "ratio")
    assert deleted.exit_code == 0 and deleted.stdout == "deleted ratio\n"
    missing = spate(client, developer, "udfs", "get", "ratio")
    assert missing.exit_code == 1 and missing.stderr == "error: UDF 'ratio' not found\n"


def test_an_unusable_file_is_located_in_it_and_exits_2(client: TestClient, tenant: TenantKeys,
                                                        tmp_path: Path) -> None:
    source = tmp_path / "mine.py"
    source.write_text(RATIO.replace("-> Optional[float]", ""))
    refused = spate(client, tenant.keys["developer"], "udfs", "create", "ratio", str(source))
    assert refused.exit_code == 2
    assert refused.stderr.startswith(f"{source}:7:5: error: UDF 'ratio' has no return type hint")
    assert refused.stdout == ""


def test_a_delete_the_server_refuses_names_the_pipelines(client: TestClient,
                                                         tenant: TenantKeys,
                                                         tmp_path: Path) -> None:
    developer = tenant.keys["developer"]
    source = tmp_path / "ratio.py"
    source.write_text(RATIO)
    assert spate(client, developer, "udfs", "create", "ratio", str(source)).exit_code == 0
    sql = tmp_path / "p.sql"
    sql.write_text(calling("ratio(a, b) AS r"))
    created = spate(client, developer, "pipelines", "create", "ratios", str(sql), "--no-wait")
    assert created.exit_code == 0, created.output

    refused = spate(client, developer, "udfs", "delete", "ratio")
    assert refused.exit_code == 1
    assert refused.stderr.startswith("error: UDF 'ratio' is called by running pipelines ratios")
    assert not [verb for verb in API_VERBS if verb in refused.stderr]
    viewer = spate(client, tenant.keys["viewer"], "udfs", "create", "other", str(source))
    assert viewer.exit_code == 1 and "developer" in viewer.stderr
