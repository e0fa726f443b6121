"""Faults of a tenant's warm Spark application: ``kill -9`` of the application, of one
of its Spark Python workers, and the application hitting its cgroup memory limit.

Tenant ``a``'s application is struck each time; tenant ``b``'s application, on
the same server, must not notice (its job is the same one, its rows keep coming
while ``a`` is down). Tenant ``a``'s pipelines must resume by themselves from
their last committed epoch, every entry exactly once, and nothing of the dead
application may keep running.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta

import psutil
import pytest
import redis

from tests.faults.deployment import (
    APPLICATION_MEMORY_MB,
    COPY,
    NotResumedError,
    Spate,
    Tenant,
    eventually,
    seen,
)
from tests.faults.figures import record
from tests.faults.processes import alive, application_tree, host_process, python_workers

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.xdist_group("faults")]

#: A burst of values too large for the application's memory limit: each row of the
#: burst builds a string of HOG_BYTES while the pipeline's run started before the burst's
#: end (``now()`` is the run's start), so the run restarted after the kill is past it.
HOG_ROWS = 6
HOG_BYTES = 400_000_000
HOG_SQL = """
CREATE TABLE burst (n BIGINT, pad BIGINT) WITH (connector = 'redis', type = 'source',
    address = '{address}', stream = '{stream}', format = 'json',
    'source.offset' = 'earliest');
CREATE TABLE sizes WITH (connector = 'single_file', path = 'out/hog.jsonl', format = 'json',
    type = 'sink');
INSERT INTO sizes
SELECT n, CASE WHEN now() < CAST('{until}' AS TIMESTAMP) THEN length(repeat('x', pad))
               ELSE 0 END AS size
