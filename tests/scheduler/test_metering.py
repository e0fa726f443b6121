"""Usage metering (``spate.scheduler.metering``): how a unit's interval is split over
minutes and jobs, and, on PostgreSQL and SQLite, that nothing is charged twice (a
retried or concurrent sample, a replayed epoch event) and that a unit whose process
died is charged its last interval before it is closed."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from spate.api.models import MeterReading, UsageRecord
from spate.api.repositories.control import SqlControlStore
from spate.scheduler.backends import process
from spate.scheduler.metering import (
    BYTES_IN,
    BYTES_OUT,
    COMPUTE_UNIT_SECONDS,
    CPU_SECONDS,
    EVENTS_IN,
    EVENTS_OUT,
    GIB,
    MEMORY_GB_SECONDS,
    PREVIEW_SECONDS,
    STATE_GB_SECONDS,
    Counters,
    Meter,
    charges_for,
    minute_spans,
    unit_of,
)
from spate.scheduler.store import CheckpointRecord, EventBatch, MeteredJob, StatusChange
from tests.scheduler.harness import new_pipeline

T0 = datetime(2026, 11, 27, 10, 0, 40, tzinfo=UTC)


def _job(job_id: str, kind: str = "run") -> MeteredJob:
    return MeteredJob(id=job_id, tenant_id="t", pipeline_id=None if kind == "preview" else "p",
                      kind=kind, handle=None, live=True)


def _totals(charges: list[Any]) -> dict[tuple[str, str], float]:
    totals: dict[tuple[str, str], float] = {}
    for charge in charges:
        key = (charge.job_id, charge.dimension)
        totals[key] = totals.get(key, 0.0) + charge.quantity
    return totals


def test_an_interval_across_a_minute_boundary_is_split_by_seconds() -> None:
    spans = minute_spans(T0, T0 + timedelta(seconds=30))
    assert spans == [(T0.replace(second=0), 20.0), (T0.replace(minute=1, second=0), 10.0)]
    assert minute_spans(T0, T0) == []


def test_a_units_use_is_split_by_busy_time_and_its_compute_units_add_up() -> None:
    # 30 s in which the unit used 12 CPU seconds and held 8 GiB: 0.4 vCPU, 2 SCU.
    charges = charges_for([_job("a"), _job("b")], {"a": 300, "b": 100}, 12.0, 8 * GIB,
                          T0, T0 + timedelta(seconds=30))
    totals = _totals(charges)
    assert totals[("a", CPU_SECONDS)] == pytest.approx(9.0)
    assert totals[("b", CPU_SECONDS)] == pytest.approx(3.0)
    assert totals[("a", MEMORY_GB_SECONDS)] == pytest.approx(8 * 30 * 0.75)
    unit_scu_s = max(12.0, 8 / 4 * 30)
    assert (totals[("a", COMPUTE_UNIT_SECONDS)] + totals[("b", COMPUTE_UNIT_SECONDS)]
            == pytest.approx(unit_scu_s))
    assert {charge.minute for charge in charges} == {T0.replace(second=0),
                                                      T0.replace(minute=1, second=0)}


def test_without_epochs_the_jobs_share_equally_and_a_preview_counts_its_seconds() -> None:
    totals = _totals(charges_for([_job("a"), _job("p", kind="preview")], {}, 4.0, 0,
                                 T0, T0 + timedelta(seconds=10)))
    assert totals[("a", CPU_SECONDS)] == pytest.approx(2.0)
    assert totals[("p", CPU_SECONDS)] == pytest.approx(2.0)
    assert totals[("p", PREVIEW_SECONDS)] == pytest.approx(10.0)
    assert ("a", PREVIEW_SECONDS) not in totals


def test_a_run_is_charged_the_state_its_pipeline_holds_a_preview_is_not() -> None:
    totals = _totals(charges_for([_job("a"), _job("p", kind="preview")], {}, 1.0, 0, T0,
                                 T0 + timedelta(seconds=20), {"a": 3 * GIB, "p": GIB}))
    assert totals[("a", STATE_GB_SECONDS)] == pytest.approx(60.0)
    assert ("p", STATE_GB_SECONDS) not in totals


def test_a_unit_with_no_job_charges_nobody() -> None:
    assert charges_for([], {}, 50.0, GIB, T0, T0 + timedelta(seconds=60)) == []


# -- against the control store ---------------------------------------------------


class _Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


class _Counters:
    """A unit's counters as the test sets them (the cgroup reader is tested end to end
    in test_metering_sandboxed.py)."""

    def __init__(self) -> None:
        self.now = Counters(0.0, 0)

    def __call__(self, source: dict[str, Any]) -> Counters | None:
        return self.now


@pytest.fixture
def sleeper(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A real process to stand for a unit: alive until the test kills it."""
    handle = process.launch([sys.executable, "-c", "import time; time.sleep(600)"], {},
                            tmp_path, tmp_path / "sleeper.log")
    yield handle
    process.kill(handle)


