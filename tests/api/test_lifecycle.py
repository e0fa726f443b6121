"""The whole life of a pipeline over HTTP, against a real ``spate serve``.

The server runs on PostgreSQL (control plane) and Redis (Celery broker), with
a real scheduler worker and local Spark jobs. A pipeline is created, runs and
writes output, is stopped with a checkpoint, restarted, rescaled from 1 to 2,
and runs to the end of its bounded input; its output must equal an
uninterrupted run of the same SQL. Its sink is one of the tenant's connection
tables, whose path is a secret: the job gets it decrypted through its spec.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from pyspark.sql import SparkSession

from tests.api.serving import ServeProcess, wait_for
from tests.engine.harness import run_pipeline
from tests.scheduler.harness import written_lines

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

SOURCE = """
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '1000', runtime = '40',
    rate_limited = '{rate_limited}', max_events_per_batch = '2000',
    'nexmark.base_time_ms' = '1700000000000');
"""
SINK = """
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
    type = 'sink');
"""
QUERY = """
INSERT INTO out
SELECT w.start AS second, bucket, bids, top
FROM (SELECT bid.auction % 5 AS bucket, TUMBLE(INTERVAL '1' SECOND) AS w,
             count(*) AS bids, max(bid.price) AS top
      FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2);
"""


@pytest.fixture
def server(tmp_path: Path, throwaway_postgres: Any, redis_url: str,
           redis_prefix: str) -> Iterator[ServeProcess]:
    run_id = secrets.token_hex(4)
    serve = ServeProcess(tmp_path, {
        "SPATE_DATABASE_URL": throwaway_postgres.create(),
        "SPATE_BROKER_URL": redis_url,
        "SPATE_REDIS_URL": redis_url,
        "SPATE_REDIS_KEY_PREFIX": f"{redis_prefix}{run_id}:",
        "SPATE_SCHEDULER_QUEUE": f"{redis_prefix}{run_id}",
        "SPATE_DATA_DIR": str(tmp_path / "data"),
        "SPATE_STATE_URL": f"sqlite:///{tmp_path / 'state.db'}",
        "SPATE_RECONCILE_INTERVAL_S": "1",
    })
    try:
        yield serve
    finally:
        status = serve.stop()
        assert status == 0, serve.log()
        assert serve.leftovers == [], "stopping spate serve left its tenants' processes"


def test_create_stop_restart_rescale_equals_an_uninterrupted_run(
        server: ServeProcess, spark: SparkSession, tmp_path: Path) -> None:
    http = server.http
    tenant_id = http.get("/me").json()["tenant_id"]
    # The sink's path is relative to the tenant's storage root (under the data folder).
    out = tmp_path / "data" / "tenants" / tenant_id / "out" / "out.jsonl"

    def pipeline() -> dict[str, Any]:
        response = http.get("/pipelines/lifecycle")
        assert response.status_code == 200, response.text
        return dict(response.json())

    def job_in(*states: str) -> dict[str, Any] | None:
        job = pipeline()["job"]
        if job is not None and job["state"] == "failed":
            raise AssertionError(f"job failed: {job['failure_message']}\n{server.log()}")
        return job if job is not None and job["state"] in states else None

    table = http.post("/connection-tables", json={
        "name": "out", "connector": "single_file",
        "config": {"format": "json", "type": "sink"}, "secrets": {"path": "out/out.jsonl"}})
    assert table.status_code == 201, table.text
    created = http.post("/pipelines", json={
        "name": "lifecycle", "parallelism": 1,
        "sql": SOURCE.format(rate_limited="true") + QUERY})
    assert created.status_code == 201, created.text

    first = wait_for("the first job to run", lambda: job_in("running"))
    wait_for("output", lambda: len(written_lines(out)) >= 3)

    stopped = http.patch("/pipelines/lifecycle", json={"stop": "checkpoint"})
    assert stopped.json()["desired_state"] == "stopped"
    wait_for("the stop", lambda: job_in("stopped"))
    lines_at_stop = len(written_lines(out))

    restarted = http.post("/pipelines/lifecycle/restart", json={"with_state": True})
    assert restarted.status_code == 202, restarted.text
    second = wait_for("a new job after the restart",
                      lambda: (j := job_in("running")) and j["id"] != first["id"] and j)
    wait_for("output after the restart", lambda: len(written_lines(out)) > lines_at_stop)

    rescaled = http.post("/pipelines/lifecycle/rescale", json={"parallelism": 2})
    assert rescaled.status_code == 202, rescaled.text
    wait_for("a job at parallelism 2",
             lambda: (j := job_in("running", "finished")) and j["id"] != second["id"]
             and j["parallelism"] == 2)
    wait_for("the end of the input", lambda: job_in("finished"), timeout_s=300)

    jobs = http.get("/pipelines/lifecycle/jobs").json()["items"]
    assert [j["state"] for j in jobs] == ["stopped", "stopped", "finished"]
    assert [j["parallelism"] for j in jobs] == [1, 1, 2]
    history = http.get(f"/jobs/{jobs[0]['id']}/events").json()["items"]
    assert {"running", "stopping", "stopped"} <= {e["state"] for e in history}
    checkpoints = http.get(f"/jobs/{jobs[2]['id']}/checkpoints").json()["items"]
    assert checkpoints and all(c["duration_ms"] >= 0 for c in checkpoints)
    epochs = [c["epoch"] for c in checkpoints]
    assert epochs == sorted(epochs) and epochs[0] > jobs[1]["last_epoch"]  # it resumed

    metrics = http.get("/metrics")
    assert metrics.status_code == 200, metrics.text
    samples = {(s.name, s.labels.get("pipeline")): s.value
               for family in text_string_to_metric_families(metrics.text)
               for s in family.samples}
    assert samples[("spate_pipeline_rows_in_total", "lifecycle")] > 0

    # The spec held the decrypted path: the job removed it once read, and the
    # scheduler scrubs what is left when a job ends.
    assert not (tmp_path / "data" / "jobs" / jobs[0]["id"] / "spec.json").exists()
    assert "out/out.jsonl" not in server.log()

    assert sorted(written_lines(out)) == sorted(_uninterrupted_run(spark, tmp_path))


def _uninterrupted_run(spark: SparkSession, tmp_path: Path) -> list[str]:
    """The same SQL (unpaced: pacing changes when rows arrive, not which) in one run, in
    the tests' shared Spark session."""
    reference = tmp_path / "reference"
    reference.mkdir()
    run_pipeline(spark, SOURCE.format(rate_limited="false")
                 + SINK.format(out=reference / "out.jsonl") + QUERY, reference)
    return written_lines(reference / "out.jsonl")