FROM burst;
"""
HOG = "hog"
#: Entries added at once before a Python worker is killed, so that the task reading them
#: lasts long enough to be caught in the middle.
BURST_ENTRIES = 60_000
#: Consecutive samples (20 ms apart) in which a worker used CPU: it is running a task.
BUSY_SAMPLES = 4
#: How long after the hog pipeline is created its burst ends.
BURST_S = 10.0


def _the_neighbour_is_untouched(spate: Spate, b: Tenant, job_id: str, since: int) -> None:
    spate.fresh_output(b, since, "tenant b's rows while tenant a is down", timeout_s=60)
    job = spate.running_job(b)
    assert job["id"] == job_id, "tenant b's job was replaced"
    assert spate.ok(b, "GET", f"/jobs/{job_id}")["attempt"] == 0, "tenant b's job restarted"


def test_kill_9_of_a_tenant_application(spate: Spate) -> None:
    a, b = spate.tenants["a"], spate.tenants["b"]
    job_a, job_b = spate.running_job(a)["id"], spate.running_job(b)["id"]
    attempt = spate.ok(a, "GET", f"/jobs/{job_a}")["attempt"]
    dead = application_tree(spate.data_dir, a.id)

    host_process(spate.data_dir, a.id).kill()
    killed_at, since = time.monotonic(), spate.produced()
    _the_neighbour_is_untouched(spate, b, job_b, since)
    eventually("every process of the killed application to go", lambda: not [
        member for member in dead if alive(member)], timeout_s=30)
    resumed = spate.fresh_output(a, since, "tenant a's rows after its application died")
    record("kill -9 of a tenant application", "new rows in the sink, from the kill",
           resumed - killed_at)

    job = spate.running_job(a)
    assert job["id"] == job_a and spate.ok(a, "GET", f"/jobs/{job_a}")["attempt"] > attempt
    assert any("process is gone" in error for error in spate.errors(a, job_a))
    spate.assert_exactly_once(a)
    spate.assert_exactly_once(b)
    spate.assert_no_orphans()


def test_kill_9_of_a_spark_python_worker(spate: Spate) -> None:
    a, b = spate.tenants["a"], spate.tenants["b"]
    job_b = spate.running_job(b)["id"]
    assert spate.feed is not None
    spate.feed.burst(BURST_ENTRIES)
    victim = _busy_worker(spate, a)

    victim.kill()
    killed_at, since = time.monotonic(), spate.produced()
    _the_neighbour_is_untouched(spate, b, job_b, since)
    resumed = spate.fresh_output(a, since, "tenant a's rows after its Python worker died")
    record("kill -9 of a Spark Python worker", "new rows in the sink, from the kill",
           resumed - killed_at)

    spate.running_job(a)
    spate.assert_exactly_once(a)
    spate.assert_exactly_once(b)
    spate.assert_no_orphans()


def test_an_application_over_its_memory_limit(spate: Spate, redis_url: str) -> None:
    a, b = spate.tenants["a"], spate.tenants["b"]
    job_a, job_b = spate.running_job(a)["id"], spate.running_job(b)["id"]
    stream = a.stream + "-burst"
    until = datetime.now(UTC) + timedelta(seconds=BURST_S)
    spate.create_pipeline(a, HOG, HOG_SQL.format(
        address=spate.redis_address, stream=stream,
        until=until.strftime("%Y-%m-%d %H:%M:%S")))
    try:
        hog = spate.running_job(a, HOG, timeout_s=60)["id"]
        if datetime.now(UTC) > until - timedelta(seconds=3):
            pytest.fail("the hog pipeline took too long to start to run before its burst ends")
        _burst(redis_url, stream)
        burst_at, since = time.monotonic(), spate.produced()

        # Generous: on a loaded machine the burst's strings take long to build, and the
        # restarted jobs wait for a new application's cold start (40 s and more).
        deaths = eventually("the application's death to be reported",
                            lambda: _death_reports(spate, a, {COPY: job_a, HOG: hog}),
                            timeout_s=180)
        # The kernel's OOM killer (the cgroup's limit) names the limit; when the JVM's own
        # heap runs out first, Spark exits the JVM and the death reads as a gone process.
        limit = [report for report in deaths if "memory limit" in report]
        assert not limit or f"{APPLICATION_MEMORY_MB} MB" in limit[0], limit
        _the_neighbour_is_untouched(spate, b, job_b, since)
        resumed = spate.fresh_output(a, since, "tenant a's rows after the memory limit")
        record("application over its memory limit", "new rows in the sink, from the burst",
               resumed - burst_at)

        assert spate.running_job(a)["id"] == job_a
        assert spate.running_job(a, HOG)["id"] == hog
        hog_output = a.storage / "out" / "hog.jsonl"
        eventually("the burst's rows in the hog pipeline's output",
                   lambda: sorted(seen(hog_output)) == list(range(HOG_ROWS)), timeout_s=180)
    finally:
        spate.call(a, "DELETE", f"/pipelines/{HOG}", params={"force": "true"})
    spate.assert_exactly_once(a)
    spate.assert_exactly_once(b)
    spate.assert_no_orphans()


def _burst(redis_url: str, stream: str) -> None:
    client = redis.Redis.from_url(redis_url)
    try:
        for n in range(HOG_ROWS):
            client.xadd(stream, {"value": json.dumps({"n": n, "pad": HOG_BYTES})})
    finally:
        client.close()


def _death_reports(spate: Spate, tenant: Tenant, jobs: dict[str, str]) -> list[str]:
    """What the tenant's jobs reported of their application's death (its memory limit, or
    a process gone); a job that failed instead of restarting fails the test at once."""
    for pipeline in jobs:
        job = spate.job(tenant, pipeline)
        if job is not None and job["state"] == "failed":
            raise NotResumedError(f"tenant {tenant.label}'s {pipeline} failed instead of "
                                  f"restarting: {job['failure_message']}")
    return [error for job_id in jobs.values() for error in spate.errors(tenant, job_id)
            if "memory limit" in error or "process is gone" in error]


def _busy_worker(spate: Spate, tenant: Tenant) -> psutil.Process:
    """A Python worker of the tenant's application in the middle of a task: it has been
    using CPU for the last few samples (a burst makes its tasks last seconds)."""
    streaks: dict[int, int] = {}
    used: dict[int, float] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for worker in python_workers(spate.data_dir, tenant.id):
            cpu_s = _cpu_s(worker)
            busy = cpu_s > used.get(worker.pid, cpu_s)
            streaks[worker.pid] = streaks.get(worker.pid, 0) + 1 if busy else 0
            used[worker.pid] = cpu_s
            if streaks[worker.pid] >= BUSY_SAMPLES:
                return worker
        time.sleep(0.02)
    raise AssertionError("no Python worker of tenant a ran a task for long enough to be "
                         "caught in the middle of it")


def _cpu_s(member: psutil.Process) -> float:
    try:
        times = member.cpu_times()
    except psutil.Error:
        return 0.0
    return float(times.user + times.system)
