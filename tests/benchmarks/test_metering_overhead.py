"""What metering costs, against what the metered jobs use.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_metering_overhead.py -s``

Three pipelines of one tenant (``impulse`` at 1,000 rows/s each into ``blackhole``)
run in the tenant's warm application, sandboxed where the host allows (else the
unit is read from its process tree). After a warm-up, the meter samples every
15 s (``SPATE_METER_INTERVAL_S``'s default) for the measured window; each sample's
CPU is the scheduler thread's own (``time.thread_time``: reading the control
groups, the SQLite control store's queries and writes). The jobs' CPU over the
same window is what the meter charged them (in a sandbox: the application's
control group). The overhead is the first over the second. Epochs' event counts
are added in the same transaction as their checkpoint row; what that costs is
measured apart, as the time of the upsert per epoch against the jobs' CPU per
epoch. Written to ``results.json`` under ``metering_overhead``; nothing is
asserted.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select

from spate.api import migrate
from spate.api.models import JobCheckpoint, UsageRecord
from spate.api.repositories.control import add_usage
from spate.scheduler.metering import CPU_SECONDS, EVENTS_IN, EVENTS_OUT
from spate.scheduler.sandbox.unit import sandbox_problem
from spate.scheduler.store import UsageCharge
from tests.benchmarks.workloads import save_result
from tests.scheduler.conftest import running_scheduler
from tests.scheduler.harness import Harness

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.timeout(1800)]

PIPELINES = 3
RATE = 1000
WARM_S = 30.0
INTERVAL_S = 15.0
SAMPLES = 6

SQL = f"""
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '{RATE}');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter, subtask_index FROM ticks;
"""


def _charged(harness: Harness, dimension: str) -> float:
    with harness.database.sessions() as session:
        return float(session.scalar(select(func.sum(UsageRecord.quantity)).where(
            UsageRecord.dimension == dimension)) or 0.0)


def test_metering_overhead(tmp_path: Path, redis_url: str, redis_prefix: str) -> None:
    sandboxed = sandbox_problem() is None
    control_url = f"sqlite:///{tmp_path / 'control.db'}"
    migrate.upgrade(control_url)
    with running_scheduler(tmp_path, redis_url, redis_prefix, control_url, sandbox=sandboxed,
                           applications=True, meter_interval_s=3600.0) as harness:
        first = harness.add_pipeline(SQL)
        tenant = harness.tenant_of(first)
        pipelines = [first, *(harness.add_pipeline(SQL, tenant_id=tenant)
                              for _ in range(PIPELINES - 1))]
        for pipeline in pipelines:
            harness.wait_for_job(pipeline, ("running",))
        time.sleep(WARM_S)
        harness.scheduler.meter_all()  # the window starts at this reading
        charged_before = _charged(harness, CPU_SECONDS)
        meter_cpu = []
        for _sample in range(SAMPLES):
            time.sleep(INTERVAL_S)
            started = time.thread_time()
            harness.scheduler.meter_all()
            meter_cpu.append(time.thread_time() - started)
        jobs_cpu = _charged(harness, CPU_SECONDS) - charged_before
        with harness.database.sessions() as session:
            epochs = int(session.scalar(select(func.count()).select_from(JobCheckpoint)) or 0)
        jobs_cpu_per_epoch = _charged(harness, CPU_SECONDS) / max(1, epochs)

        # The per-epoch event count: the upsert of two rows, as ingest does it.
        job_id = harness.jobs(first)[-1].id
        minute = datetime.now(UTC).replace(second=0, microsecond=0)
        upserts = 200
        started = time.thread_time()
        for _epoch in range(upserts):
            with harness.database.sessions() as session:
                add_usage(session, [UsageCharge(job_id, tenant, first, minute, dimension, 1.0)
                                    for dimension in (EVENTS_IN, EVENTS_OUT)])
                session.commit()
        upsert_s = (time.thread_time() - started) / upserts
        for pipeline in pipelines:
            harness.change_pipeline(pipeline, desired_state="stopped", stop_mode="immediate")

    result = {
        "sandboxed": sandboxed, "pipelines": PIPELINES, "rows_per_s_each": RATE,
        "interval_s": INTERVAL_S, "samples": SAMPLES,
        "meter_cpu_per_sample_ms": round(1000 * sum(meter_cpu) / len(meter_cpu), 2),
        "jobs_cpu_s": round(jobs_cpu, 2),
        "meter_overhead": round(sum(meter_cpu) / jobs_cpu, 5) if jobs_cpu else None,
        "event_count_per_epoch_ms": round(1000 * upsert_s, 3),
        "jobs_cpu_per_epoch_ms": round(1000 * jobs_cpu_per_epoch, 1),
        "event_count_overhead": round(upsert_s / jobs_cpu_per_epoch, 5)
        if jobs_cpu_per_epoch else None,
    }
    print("metering overhead:", result)
    save_result("metering_overhead", result)
