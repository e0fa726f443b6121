"""``spate applications``: the operator's list and drain, on the server's data folder.
(Draining a running application is tested end to end in
``tests/scheduler/test_applications.py``.)"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import psutil
import pytest
from click.testing import CliRunner

from spate.api.cli.applications import applications


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPATE_DATA_DIR", str(tmp_path))
    return tmp_path


def _record(data_dir: Path, tenant: str, pid: int) -> None:
    root = data_dir / "applications"
    (root / tenant).mkdir(parents=True)
    process = psutil.Process(pid)  # the record names it as the launcher does
    (root / f"{tenant}.json").write_text(json.dumps({
        "pid": pid, "host": socket.gethostname(), "create_time": process.create_time(),
        "launch_id": "l1", "size": {"memory_mb": 4096, "cpu_cores": 2.0}}))


def test_drain_names_a_tenant_without_an_application(data_dir: Path) -> None:
    result = CliRunner().invoke(applications, ["drain", "t_nobody"])
    assert result.exit_code == 1
    assert "tenant t_nobody has no application running" in result.output


def test_drain_wants_tenants_or_all_but_not_both(data_dir: Path) -> None:
    assert CliRunner().invoke(applications, ["drain"]).exit_code == 2
    assert CliRunner().invoke(applications, ["drain", "t_a", "--all"]).exit_code == 2
    assert CliRunner().invoke(applications, ["drain", "--all"]).exit_code == 0


def test_list_and_drain_a_running_application(data_dir: Path) -> None:
    _record(data_dir, "t_live", os.getpid())  # this process stands in for it
    listed = CliRunner().invoke(applications, ["list"])
    assert listed.exit_code == 0, listed.output
    row = json.loads(listed.output)
    assert row["tenant"] == "t_live" and row["state"] == "running"
    assert row["size"] == {"memory_mb": 4096, "cpu_cores": 2.0}

    drained = CliRunner().invoke(applications, ["drain", "t_live"])
    assert drained.exit_code == 0 and "draining the application of tenant t_live" in \
        drained.output
    assert (data_dir / "applications" / "t_live" / "stop").exists()
    assert json.loads(CliRunner().invoke(applications, ["list"]).output)["state"] == "draining"


def test_drain_takes_only_the_names_of_known_applications(data_dir: Path) -> None:
    _record(data_dir, "t_live", os.getpid())
    # the same record named by a path: refused, as is every name not an application's
    result = CliRunner().invoke(applications, ["drain", "../applications/t_live"])
    assert result.exit_code == 1
    assert "has no application running" in result.output
    assert not (data_dir / "applications" / "t_live" / "stop").exists()