def _running_job(store: SqlControlStore, handle: dict[str, Any]) -> str:
    job = store.create_run_job(new_pipeline(store.database).id, "local", "started")
    assert job is not None
    store.transition(job.id, {"created"}, "starting", "starting", handle=handle)
    return job.id


def _usage(store: SqlControlStore, job_id: str, dimension: str) -> float:
    with store.database.sessions() as session:
        return float(session.scalar(select(func.sum(UsageRecord.quantity)).where(
            UsageRecord.job_id == job_id, UsageRecord.dimension == dimension)) or 0.0)


def test_a_retried_or_concurrent_sample_charges_an_interval_once(
        store: SqlControlStore, sleeper: dict[str, Any]) -> None:
    job_id = _running_job(store, sleeper)
    started = datetime.fromtimestamp(sleeper["create_time"], UTC)
    clock, counters = _Clock(started + timedelta(seconds=20)), _Counters()
    meter, other = Meter(store, clock, counters), Meter(store, clock, counters)
    counters.now = Counters(5.0, GIB)
    assert meter.sample() == 1
    assert _usage(store, job_id, CPU_SECONDS) == pytest.approx(5.0)
    # Another worker that read the unit's previous reading before this one wrote loses.
    stale = store.meter_units()
    clock.at += timedelta(seconds=15)
    counters.now = Counters(8.0, GIB)
    assert meter.sample() == 1
    unit = unit_of(sleeper)
    assert unit is not None
    stale_reading = next(r for r in stale if r.unit == unit[0])
    assert not store.charge_usage(stale_reading, stale_reading, [], closed=False)
    assert other.sample() == 1  # reads again from the current reading: nothing new
    assert _usage(store, job_id, CPU_SECONDS) == pytest.approx(8.0)


def test_a_unit_that_died_is_charged_its_last_interval_and_closed(
        store: SqlControlStore, sleeper: dict[str, Any]) -> None:
    job_id = _running_job(store, sleeper)
    started = datetime.fromtimestamp(sleeper["create_time"], UTC)
    clock, counters = _Clock(started + timedelta(seconds=10)), _Counters()
    meter = Meter(store, clock, counters)
    counters.now = Counters(2.0, 0)
    meter.sample()
    # The unit crashes: its job is no longer live, its counters stand at the end.
    process.kill(sleeper)
    while process.is_alive(sleeper):
        time.sleep(0.05)
    store.transition(job_id, {"starting"}, "restarting", "the process died")
    counters.now = Counters(3.5, 0)
    clock.at += timedelta(seconds=10)
    meter.sample()
    assert _usage(store, job_id, CPU_SECONDS) == pytest.approx(3.5)
    with store.database.sessions() as session:
        assert session.scalars(select(MeterReading.closed).where(
            MeterReading.unit == unit_of(sleeper)[0])).all() == [True]  # type: ignore[index]
    clock.at += timedelta(seconds=10)
    assert meter.sample() == 0  # closed: read no more


def test_an_epochs_events_are_counted_once_even_when_its_event_comes_twice(
        store: SqlControlStore) -> None:
    job = store.create_run_job(new_pipeline(store.database).id, "local", "started")
    assert job is not None
    store.transition(job.id, {"created"}, "starting", "starting")
    epochs = [CheckpointRecord(epoch=e, committed_at=T0, duration_ms=10, state_bytes=0,
                               rows_in=100, rows_out=7, bytes_in=5000, bytes_out=0)
              for e in (1, 2)]
    batch = EventBatch(checkpoints=epochs, status=StatusChange("running", "running"))
    assert store.ingest(job.id, None, "1", batch) is not None
    assert store.ingest(job.id, None, "1", batch) is None  # a retried read of the channel
    # The same epoch's event again, in a later read (a duplicate on the channel).
    assert store.ingest(job.id, "1", "2", EventBatch(checkpoints=epochs[1:])) is not None
    assert _usage(store, job.id, EVENTS_IN) == 200
    assert _usage(store, job.id, EVENTS_OUT) == 14
    assert _usage(store, job.id, BYTES_IN) == 10_000
    assert _usage(store, job.id, BYTES_OUT) == 0  # not measured: no row


def test_a_run_is_charged_the_state_its_latest_epoch_reported_holding(
        store: SqlControlStore, sleeper: dict[str, Any]) -> None:
    job_id = _running_job(store, sleeper)
    store.update(job_id, {"starting"}, metrics={"epoch": 3, "state_held_bytes": 2 * GIB})
    started = datetime.fromtimestamp(sleeper["create_time"], UTC)
    clock = _Clock(started + timedelta(seconds=10))
    meter = Meter(store, clock, _Counters())
    meter.sample()
    clock.at += timedelta(seconds=15)
    meter.sample()
    assert _usage(store, job_id, STATE_GB_SECONDS) == pytest.approx(2 * 25.0)
