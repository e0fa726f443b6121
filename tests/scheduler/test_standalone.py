"""The standalone backend on a real Spark standalone cluster: a master and two workers
from the pyspark distribution on loopback (the session's ``standalone_clusters``,
cluster ``a``), jobs submitted with spark-submit.

State lives in PostgreSQL (a cluster's executors cannot share an embedded
SQLite file); a job given SQLite state fails with the engine's own message.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spate.statestore import open_store
from tests.scheduler.clusters import Cluster, master_status
from tests.scheduler.conftest import running_scheduler
from tests.scheduler.harness import expected_bids, windowed_bids_sql

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("standalone")]

def test_a_bounded_pipeline_runs_to_finished_on_the_cluster(
        standalone_clusters: dict[str, Cluster], tmp_path: Path, redis_url: str, redis_prefix: str,
        control_url: str, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # The driver (in spark-submit, on this machine) and the executors meet on loopback.
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    spark_cluster = standalone_clusters["a"]  # two 1-core workers
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
        standalone_clusters: dict[str, Cluster], tmp_path: Path, redis_url: str, redis_prefix: str,
        control_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    spark_cluster = standalone_clusters["a"]
    with running_scheduler(tmp_path / "data", redis_url, redis_prefix, control_url,
                           cluster_backend="standalone",
                           spark_master=spark_cluster.master_url) as harness:
        pipeline_id = harness.add_pipeline(windowed_bids_sql("o.jsonl", 100, 2, 100))
        job = harness.wait_for_job(pipeline_id, ("finished", "failed"), timeout_s=180)
    assert job.state == "failed"
    assert job.failure_message is not None
    assert "sqlite" in job.failure_message and "postgresql://" in job.failure_message
    assert job.attempt == 0  # a refusal is not a crash: no restart
