"""Epoch events: the runner's figures as published, the busy ratio's arithmetic, and each
operator's rates and busy ratio over the last minute."""

from __future__ import annotations

from spate.engine.job.events import EpochEvents
from spate.engine.runtime.reports import EpochReport, OperatorReport
from spate.engine.runtime.watermarks import END_OF_TIME, NO_WATERMARK


def _report(epoch: int, started_s: float, duration_s: float,
            watermark_us: int = 1_000_000) -> EpochReport:
    return EpochReport(epoch, rows_in=10, rows_out=2, rows_late=1, rows_dropped=0,
                       watermark_us=watermark_us, duration_s=duration_s, finished=False,
                       started_s=started_s, committed_at_ms=123, state_bytes=456,
                       cache_hits=5, cache_misses=2, remote_bytes=789,
                       operators=[OperatorReport("source:s", "source", rows_out=10),
                                  OperatorReport("q", "window", 10, 2, 1)])


def test_busy_ratio_is_the_share_of_each_cycle_spent_in_the_epoch() -> None:
    events = EpochEvents()
    events._previous_end_s = 100.0  # the query started at t = 100 s
    # Back to back: the epoch filled the whole cycle.
    assert events.event(_report(0, 100.0, 2.0))["busy_ratio"] == 1.0
    # 1 s of work after 3 s of waiting for the trigger.
    assert events.event(_report(1, 105.0, 1.0))["busy_ratio"] == 0.25
    assert events.event(_report(2, 106.0, 0.5))["busy_ratio"] == 1.0


def test_epoch_event_fields() -> None:
    event = EpochEvents().event(_report(7, 10.0, 0.25))
    assert event == {
        "type": "epoch", "epoch": 7, "committed_at_ms": 123, "duration_ms": 250,
        "rows_in": 10, "rows_out": 2, "rows_late": 1, "rows_dropped": 0,
        "watermark_us": 1_000_000, "state_bytes": 456, "cache_hits": 5, "cache_misses": 2,
        "remote_bytes": 789, "bytes_in": 0, "bytes_out": 0, "state_held_bytes": 0,
        "busy_ratio": 1.0,
        "backlog": None,  # the sources could not tell (or were not asked yet)
        "finished": False,
        # Over the run's first 0.25 s, all there is of the last minute.
        "operators": [{"operator": "source:s", "kind": "source", "rows_out": 10,
                       "rows_out_per_s": 40.0},
                      {"operator": "q", "kind": "window", "rows_in": 10, "rows_out": 2,
                       "rows_late": 1, "rows_in_per_s": 40.0, "rows_out_per_s": 8.0}]}


def test_no_watermark_is_null_and_the_end_of_input_is_kept() -> None:
    events = EpochEvents()
    assert events.event(_report(0, 1.0, 0.1, NO_WATERMARK))["watermark_us"] is None
    assert events.event(_report(1, 2.0, 0.1, END_OF_TIME))["watermark_us"] == END_OF_TIME


def _window_epoch(epoch: int, ended_s: float, fires: bool) -> EpochReport:
    """A 10 s cycle of a windowed pipeline: 20 rows in, 6 out when the window fires; its
    window's state tasks busy 0.5 s and its sink's write 0.2 s."""
    return EpochReport(epoch, rows_in=20, rows_out=6 if fires else 0, rows_late=0,
                       rows_dropped=0, watermark_us=1, duration_s=1.0, finished=False,
                       started_s=ended_s - 1.0, operators=[
                           OperatorReport("source:s", "source", rows_out=20),
                           OperatorReport("q", "window", 20, 6 if fires else 0, 0, busy_s=0.5),
                           OperatorReport("sink:q", "sink", rows_in=6 if fires else 0,
                                          busy_s=0.2)])


def test_operators_rates_and_busy_ratios_are_over_the_last_minute() -> None:
    events = EpochEvents()
    events._previous_end_s = events._run_started_s = 0.0  # the query started at t = 0
    published = [events.event(_window_epoch(n, 10.0 * (n + 1), fires=(n + 1) % 6 == 0))
                 for n in range(13)]
    # Between firings the window's output is not 0 rows/s: the last minute held a firing.
    between = {o["operator"]: o for o in published[10]["operators"]}  # ends at t = 110 s
    assert between["q"]["rows_out"] == 0 and between["q"]["rows_out_per_s"] == 0.1
    assert between["sink:q"]["rows_in_per_s"] == 0.1
    assert between["source:s"]["rows_out_per_s"] == 2.0
    # Busy: 6 epochs of the last minute, each 0.5 s of state tasks and 0.2 s of writing.
    assert between["q"]["busy_ratio"] == 0.05 and between["sink:q"]["busy_ratio"] == 0.02
    assert "busy_ratio" not in between["source:s"]  # it has no time of its own
    # The job as a whole was busy 1 s in each 10 s cycle.
    assert published[10]["busy_ratio"] == 0.1
    # Early on, the minute is the run so far.
    first = {o["operator"]: o for o in published[0]["operators"]}
    assert first["source:s"]["rows_out_per_s"] == 2.0 and first["q"]["busy_ratio"] == 0.05
