"""Usage metering end to end, in a real sandboxed application: what the meter charged a
tenant's jobs matches what the application's control groups counted (also across a
crash of the application, whose last interval must not be lost) and the rows the
pipeline wrote. Needs a host that can sandbox (root, bubblewrap, cgroups)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from sqlalchemy import func, select

from spate.api.models import UsageRecord
from spate.scheduler.backends import process
from spate.scheduler.metering import (
    COMPUTE_UNIT_SECONDS,
    CPU_SECONDS,
    EVENTS_IN,
    EVENTS_OUT,
    MEMORY_GB_SECONDS,
)
from spate.scheduler.sandbox.cgroups import find_cgroups
from spate.scheduler.sandbox.unit import sandbox_problem
from tests.scheduler.conftest import running_scheduler
from tests.scheduler.harness import Harness, impulse_sql, written_lines

PROBLEM = sandbox_problem()
pytestmark = [pytest.mark.e2e, pytest.mark.spark,
              pytest.mark.skipif(PROBLEM is not None, reason=f"cannot sandbox here: {PROBLEM}")]


@pytest.fixture(scope="module")
def metered(tmp_path_factory: pytest.TempPathFactory, redis_url: str, redis_prefix: str,
            control_url: str) -> Iterator[Harness]:
    # The test reads the meter itself (no periodic sample), and a crashed job is not
    # restarted within the test, so the crashed application's unit is the only one.
    with running_scheduler(tmp_path_factory.mktemp("spate-meter"), redis_url, redis_prefix,
                           control_url, sandbox=True, applications=True,
                           meter_interval_s=3600.0, restart_backoff_s=3600.0,
                           restart_backoff_max_s=3600.0) as running:
        yield running


def _used(harness: Harness, dimension: str, job_ids: list[str]) -> float:
    with harness.database.sessions() as session:
        return float(session.scalar(select(func.sum(UsageRecord.quantity)).where(
            UsageRecord.job_id.in_(job_ids), UsageRecord.dimension == dimension)) or 0.0)


def _lines(harness: Harness, pipeline: str, name: str) -> int:
    out = harness.output(pipeline, name)
    return len(written_lines(out))


def test_the_meter_matches_the_units_counters_and_rows_even_through_a_crash(
        metered: Harness) -> None:
    stopped = metered.add_pipeline(impulse_sql("stopped.jsonl", event_rate=40))
    crashed = metered.add_pipeline(impulse_sql("crashed.jsonl", event_rate=40),
                                   tenant_id=metered.tenant_of(stopped))
    first = metered.wait_for_job(stopped, ("running",))
    second = metered.wait_for_job(crashed, ("running",))
    assert first.handle is not None and second.handle is not None
    application = second.handle["process"]
    assert first.handle["process"]["pid"] == application["pid"], "not one application"
    groups = find_cgroups().job(application["unit"]["name"])
    jobs = [first.id, second.id]

    for pipeline, name in ((stopped, "stopped.jsonl"), (crashed, "crashed.jsonl")):
        metered.wait_for(f"{name} to get rows", lambda p=pipeline, n=name: _lines(metered, p, n))
    for _sample in range(4):
        time.sleep(2)
        metered.scheduler.meter_all()
    metered.change_pipeline(stopped, desired_state="stopped", stop_mode="checkpoint")
    metered.wait_for_job(stopped, ("stopped",))
    # Every row the stopped pipeline wrote was counted, once.
    rows = _lines(metered, stopped, "stopped.jsonl")
    assert _used(metered, EVENTS_OUT, [first.id]) == rows
    assert _used(metered, EVENTS_IN, [first.id]) == rows
    metered.scheduler.meter_all()
    # A pipeline that is no longer running costs nothing from the next interval on.
    after_stop = _used(metered, CPU_SECONDS, [first.id])
    time.sleep(2)
    metered.scheduler.meter_all()
    assert _used(metered, CPU_SECONDS, [first.id]) == after_stop
    before_crash = _used(metered, CPU_SECONDS, jobs)

    time.sleep(3)
    groups.kill()  # the application crashes: every process of its unit dies at once
    metered.wait_for("the application to die", lambda: not process.is_alive(application))
    counted = groups.usage().cpu_seconds  # frozen at the end, until the meter closes it
    metered.scheduler.meter_all()

    charged = _used(metered, CPU_SECONDS, jobs)
    print(f"meter: {charged:.3f} CPU s charged, cgroup: {counted:.3f} s, {rows} rows counted")
    assert charged > before_crash, "the interval before the crash was lost"
    assert charged == pytest.approx(counted, rel=0.05)
    assert _used(metered, COMPUTE_UNIT_SECONDS, jobs) >= charged * 0.999
    assert _used(metered, MEMORY_GB_SECONDS, jobs) > 0
    assert not groups.paths[0].exists(), "the dead application's groups were left behind"
    metered.wait_for_job(crashed, ("restarting", "failed"))
