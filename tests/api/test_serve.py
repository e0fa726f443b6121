"""``spate serve`` on the embedded defaults: SQLite, in-process worker, no services."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.api.serving import ServeProcess

pytestmark = pytest.mark.e2e


def test_serve_prints_a_working_key_and_a_restart_revokes_it(tmp_path: Path) -> None:
    first = ServeProcess(tmp_path, {})
    try:
        listed = first.http.get("/pipelines")
        assert listed.status_code == 200, listed.text
        assert listed.json()["items"] == []
        docs = httpx.get(f"{first.url}/api/v1/docs", timeout=30)
        assert docs.status_code == 200 and "swagger" in docs.text.lower()
        old_key = first.admin_key
    finally:
        assert first.stop() == 0, first.log()
    assert (tmp_path / ".spate" / "spate.db").exists()  # the embedded default's database

    second = ServeProcess(tmp_path, {})
    try:
        assert second.admin_key != old_key
        assert second.http.get("/pipelines").status_code == 200
        refused = second.http.get("/pipelines", headers={"Authorization": f"Bearer {old_key}"})
        assert refused.status_code == 401
    finally:
        assert second.stop() == 0, second.log()
    assert old_key not in second.log() and second.admin_key not in second.log()


def test_serve_refuses_to_start_where_it_cannot_sandbox(tmp_path: Path) -> None:
    # No bubblewrap on the PATH (or, run as another user than root: no root): this
    # host cannot sandbox tenants' jobs, and the default asks for the sandbox.
    no_tools = tmp_path / "bin"
    no_tools.mkdir()
    env = {**os.environ, "PATH": str(no_tools), "SPATE_SANDBOX": "required",
           "SPATE_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-m", "spate.api.cli", "serve", "--port", "0"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 2, done.stderr
    assert "error: this host cannot sandbox tenants' jobs" in done.stderr
    if os.geteuid() == 0:
        assert "bubblewrap (bwrap) is not installed" in done.stderr
    assert "SPATE_SANDBOX=off" in done.stderr  # what to do instead
    assert "serving" not in done.stdout
    assert not (tmp_path / "data" / "admin.key").exists()  # no key was issued
