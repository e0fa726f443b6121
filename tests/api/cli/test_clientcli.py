"""``spate pipelines …`` and ``spate keys …`` against a real app and database."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from spate.api.cli import main
from spate.api.cli.keys import keys
from spate.api.cli.pipelines import pipelines
from tests.api.job_rows import insert_job, insert_usage, update_job
from tests.api.support import TenantKeys, TestClient, new_tenant, pipeline_sql

#: How the API (not the CLI) says what to do; none of it may reach the terminal.
API_VERBS = ("PATCH", "PUT /", "POST /", "DELETE /", "?force", "stop=")


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

    # No scheduler runs here: the controls only record the desired state.
    started = spate(client, developer, "pipelines", "start", "clicks", "--no-wait", "--json")
    assert json.loads(started.stdout)["desired_state"] == "running"
    stopped = spate(client, developer, "pipelines", "stop", "clicks", "--mode", "immediate",
                    "--no-wait", "--json")
    body = json.loads(stopped.stdout)
    assert (body["desired_state"], body["stop_mode"]) == ("stopped", "immediate")

    rescaled = spate(client, developer, "pipelines", "rescale", "clicks", "3", "--json")
    assert json.loads(rescaled.stdout)["parallelism"] == 3  # stopped: nothing to wait for
    restarted = spate(client, developer, "pipelines", "restart", "clicks", "--without-state",
                      "--no-wait", "--json")
    assert restarted.exit_code == 0, restarted.output
    assert json.loads(restarted.stdout)["desired_state"] == "running"

    listed = spate(client, developer, "pipelines", "list")
    assert listed.stdout.splitlines()[0].split()[:2] == ["NAME", "DESIRED"]
    assert "clicks" in listed.stdout
    assert spate(client, developer, "pipelines", "get", "clicks").exit_code == 0


def test_autoscale_is_set_on_create_changed_and_turned_off(client: TestClient,
                                                          tenant: TenantKeys,
                                                          tmp_path: Path) -> None:
    developer = tenant.keys["developer"]
    sql_file = tmp_path / "p.sql"
    sql_file.write_text(pipeline_sql())
    created = spate(client, developer, "pipelines", "create", "auto", str(sql_file),
                    "--autoscale", "2:4", "--stopped", "--json")
    assert created.exit_code == 0, created.output
    body = json.loads(created.stdout)
    assert (body["parallelism"], body["autoscale"]["min"], body["autoscale"]["max"]) == (
        2, 2, 4)  # starts at the range's minimum
    changed = spate(client, developer, "pipelines", "autoscale", "auto", "1:3")
    assert changed.exit_code == 0, changed.output
    assert "autoscale: 1–3" in changed.stdout
    off = spate(client, developer, "pipelines", "autoscale", "auto", "off", "--json")
    assert json.loads(off.stdout)["autoscale"] is None
    bad = spate(client, developer, "pipelines", "autoscale", "auto", "4")
    assert bad.exit_code == 2 and "is not MIN:MAX (e.g. 1:4) or 'off'" in bad.stderr
    inverted = spate(client, developer, "pipelines", "autoscale", "auto", "4:2")
    assert inverted.exit_code == 1 and "autoscale min (4) is above its max (2)" in inverted.stderr


def test_bad_sql_prints_the_located_diagnostic_once(client: TestClient, tenant: TenantKeys,
                                                    tmp_path: Path) -> None:
    sql_file = tmp_path / "bad.sql"
    sql_file.write_text("CREATE TABLE t WITH (connector = 'impulse');\nSELEC 1;\n")
    result = spate(client, tenant.keys["developer"], "pipelines", "create", "bad",
                   str(sql_file))
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{sql_file}:2:1: error: syntax error: a statement starts with")


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


def _one_error_line(result: Result) -> str:
    """The refusal's only line, checked to speak CLI, not HTTP."""
    assert result.exit_code == 1, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ")
    assert not any(verb in line for verb in API_VERBS), line
    return line


def test_refusals_name_cli_commands_not_api_verbs(client: TestClient, tenant: TenantKeys,
                                                   tmp_path: Path) -> None:
    developer = tenant.keys["developer"]
    sql_file = tmp_path / "p.sql"
    sql_file.write_text(pipeline_sql())
    created = spate(client, developer, "pipelines", "create", "busy", str(sql_file),
                    "--stopped", "--json")
    assert created.exit_code == 0, created.output
    insert_job(client.app, tenant.id, json.loads(created.stdout)["id"], state="running")

    busy = _one_error_line(spate(client, developer, "pipelines", "delete", "busy"))
    assert "spate pipelines stop busy" in busy
    assert "spate pipelines delete busy --force" in busy

    again = _one_error_line(spate(client, developer, "pipelines", "create", "busy",
                                  str(sql_file), "--stopped"))
    assert "already exists" in again and "spate pipelines delete busy" in again

    missing = _one_error_line(spate(client, developer, "pipelines", "get", "nope"))
    assert "pipeline 'nope' not found" in missing and "spate pipelines list" in missing

    last_admin = _one_error_line(spate(client, tenant.keys["admin"], "keys", "revoke",
                                       tenant.key_ids["admin"]))
    assert "spate keys create NAME --role admin" in last_admin

    wrong_key = _one_error_line(spate(client, "spate_not_a_key", "pipelines", "list"))
    assert "SPATE_API_KEY" in wrong_key


