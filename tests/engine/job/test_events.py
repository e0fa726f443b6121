"""Epoch events: the runner's figures as published, and the busy ratio's arithmetic."""

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
        "finished": False,
        "operators": [{"operator": "source:s", "kind": "source", "rows_out": 10},
                      {"operator": "q", "kind": "window", "rows_in": 10, "rows_out": 2,
                       "rows_late": 1}]}


def test_no_watermark_is_null_and_the_end_of_input_is_kept() -> None:
    events = EpochEvents()
    assert events.event(_report(0, 1.0, 0.1, NO_WATERMARK))["watermark_us"] is None
    assert events.event(_report(1, 2.0, 0.1, END_OF_TIME))["watermark_us"] == END_OF_TIME
