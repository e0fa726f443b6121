"""Spark standalone clusters on loopback for the scheduler's end-to-end tests: masters
and 1-core workers from the pyspark distribution, started with ``spark-class``.

The tests that need a cluster (``test_standalone.py``, ``test_move.py``) share the
``standalone_clusters`` fixture (``conftest.py``): two clusters started once per
test session, on the one worker that runs the ``standalone`` group. The daemons
are killed (by process group, which takes the executors with them) at the end.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spate.scheduler.backends.standalone import SPARK_HOME
from tests.ports import free_port

CLUSTER_START_TIMEOUT_S = 120


def start_daemon(args: list[str], log_path: Path, env: dict[str, str],
                 cpus: str | None = None) -> subprocess.Popen[bytes]:
    """``spark-class ARGS`` in a session of its own; ``cpus``: the CPUs it may use."""
    command = [str(SPARK_HOME / "bin" / "spark-class"), *args]
    if cpus is not None:
        command = ["taskset", "-c", cpus, *command]
    with log_path.open("ab") as log:
        return subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)


def spark_env(directory: Path) -> dict[str, str]:
    """The environment of a cluster's daemons, logging into ``directory``."""
    return dict(os.environ, SPARK_HOME=str(SPARK_HOME), SPARK_LOCAL_IP="127.0.0.1",
                SPARK_LOG_DIR=str(directory), SPARK_WORKER_DIR=str(directory / "work"))


def start_master(log_path: Path, env: dict[str, str]
                 ) -> tuple[str, int, subprocess.Popen[bytes]]:
    """A standalone master on free ports: its URL, its web UI's port and its process."""
    port, ui_port = free_port(), free_port()
    daemon = start_daemon(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                           "--port", str(port), "--webui-port", str(ui_port)], log_path, env)
    return f"spark://127.0.0.1:{port}", ui_port, daemon


def start_worker(master_url: str, work_dir: Path, env: dict[str, str], memory: str = "1g",
                 cpus: str | None = None) -> subprocess.Popen[bytes]:
    """A 1-core worker of ``master_url``, logging beside ``work_dir``."""
    return start_daemon(
        ["org.apache.spark.deploy.worker.Worker", master_url, "--cores", "1",
         "--memory", memory, "--webui-port", str(free_port()), "--work-dir", str(work_dir)],
        work_dir.with_name(f"{work_dir.name}.log"), env, cpus=cpus)


def wait_for_workers(ui_ports: list[int], directory: Path, each: int = 1) -> None:
    """Until every master has ``each`` live workers; fails with the daemons' logs."""
    deadline = time.monotonic() + CLUSTER_START_TIMEOUT_S
    while any(alive_workers(port) < each for port in ui_ports):
        if time.monotonic() > deadline:
            logs = "\n".join(p.read_text()[-1500:] for p in directory.glob("*.log"))
            raise AssertionError(f"the Spark cluster did not come up:\n{logs}")
        time.sleep(0.5)


def kill_daemons(daemons: list[subprocess.Popen[bytes]]) -> None:
    """Kill each daemon's process group (a worker takes its executors with it)."""
    for daemon in daemons:
        try:
            os.killpg(daemon.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        daemon.wait(30)


def master_status(ui_port: int) -> dict[str, Any]:
    """The master's status page as JSON (workers, applications)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as answer:
            return dict(json.load(answer))
    except OSError:
        return {}


def alive_workers(ui_port: int) -> int:
    workers = master_status(ui_port).get("workers", [])
    return sum(1 for worker in workers if worker.get("state") == "ALIVE")


@dataclass(frozen=True)
class Cluster:
    name: str
    master_url: str
    ui_port: int

    def app_names(self) -> list[str]:
        status = master_status(self.ui_port)
        return [app["name"] for app in status.get("activeapps", []) +
                status.get("completedapps", [])]


def start_clusters(directory: Path, workers: dict[str, int]) -> Iterator[dict[str, Cluster]]:
    """Clusters named by ``workers``' keys, each a master and that many 1-core workers, in
    folders of their own under ``directory``; ``yield from`` it in a fixture."""
    clusters: dict[str, Cluster] = {}
    daemons: list[subprocess.Popen[bytes]] = []
    try:
        for name, count in workers.items():
            env = dict(spark_env(directory), SPARK_WORKER_DIR=str(directory / f"work-{name}"))
            master_url, ui_port, master = start_master(directory / f"master-{name}.log", env)
            clusters[name] = Cluster(name, master_url, ui_port)
            daemons.append(master)
            daemons += [start_worker(master_url, directory / f"work-{name}-{index}", env)
                        for index in range(count)]
        for name, count in workers.items():
            wait_for_workers([clusters[name].ui_port], directory, each=count)
        yield clusters
    finally:
        kill_daemons(daemons)
