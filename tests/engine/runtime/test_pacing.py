"""Rate-adaptive epochs: a trickle of input is read in few, spaced epochs; a busy
input runs back to back; a stop ends a wait at once; nothing is lost or repeated."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.engine.planner import plan_pipeline
from spate.engine.runtime.pacing import EpochPacer, Pacing
from spate.engine.runtime.reports import EpochReport
from spate.engine.runtime.runner import PipelineRunner, RunOptions
from spate.statestore import open_store
from tests.engine.harness import read_lines

PACING = Pacing(min_rows=100, max_delay_s=2.0)


def test_a_busy_input_is_not_held_back() -> None:
    pacer = EpochPacer(PACING, started_s=0.0)
    assert pacer.wait_after(rows_in=500, started_s=0.5, duration_s=0.2) == 0.0


def test_a_slow_input_waits_until_enough_rows_would_have_come() -> None:
    pacer = EpochPacer(PACING, started_s=0.0)
    # 50 rows/s: 100 rows take 2 s, of which the epoch itself took 0.25 s
    assert pacer.wait_after(rows_in=25, started_s=0.5, duration_s=0.25) == pytest.approx(1.75)
    # next time the epoch gathered over its duration and the wait: the same wait again
    assert pacer.wait_after(rows_in=100, started_s=2.5, duration_s=0.25) == 0.0
    assert pacer.wait_after(rows_in=10, started_s=2.7, duration_s=0.25) == pytest.approx(1.75)


def test_a_trickle_waits_at_most_the_longest_delay() -> None:
    pacer = EpochPacer(PACING, started_s=0.0)
    assert pacer.wait_after(rows_in=1, started_s=1.0, duration_s=0.1) == 2.0


def test_an_epoch_without_rows_tells_no_rate_and_is_not_followed_by_a_wait() -> None:
    pacer = EpochPacer(PACING, started_s=0.0)
    assert pacer.wait_after(rows_in=0, started_s=1.0, duration_s=0.1) == 0.0


TICKS = """
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '20');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
    type = 'sink');
INSERT INTO out SELECT counter FROM ticks;
"""


def _run(spark: SparkSession, work: Path, pacing: Pacing | None, stop_after_s: float
         ) -> tuple[list[EpochReport], list[int], float]:
    out = work / "out.jsonl"
    store = open_store(f"sqlite:///{work / 'state.db'}")
    reports: list[EpochReport] = []
    runner = PipelineRunner(
        plan_pipeline(TICKS.format(out=out)), spark, store.pipeline("t", "ticks"),
        RunOptions(checkpoint_dir=str(work / "checkpoint"), on_epoch=reports.append,
                   pacing=pacing))
    stopper = threading.Timer(stop_after_s, runner.request_stop)
    stopper.start()
    started = time.monotonic()
    try:
        runner.run()
    finally:
        stopper.cancel()
        store.close()
    counters = sorted(json.loads(line)["counter"] for line in read_lines(out))
    return reports, counters, time.monotonic() - started


@pytest.mark.spark
def test_a_paced_trickle_runs_few_spaced_epochs_and_loses_nothing(
        spark: SparkSession, tmp_path: Path) -> None:
    pacing = Pacing(min_rows=100, max_delay_s=1.0)
    reports, counters, _ = _run(spark, tmp_path, pacing, stop_after_s=14)

    with_rows = [r for r in reports if r.rows_in]
    # After an epoch of fewer than 100 rows the next came the longest delay later, as
    # 20 rows/s would need 5 s to fill 100 rows (back to back, such epochs take a few
    # hundred ms); after a bigger one (the first epochs are slow) it came at once.
    gaps = [b.started_s - a.started_s
            for a, b in zip(with_rows, with_rows[1:], strict=False) if a.rows_in < 100]
    assert len(gaps) >= 2 and min(gaps) >= pacing.max_delay_s
    assert counters == list(range(len(counters)))  # exactly once: no gap, no repeat
    assert len(counters) == sum(r.rows_in for r in reports)


@pytest.mark.spark
def test_a_stop_ends_the_wait(spark: SparkSession, tmp_path: Path) -> None:
    _, counters, took_s = _run(spark, tmp_path, Pacing(min_rows=100, max_delay_s=600),
                               stop_after_s=5)
    assert counters  # the first epoch wrote, then the run waited for more rows ...
    assert took_s < 120  # ... and the stop did not sit out the ten-minute wait


CAPPED = """
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '1000',
    rate_limited = 'false', max_events_per_batch = '10');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT bid.auction FROM nexmark WHERE bid IS NOT NULL;
"""


@pytest.mark.spark
def test_an_epoch_as_big_as_its_sources_batch_limit_is_followed_at_once(
        spark: SparkSession, tmp_path: Path) -> None:
    """10 events per batch is all the source gives, with more waiting: no wait."""
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    reports: list[EpochReport] = []
    runner = PipelineRunner(
        plan_pipeline(CAPPED), spark, store.pipeline("t", "capped"),
        RunOptions(checkpoint_dir=str(tmp_path / "checkpoint"), on_epoch=reports.append,
                   pacing=Pacing(min_rows=100, max_delay_s=600)))
    stopper = threading.Timer(15, runner.request_stop)
    stopper.start()
    try:
        runner.run()
    finally:
        stopper.cancel()
        store.close()
    assert len(reports) >= 3 and all(r.rows_in == 10 for r in reports)
