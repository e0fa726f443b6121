"""A tenant's compute unit, tried from the inside: who the process is, what it sees,
what it may write, and what its limits do. Needs a host that can sandbox (root,
bubblewrap, cgroups), as CI is; skipped elsewhere."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.scheduler.sandbox.cgroups import Limits, find_cgroups
from spate.scheduler.sandbox.unit import (
    ComputeUnit,
    TenantUser,
    UnitFolders,
    exit_reason,
    release,
    sandbox_problem,
)

PROBLEM = sandbox_problem()
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(PROBLEM is not None, reason=f"cannot sandbox here: {PROBLEM}")]

PROBE = r"""
import json, os, sys
def attempt(action):
    try:
        action()
        return "ok"
    except OSError as error:
        return type(error).__name__
def write(path):
    with open(path, "w") as handle:
        handle.write("x")
def read(path):
    with open(path, "rb") as handle:
        handle.read(1)
paths = json.loads(sys.argv[1])
print(json.dumps({
    "uid": os.getuid(), "euid": os.geteuid(), "gid": os.getgid(), "groups": os.getgroups(),
    "pid": os.getpid(), "env": dict(os.environ),
    "host_pids_visible": os.path.exists(f"/proc/{paths['host_pid']}"),
    "read": {name: attempt(lambda p=p: read(p)) for name, p in paths["read"].items()},
    "exists": {name: os.path.exists(p) for name, p in paths["read"].items()},
    "write": {name: attempt(lambda p=p: write(p)) for name, p in paths["write"].items()},
    "tmp": sorted(os.listdir("/tmp")),
}))
"""


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Path]:
    """A server's data folder with a secret, two tenants' folders, two job folders."""
    layout = {name: tmp_path / name for name in ("data", "tenant_a", "tenant_b", "job_a",
                                                 "job_b")}
    for folder in layout.values():
        folder.mkdir(mode=0o700)
    (layout["data"] / "secret.key").write_text("server secret")
    (layout["tenant_b"] / "orders.json").write_text("{}")
    (layout["job_b"] / "spec.json").write_text('{"password": "hunter2"}')
    (layout["tenant_a"] / "input.json").write_text("{}")
    return layout


@pytest.fixture
def unit(host: dict[str, Path]) -> Iterator[ComputeUnit]:
    created = ComputeUnit(f"test-{os.getpid()}-{host['data'].parent.name}",
                          TenantUser(2_100_001, "spate-t1"),
                          UnitFolders(host["job_a"], (host["tenant_a"],),
                                      host["data"] / "identities" / "job_a"),
                          Limits(cpu_cores=1.5, memory_bytes=512 * 1024 * 1024), find_cgroups())
    created.prepare()
    yield created
    created.remove()


def run(unit: ComputeUnit, argv: list[str], extra_env: dict[str, str] | None = None,
        timeout_s: float = 60) -> subprocess.CompletedProcess[str]:
    command, env = unit.command(argv, {})
    return subprocess.run(command, env={**env, **(extra_env or {})}, capture_output=True,
                          text=True, timeout=timeout_s, check=False)


def probe(unit: ComputeUnit, host: dict[str, Path]) -> dict[str, object]:
    site_packages = next(p for p in sys.path if p.endswith("site-packages"))
    paths = {
        "host_pid": os.getpid(),
        "read": {"server secret": str(host["data"] / "secret.key"),
                 "other tenant": str(host["tenant_b"] / "orders.json"),
                 "other job": str(host["job_b"] / "spec.json"),
                 "own input": str(host["tenant_a"] / "input.json"),
                 "shadow": "/etc/shadow", "host environ": f"/proc/{os.getpid()}/environ"},
        "write": {"own storage": str(host["tenant_a"] / "out.json"),
                  "own job": str(host["job_a"] / "events.jsonl"),
                  "site-packages": os.path.join(site_packages, "evil.pth"),
                  "code": str(Path(__file__).resolve().parents[2] / "engine" / "evil.py"),
                  "server data": str(host["data"] / "evil"),
                  "tmp": "/tmp/scratch"},
    }
    done = run(unit, [sys.executable, "-c", PROBE, json.dumps(paths)],
               extra_env={"SPATE_PLATFORM_ADMIN_KEY": "must-not-leak"})
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_the_job_runs_as_the_tenant_user_with_nothing_of_the_server(
        unit: ComputeUnit, host: dict[str, Path]) -> None:
    seen = probe(unit, host)
    assert (seen["uid"], seen["euid"], seen["gid"]) == (2_100_001, 2_100_001, 2_100_001)
    assert seen["groups"] == []
    env = seen["env"]
    assert isinstance(env, dict)
    assert not [key for key in env if key.startswith("SPATE_")]
    assert env["HOME"] == "/tmp" and env["USER"] == "spate-t1"
    assert seen["host_pids_visible"] is False  # its own PID namespace


def test_the_job_sees_only_its_own_folders(unit: ComputeUnit, host: dict[str, Path]) -> None:
    seen = probe(unit, host)
    assert seen["exists"] == {"server secret": False, "other tenant": False,
                              "other job": False, "own input": True, "shadow": False,
                              "host environ": False}
    read, write = seen["read"], seen["write"]
    assert isinstance(read, dict) and isinstance(write, dict)
    assert read["own input"] == "ok"
    assert {k: write[k] for k in ("own storage", "own job", "tmp")} == dict.fromkeys(
        ("own storage", "own job", "tmp"), "ok")
    for forbidden in ("site-packages", "code", "server data"):
        assert write[forbidden] != "ok", forbidden
    assert (host["tenant_a"] / "out.json").stat().st_uid == 2_100_001
    assert not (host["data"] / "evil").exists()


def test_tmp_is_private_to_the_job(unit: ComputeUnit, host: dict[str, Path]) -> None:
    marker = Path("/tmp") / f"spate-host-marker-{os.getpid()}"
    marker.write_text("host")
    try:
        seen = probe(unit, host)
        assert marker.name not in seen["tmp"]  # type: ignore[operator]
    finally:
        marker.unlink()


def test_a_job_over_its_memory_is_killed_and_says_so(unit: ComputeUnit) -> None:
    hog = "x = [bytearray(16 * 1024 * 1024) for _ in range(64)]; print('survived')"
    done = run(unit, [sys.executable, "-c", hog])
    assert done.returncode != 0 and "survived" not in done.stdout
    reason = exit_reason(unit.handle())
    assert reason is not None and "memory limit of 512 MB" in reason


def test_cpu_and_memory_limits_are_set_from_the_unit(unit: ComputeUnit) -> None:
    host = find_cgroups()
    if host.version == 1:
        cpu = host.mounts["cpu"] / "spate" / unit.name
        assert int((cpu / "cpu.cfs_quota_us").read_text()) == 150_000
        memory = host.mounts["memory"] / "spate" / unit.name
        assert int((memory / "memory.limit_in_bytes").read_text()) == 512 * 1024 * 1024
    else:
        group = host.mounts["unified"] / "spate" / unit.name
        assert (group / "cpu.max").read_text().split() == ["150000", "100000"]
        assert int((group / "memory.max").read_text()) == 512 * 1024 * 1024


def test_releasing_a_unit_kills_what_is_left_and_removes_its_groups(
        unit: ComputeUnit) -> None:
    command, env = unit.command(["/bin/sleep", "600"], {})
    process = subprocess.Popen(command, env=env)
    try:
        for _ in range(100):
            if unit.cgroups.pids():
                break
            subprocess.run(["sleep", "0.05"], check=False)
        assert unit.cgroups.pids()
        release(unit.handle())
        assert process.wait(timeout=10) != 0
        assert not any(path.exists() for path in unit.cgroups.paths)
    finally:
        process.kill()
