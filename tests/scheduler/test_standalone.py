"""The standalone backend on a real Spark standalone cluster: a master and two workers
from the pyspark distribution on loopback, jobs submitted with spark-submit.

State lives in PostgreSQL (a cluster's executors cannot share an embedded
SQLite file); a job given SQLite state fails with the engine's own message.
The cluster's processes are killed (by process group) even when a test fails.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spate.scheduler.backends.standalone import SPARK_HOME
from spate.statestore import open_store
from tests.scheduler.conftest import running_scheduler
from tests.scheduler.harness import expected_bids, windowed_bids_sql

pytestmark = pytest.mark.spark

CLUSTER_START_TIMEOUT_S = 120


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
class SparkCluster:
    master_url: str
    ui_port: int


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """``spark://127.0.0.1:<port>`` of a running master with two 1-core workers."""
    directory = tmp_path_factory.mktemp("spark-cluster")
    env = spark_env(directory)
    master_url, ui_port, master = start_master(directory / "master.log", env)
    daemons = [master]
    try:
        daemons += [start_worker(master_url, directory / f"worker-{index}", env)
                    for index in range(2)]
        wait_for_workers([ui_port], directory, each=2)
        yield SparkCluster(master_url, ui_port)
    finally:
        kill_daemons(daemons)


def test_a_bounded_pipeline_runs_to_finished_on_the_cluster(
        spark_cluster: SparkCluster, tmp_path: Path, redis_url: str, redis_prefix: str,
        control_url: str, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The driver (in spark-submit, on this machine) and the executors meet on loopback.
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    with running_scheduler(tmp_path / "data", redis_url, redis_prefix, control_url,
                           cluster_backend="standalone", spark_master=spark_cluster.master_url,
                           state_url=postgres_url) as harness:
        pipeline_id = harness.add_pipeline(windowed_bids_sql("bids.jsonl", 1000, 4, 2000),
                                           parallelism=2)
        out = harness.output(pipeline_id, "bids.jsonl")
        job = harness.wait_for_job(pipeline_id, ("finished", "failed"), timeout_s=300)
        try:
            assert job.state == "finished", job.failure_message
            assert job.backend == "standalone" and job.handle is not None
            assert job.handle["master"] == spark_cluster.master_url
            # The cluster's master ran it as an application of its own.
            status = master_status(spark_cluster.ui_port)
            apps = status.get("activeapps", []) + status.get("completedapps", [])
            assert f"spate-{job.id}" in [app["name"] for app in apps]
            rows = [json.loads(line) for line in out.read_text().splitlines()]
            windows = [row["window_end"] for row in rows]
            assert len(windows) == len(set(windows))
            assert sum(row["n"] for row in rows) == expected_bids(1000, 4)
            assert harness.checkpoints(job.id)
        finally:
            # The job kept its state in its tenant's own schema, under its own role.
            with open_store(harness.scheduler.workspace.tenants.state_url(job.tenant_id)) as store:
                store.pipeline(job.tenant_id, pipeline_id).drop()


def test_sqlite_state_on_a_cluster_fails_with_the_engines_message(
        spark_cluster: SparkCluster, tmp_path: Path, redis_url: str, redis_prefix: str,
        control_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    with running_scheduler(tmp_path / "data", redis_url, redis_prefix, control_url,
                           cluster_backend="standalone",
                           spark_master=spark_cluster.master_url) as harness:
        pipeline_id = harness.add_pipeline(windowed_bids_sql("o.jsonl", 100, 2, 100))
        job = harness.wait_for_job(pipeline_id, ("finished", "failed"), timeout_s=180)
    assert job.state == "failed"
    assert job.failure_message is not None
    assert "sqlite" in job.failure_message and "postgresql://" in job.failure_message
    assert job.attempt == 0  # a refusal is not a crash: no restart
