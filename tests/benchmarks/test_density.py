"""Density: what 10 small pipelines of 2 tenants, then 50 of 5, cost on one machine, and
what idle ones cost after they scaled to zero.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_density.py -s``

A real ``spate serve`` on its defaults (each tenant's pipelines run as queries of
that tenant's one warm application).  Five tenants start ten pipelines each:
``impulse`` at 10 rows/s into ``blackhole``: first five each for two of them
(ten pipelines, sampled once they run), then the rest.  Once every job has committed
epochs or failed for good, the server's processes (API, scheduler, and the
tenants' applications it launched: their sandboxes, Python drivers, JVMs and
Python workers) are sampled for a minute: resident memory (RSS summed over
processes, so shared pages count more than once: an upper bound) and CPU time
over wall time; the running and failed jobs are counted.

Then those pipelines stop, and a sixth tenant starts ten pipelines whose
source has a row only every 100 s; with ``SPATE_IDLE_STOP_S = 5`` they go idle
after their first row and the tenant's application exits
``SPATE_APPLICATION_IDLE_EXIT_S = 10`` s later.  The benchmark waits until no
JVM is left and samples the server again.  Written to ``results.json`` under
``density``; nothing is asserted about speed or size.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest

from tests.api.serving import ServeProcess, wait_for
from tests.benchmarks.workloads import save_result

pytestmark = [pytest.mark.benchmark, pytest.mark.e2e, pytest.mark.timeout(3600)]

PLATFORM_KEY = secrets.token_urlsafe(32)
TENANTS = 5
PIPELINES_PER_TENANT = 10
SAMPLE_S = 60.0


def ticking_sql(rate: float) -> str:
    return f"""
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '{rate}');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter, subtask_index FROM ticks;
"""


@dataclass
class Tree:
    """The server's process tree at one moment."""

    rss_bytes: int
    cpu_s: float
    processes: int
    jvms: int
    command_lines: list[str]


def tree_of(pid: int, workdir: Path) -> Tree:
    """The server and its descendants, and the processes it launched detached (the
    tenants' applications: their command lines name a folder under ``workdir``)."""
    root = psutil.Process(pid)
    tops = [root]
    for process in psutil.process_iter():
        try:
            if process.pid != pid and str(workdir) in " ".join(process.cmdline()):
                tops.append(process)
        except psutil.Error:
            continue
    members: dict[int, psutil.Process] = {}
    for top in tops:
        try:
            members.update((p.pid, p) for p in (top, *top.children(recursive=True)))
        except psutil.Error:  # it ended meanwhile
            continue
    rss, cpu, jvms, lines = 0, 0.0, 0, []
    for process in members.values():
        try:
            with process.oneshot():
                rss += process.memory_info().rss
                times = process.cpu_times()
                cpu += times.user + times.system
                line = " ".join(process.cmdline())
            jvm = process.name() == "java"
        except psutil.Error:
            continue
        lines.append(line)
        jvms += jvm
    return Tree(rss, cpu, len(members), jvms, lines)


def sample(pid: int, workdir: Path, seconds: float) -> dict[str, Any]:
    """Memory at the end and CPU cores used on average over ``seconds``."""
    before, started = tree_of(pid, workdir), time.monotonic()
    time.sleep(seconds)
    after, wall = tree_of(pid, workdir), time.monotonic() - started
    return {"rss_gb": round(after.rss_bytes / 2**30, 2),
            "cpu_cores": round(max(0.0, after.cpu_s - before.cpu_s) / wall, 2),
            "processes": after.processes, "jvms": after.jvms}


def new_tenant(http: httpx.Client, name: str) -> dict[str, str]:
    created = http.post("/tenants", json={"name": name},
                        headers={"Authorization": f"Bearer {PLATFORM_KEY}"})
    assert created.status_code == 201, created.text
    return {"Authorization": f"Bearer {created.json()['admin_key']['key']}"}


def start_pipelines(http: httpx.Client, headers: dict[str, str], prefix: str,
                    rate: float, numbers: range = range(PIPELINES_PER_TENANT)) -> list[str]:
    names = [f"{prefix}-{i}" for i in numbers]
    for name in names:
        response = http.post("/pipelines", headers=headers,
                             json={"name": name, "sql": ticking_sql(rate)})
        assert response.status_code == 201, response.text
    return names


