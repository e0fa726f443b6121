"""``spate pipelines plan-update`` and a refused restart, against a real app and database."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.api.cli.test_clientcli import spate
from tests.api.job_rows import insert_job
from tests.api.support import TenantKeys, TestClient, new_tenant
from tests.api.test_plan_update import ADDED_COLUMNS, WIDER_WINDOW, WINDOWED


@pytest.fixture
def backend() -> str:
    """The commands are HTTP clients; one database backend is enough to drive them."""
    return "sqlite"


@pytest.fixture
def tenant(client: TestClient) -> TenantKeys:
    return new_tenant(client)


def test_plan_update_prints_the_verdict_and_each_operator(client: TestClient,
                                                          tenant: TenantKeys,
                                                          tmp_path: Path) -> None:
    developer = tenant.keys["developer"]
    first = tmp_path / "v1.sql"
    first.write_text(WINDOWED)
    created = spate(client, developer, "pipelines", "create", "ticks", str(first),
                    "--stopped", "--json")
    assert created.exit_code == 0, created.output
    insert_job(client.app, tenant.id, json.loads(created.stdout)["id"], state="stopped")

    added = tmp_path / "added.sql"
    added.write_text(ADDED_COLUMNS)
    kept = spate(client, tenant.keys["viewer"], "pipelines", "plan-update", "ticks", str(added))
    assert kept.exit_code == 0, kept.output
    assert kept.stdout.splitlines() == [
        "ticks: compatible: the new SQL can resume from the state of version 1",
        "  kept     q0_window  TUMBLE 5 s by k: count(*) AS n"]

    wider = tmp_path / "wider.sql"
    wider.write_text(WIDER_WINDOW)
    changed = spate(client, developer, "pipelines", "plan-update", "ticks", str(wider))
    assert changed.exit_code == 3, changed.output
    lines = changed.stdout.splitlines()
    assert lines[0].startswith("ticks: incompatible: the new SQL cannot resume from the "
                               "state of version 1")
    assert lines[1:] == ["  changed  q0_window  TUMBLE 10 s by k: count(*) AS n",
                         "           its window changed: TUMBLE 5 s → TUMBLE 10 s"]
    as_json = spate(client, developer, "pipelines", "plan-update", "ticks", str(wider), "--json")
    assert as_json.exit_code == 3 and json.loads(as_json.stdout)["verdict"] == "incompatible"

    # the restart the verdict warns of is refused, in the CLI's terms
    assert spate(client, developer, "pipelines", "start", "ticks", "--no-wait").exit_code == 0
    client.post("/api/v1/pipelines/ticks/versions", json={"sql": WIDER_WINDOW},
                headers={"Authorization": f"Bearer {developer}"})
    refused = spate(client, developer, "pipelines", "restart", "ticks", "--no-wait")
    assert refused.exit_code == 1
    assert "cannot restart on version 2 keeping its state" in refused.stderr
    assert "'spate pipelines restart ticks --without-state'" in refused.stderr
    assert "with_state" not in refused.stderr
    dropped = spate(client, developer, "pipelines", "restart", "ticks", "--without-state",
                    "--no-wait")
    assert dropped.exit_code == 0, dropped.output


def test_plan_update_locates_bad_sql_and_names_a_missing_pipeline(client: TestClient,
                                                                  tenant: TenantKeys,
                                                                  tmp_path: Path) -> None:
    bad = tmp_path / "bad.sql"
    bad.write_text("CREATE TABLE t WITH (connector = 'impulse', event_rate = '1');\nSELEC 1")
    created = spate(client, tenant.keys["admin"], "pipelines", "create", "ticks",
                    str(_written(tmp_path)), "--stopped")
    assert created.exit_code == 0, created.output
    invalid = spate(client, tenant.keys["admin"], "pipelines", "plan-update", "ticks", str(bad))
    assert invalid.exit_code == 2
    assert invalid.stderr.startswith(f"{bad}:2:")
    missing = spate(client, tenant.keys["admin"], "pipelines", "plan-update", "nope", str(bad))
    assert missing.exit_code == 1 and "pipeline 'nope' not found" in missing.stderr


def _written(folder: Path) -> Path:
    path = folder / "ticks.sql"
    path.write_text(WINDOWED)
    return path