def test_schema_refusals_fit_on_one_line(client: TestClient, tenant: TenantKeys,
                                         tmp_path: Path) -> None:
    sql_file = tmp_path / "p.sql"
    sql_file.write_text(pipeline_sql())
    line = _one_error_line(spate(client, tenant.keys["developer"], "pipelines", "create",
                                 "Not A Name", str(sql_file), "--stopped"))
    assert "the request does not match the schema: name: " in line


def test_help_needs_no_key_or_server() -> None:
    for group in (pipelines, keys):
        for command in ["", *group.commands]:
            args = [group.name or "", *([command] if command else []), "--help"]
            result = CliRunner().invoke(main, args, prog_name="spate", env={
                "SPATE_API_KEY": None, "SPATE_SERVER": "http://127.0.0.1:9"})
            assert result.exit_code == 0, (args, result.output)
            assert result.stdout.startswith(f"Usage: spate {' '.join(args[:-1])}")


def test_a_missing_key_is_one_clear_line() -> None:
    result = CliRunner().invoke(main, ["pipelines", "list"], env={"SPATE_API_KEY": None})
    line = _one_error_line(result)
    assert "no API key" in line and "SPATE_API_KEY" in line


def test_validate_prints_ok_and_the_plan_summary(client: TestClient, tenant: TenantKeys,
                                                 tmp_path: Path) -> None:
    sql_file = tmp_path / "ok.sql"
    sql_file.write_text(pipeline_sql())
    result = spate(client, tenant.keys["viewer"], "pipelines", "validate", str(sql_file))
    assert result.exit_code == 0, result.output
    lines = [line.strip() for line in result.stdout.splitlines()]
    assert lines[0] == f"{sql_file}: OK"
    assert "sources:   src (impulse)" in lines and "sinks:     out (blackhole)" in lines
    assert lines[-1] == "bounded: it finishes when its input ends"
    assert result.stderr == ""

    explained = spate(client, tenant.keys["viewer"], "pipelines", "validate", str(sql_file),
                      "--explain")
    assert "Pipeline plan" in explained.stdout and "[spark]" in explained.stdout
    # Nothing was stored.
    assert spate(client, tenant.keys["viewer"], "pipelines", "list").stdout.count("\n") == 1


def test_validate_locates_each_problem_and_exits_2(client: TestClient, tenant: TenantKeys,
                                                   tmp_path: Path) -> None:
    sql_file = tmp_path / "typo.sql"
    sql_file.write_text("CREATE TABLE src WITH (connector = 'impulse', event_rate = '1');\n"
                        "SELECT countr FROM src;\n")
    result = spate(client, tenant.keys["viewer"], "pipelines", "validate", str(sql_file))
    assert result.exit_code == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"{sql_file}:2:8: error: ") and "countr" in line

    as_json = spate(client, tenant.keys["viewer"], "pipelines", "validate", str(sql_file),
                    "--json")
    assert as_json.exit_code == 2 and json.loads(as_json.stdout)["valid"] is False


def test_start_waits_for_the_new_job_and_prints_it(client: TestClient, tenant: TenantKeys,
                                                   tmp_path: Path) -> None:
    """The test plays the scheduler: once the pipeline should run, it records a new job
    (starting, then running) as the scheduler does."""
    developer = tenant.keys["developer"]
    sql_file = tmp_path / "p.sql"
    sql_file.write_text(pipeline_sql())
    pipeline = json.loads(spate(client, developer, "pipelines", "create", "waits",
                                str(sql_file), "--stopped", "--json").stdout)
    old_job = insert_job(client.app, tenant.id, pipeline["id"], state="stopped")

    def scheduler() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            body = client.get("/api/v1/pipelines/waits", headers=tenant.auth()).json()
            if body["desired_state"] == "running":
                new_job = insert_job(client.app, tenant.id, pipeline["id"], state="starting")
                time.sleep(1.5)
                update_job(client.app, new_job, state="running")
                return
            time.sleep(0.05)

    playing = threading.Thread(target=scheduler)
    playing.start()
    started = spate(client, developer, "pipelines", "start", "waits", "--json")
    playing.join()
    assert started.exit_code == 0, started.output
    job = json.loads(started.stdout)["job"]
    assert job["id"] != old_job and job["state"] == "running"
    assert f"waits: job {job['id']} running" in started.stderr


def test_a_wait_that_runs_out_says_where_to_look(client: TestClient, tenant: TenantKeys,
                                                 tmp_path: Path) -> None:
    developer = tenant.keys["developer"]
    sql_file = tmp_path / "p.sql"
    sql_file.write_text(pipeline_sql())
    assert spate(client, developer, "pipelines", "create", "slow", str(sql_file),
                 "--stopped").exit_code == 0
    line = _one_error_line(spate(client, developer, "pipelines", "start", "slow",
                                 "--timeout", "1"))
    assert "after 1 s" in line and "spate pipelines get slow" in line