def jobs_in(http: httpx.Client, headers: dict[str, str]) -> list[dict[str, Any]]:
    items = http.get("/pipelines", headers=headers, params={"limit": 100}).json()["items"]
    return [item["job"] or {} for item in items]


def settled(job: dict[str, Any]) -> bool:
    return job.get("state") == "failed" or (
        job.get("state") == "running" and (job.get("last_epoch") or 0) >= 2)


def test_fifty_small_pipelines_and_idle_ones(tmp_path: Path) -> None:
    serve = ServeProcess(tmp_path, {"SPATE_DATA_DIR": str(tmp_path / "data"),
                                    "SPATE_PLATFORM_ADMIN_KEY": PLATFORM_KEY,
                                    "SPATE_RATE_LIMIT_PER_MINUTE": "0",
                                    "SPATE_IDLE_STOP_S": "5",
                                    "SPATE_APPLICATION_IDLE_EXIT_S": "10"})
    pid = serve.process.pid
    try:
        with httpx.Client(base_url=serve.url + "/api/v1", timeout=120) as http:
            quiet = sample(pid, tmp_path, 10)
            tenants = [new_tenant(http, f"busy-{t}") for t in range(TENANTS)]
            # Ten pipelines of two tenants first (five each), then the rest.
            half = range(PIPELINES_PER_TENANT // 2)
            for index, headers in enumerate(tenants[:2]):
                start_pipelines(http, headers, f"t{index}", 10, half)
            wait_for("the first ten jobs to run or fail", lambda: all(
                settled(job) for headers in tenants[:2] for job in jobs_in(http, headers)),
                timeout_s=600, interval_s=5)
            states = [job.get("state") for headers in tenants[:2]
                      for job in jobs_in(http, headers)]
            ten = {**sample(pid, tmp_path, SAMPLE_S), "running": states.count("running"),
                   "failed": states.count("failed")}
            started = time.monotonic()
            for index, headers in enumerate(tenants):
                rest = range(len(half) if index < 2 else 0, PIPELINES_PER_TENANT)
                start_pipelines(http, headers, f"t{index}", 10, rest)
            # Every job commits epochs, or fails for good (its restarts spent).
            wait_for("every job to run or fail", lambda: all(
                settled(job) for headers in tenants for job in jobs_in(http, headers)),
                timeout_s=1500, interval_s=5)
            settled_s = time.monotonic() - started
            states = [job.get("state") for headers in tenants for job in jobs_in(http, headers)]
            busy = {**sample(pid, tmp_path, SAMPLE_S), "running": states.count("running"),
                    "failed": states.count("failed")}
            for index, headers in enumerate(tenants):
                for i in range(PIPELINES_PER_TENANT):
                    http.patch(f"/pipelines/t{index}-{i}", headers=headers,
                               json={"stop": "immediate"})
            wait_for("the busy tenants' applications to exit",
                     lambda: tree_of(pid, tmp_path).jvms == 0, timeout_s=600, interval_s=2)

            sleepy = new_tenant(http, "sleepy")
            start_pipelines(http, sleepy, "s", 0.01)
            wait_for("the slow pipelines to go idle", lambda: all(
                job.get("state") == "idle" for job in jobs_in(http, sleepy)), timeout_s=600)
            wait_for("the idle tenant's application to exit",
                     lambda: tree_of(pid, tmp_path).jvms == 0, timeout_s=300)
            with_idle = sample(pid, tmp_path, SAMPLE_S)
            idle_jobs = sum(job.get("state") == "idle" for job in jobs_in(http, sleepy))
    finally:
        serve.stop()
    result = {"tenants": TENANTS, "pipelines": TENANTS * PIPELINES_PER_TENANT,
              "rows_per_s_each": 10, "seconds_until_settled": round(settled_s, 1),
              "server_alone": quiet, "ten_of_two_tenants": ten, "busy": busy,
              "idle": {"pipelines": PIPELINES_PER_TENANT, "idle_jobs": idle_jobs,
                       "server_with_them": with_idle}}
    print(result)
    save_result("density", result)
