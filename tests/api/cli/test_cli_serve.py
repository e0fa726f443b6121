"""The ``spate`` client commands as a person runs them: real processes against a real
``spate serve`` (embedded defaults: SQLite, in-process scheduler, local Spark jobs).

The lifecycle commands must print the job they asked for (not the previous one),
and a preview must stream rows and stop its job on Ctrl-C.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from spate.api.cli import main
from tests.api.cli.test_cli_startup import heavy_among, loaded_modules
from tests.api.serving import ServedTenant, ServeProcess, new_tenant, wait_for
from tests.conftest import SHARED_PLATFORM_KEY

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("serve")]

#: An unbounded pipeline: its jobs run until they are stopped.
ENDLESS_SQL = """
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '20');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter FROM ticks;
"""
PREVIEW_SQL = """
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '20');
SELECT counter, counter * 2 AS twice FROM ticks;
"""


@pytest.fixture(scope="module")
def server(shared_serve: ServeProcess) -> Iterator[ServedTenant]:
    """A tenant of its own on the session's shared server."""
    tenant = new_tenant(shared_serve, SHARED_PLATFORM_KEY, "cli")
    yield tenant
    tenant.close()


def _env(server: ServedTenant) -> dict[str, str]:
    return {**os.environ, "SPATE_SERVER": server.url, "SPATE_API_KEY": server.admin_key}


def spate(server: ServedTenant, *args: str) -> Result:
    """A client command, in this process (click's runner): what it prints and its exit
    code are what is tested here, not its process (the two tests below start real
    ones)."""
    return CliRunner().invoke(main, list(args), env={
        "SPATE_SERVER": server.url, "SPATE_API_KEY": server.admin_key})


def _json(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.stderr
    return dict(json.loads(result.stdout))


def test_a_client_command_against_a_server_loads_no_server_code(server: ServedTenant) -> None:
    modules = loaded_modules(["pipelines", "list"], ["keys", "list"], env={
        "SPATE_SERVER": server.url, "SPATE_API_KEY": server.admin_key})
    assert "httpx" in modules and heavy_among(modules) == []


@pytest.mark.spark
def test_start_and_rescale_print_the_new_job(server: ServedTenant, tmp_path: Path) -> None:
    sql_file = tmp_path / "endless.sql"
    sql_file.write_text(ENDLESS_SQL)
    first = _json(spate(server, "pipelines", "create", "endless", str(sql_file), "--json"))
    assert first["job"]["state"] == "running", first

    stopped = _json(spate(server, "pipelines", "stop", "endless", "--json"))
    assert (stopped["job"]["id"], stopped["job"]["state"]) == (first["job"]["id"], "stopped")

    started = _json(spate(server, "pipelines", "start", "endless", "--json"))
    assert started["job"]["id"] != first["job"]["id"]
    assert started["job"]["state"] == "running", started

    rescaled = _json(spate(server, "pipelines", "rescale", "endless", "2", "--json"))
    assert rescaled["job"]["id"] != started["job"]["id"]
    assert (rescaled["job"]["state"], rescaled["job"]["parallelism"]) == ("running", 2)

    as_table = spate(server, "pipelines", "get", "endless")
    assert as_table.stdout.splitlines()[1].split()[:4] == ["endless", "running", "running", "2"]
    deleted = spate(server, "pipelines", "delete", "endless", "--force")
    assert deleted.exit_code == 0, deleted.stderr


@pytest.mark.spark
def test_preview_streams_rows_up_to_the_limit(server: ServedTenant, tmp_path: Path) -> None:
    sql_file = tmp_path / "preview.sql"
    sql_file.write_text(PREVIEW_SQL)
    result = spate(server, "pipelines", "preview", str(sql_file), "--limit", "3", "--json")
    assert result.exit_code == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(rows) == 3 and all(r["twice"] == 2 * r["counter"] for r in rows)
    assert "preview ended: 3 rows; the row limit was reached" in result.stderr


@pytest.mark.spark
def test_ctrl_c_stops_a_preview_and_its_job(server: ServedTenant, tmp_path: Path) -> None:
    sql_file = tmp_path / "preview.sql"
    sql_file.write_text(PREVIEW_SQL)
    process = subprocess.Popen(
        [sys.executable, "-m", "spate.api.cli", "pipelines", "preview", str(sql_file),
         "--limit", "10000"], env=_env(server), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        header, first_row = process.stdout.readline(), process.stdout.readline()
        assert header.split() == ["COUNTER", "TWICE"], header
        assert len(first_row.split()) == 2, first_row
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert "preview stopped (Ctrl-C)" in stderr and "Traceback" not in stderr

    def preview_job() -> dict[str, Any]:
        jobs = server.http.get("/jobs", params={"kind": "preview"}).json()["items"]
        return dict(jobs[-1])

    ended = wait_for("the preview job to stop",
                     lambda: (job := preview_job())["state"] in ("stopped", "failed") and job)
    assert (ended["state"], ended["stop_mode"]) == ("stopped", "immediate")