def test_quotas_shows_each_limit_value_and_use(client: TestClient, tenant: TenantKeys,
                                               tmp_path: Path) -> None:
    sql_file = tmp_path / "p.sql"
    sql_file.write_text(pipeline_sql())
    assert spate(client, tenant.keys["developer"], "pipelines", "create", "two",
                 str(sql_file), "-p", "2", "--no-wait").exit_code == 0
    shown = spate(client, tenant.keys["viewer"], "quotas")
    assert shown.exit_code == 0, shown.output
    lines = [line.split() for line in shown.stdout.splitlines()]
    assert lines[0] == ["plan:", "default"] and lines[1] == ["LIMIT", "VALUE", "CURRENT"]
    rows = {row[0]: row[1:] for row in lines[2:]}
    assert rows["running_pipelines"] == ["20", "1"] and rows["compute_units"] == ["32", "2"]
    assert rows["source_rate"] == ["1000000", "-"]
    as_json = json.loads(spate(client, tenant.keys["viewer"], "quotas", "--json").stdout)
    assert as_json["plan"] == "default" and len(as_json["limits"]) == 7
    refused = spate(client, "spate_x_y", "quotas")
    assert refused.exit_code == 1 and "invalid or revoked" in refused.stderr


def test_usage_and_invoices_show_what_the_tenant_used_and_owes(client: TestClient,
                                                               tenant: TenantKeys) -> None:
    created = client.post("/api/v1/pipelines", headers=tenant.auth("developer"),
                          json={"name": "clicks", "sql": pipeline_sql()})
    assert created.status_code == 201, created.text
    insert_usage(client.app, tenant.id, created.json()["id"], [
        (datetime(2026, 10, 4, 12, 0, tzinfo=UTC), "compute_unit_seconds", 7200.0)])
    admin = tenant.keys["admin"]
    shown = spate(client, admin, "usage", "--start", "2026-10-01T00:00:00Z",
                  "--end", "2026-11-01T00:00:00Z")
    assert shown.exit_code == 0, shown.output
    lines = [line.split() for line in shown.stdout.splitlines()]
    assert lines[0] == ["PERIOD", "PIPELINE", "DIMENSION", "QUANTITY", "COST"]
    assert lines[1] == ["2026-10-04", "clicks", "compute_unit_seconds", "7200", "0.2400"]
    assert lines[-1] == ["total:", "0.24", "USD"]
    listed = spate(client, admin, "invoices")
    assert ["2026-10", "closed", "0.24", "USD"] in [line.split()
                                                    for line in listed.stdout.splitlines()]
    as_csv = spate(client, admin, "invoices", "2026-10", "--csv")
    assert as_csv.exit_code == 0 and as_csv.stdout.startswith("period,pipeline_id,")
    assert "2026-10,,,total,,,,0.24,USD," in as_csv.stdout
    refused = spate(client, tenant.keys["developer"], "usage")
    assert refused.exit_code == 1 and "admin or billing role" in refused.stderr


def test_a_key_is_trimmed_and_a_malformed_one_is_refused_without_showing_it(
        client: TestClient, tenant: TenantKeys, monkeypatch: pytest.MonkeyPatch) -> None:
    admin = tenant.keys["admin"]
    for padded in (f"{admin} ", f"{admin}\n", f"\t{admin}\r\n"):  # a key read from a file
        listed = spate(client, padded, "pipelines", "list")
        assert listed.exit_code == 0, listed.output
    outputs = []
    for broken in (f"{admin[:12]}\n{admin[12:]}", f"{admin[:12]} {admin[12:]}",
                   f"{admin}\x1b", f"{admin[:-1]}é"):
        refused = spate(client, broken, "pipelines", "list")
        assert refused.exit_code == 1
        assert "SPATE_API_KEY" in refused.stderr and "not shown" in refused.stderr
        outputs.append(refused.output)
    # An unreachable server: the HTTP stack's error is shown, the key is not.
    unreachable = CliRunner().invoke(main, ["pipelines", "list"], env={
        "SPATE_API_KEY": admin, "SPATE_SERVER": "http://127.0.0.1:9"})
    assert unreachable.exit_code == 1 and "cannot reach" in unreachable.stderr
    outputs.append(unreachable.output)
    # The Terraform provider: a diagnostic naming the attribute, never the value.
    from tf.utils import Diagnostics

    from spate.api.client.terraform.provider import SpateProvider
    for key in (f"{admin}\x07", f"{admin[:5]} {admin[5:]}"):
        diagnostics = Diagnostics()
        monkeypatch.setenv("SPATE_API_KEY", key)
        SpateProvider().configure_provider(diagnostics, {})
        assert diagnostics.has_errors() and "api_key (or SPATE_API_KEY)" in str(diagnostics)
        outputs.append(str(diagnostics))
    for output in outputs:
        assert admin not in output and admin[6:18] not in output and admin[-12:] not in output
