"""Pipeline watermark: minimum over active partitions, idle ones ignored,
finished sources at +infinity, never decreasing, restored across restarts."""

from __future__ import annotations

from spate.engine.runtime.watermarks import END_OF_TIME, NO_WATERMARK, WatermarkTracker

SECOND = 1_000_000


def test_minimum_over_partitions_and_idle_partition_ignored() -> None:
    tracker = WatermarkTracker({"bids": 5 * SECOND}, None, parallelism=2)
    assert tracker.advance(0) == NO_WATERMARK
    tracker.observe("bids", 0, 100, now_us=0)
    tracker.observe("bids", 1, 40, now_us=0)
    assert tracker.advance(0) == 40
    # partition 1 goes silent; before idle_micros it still holds the watermark back
    tracker.observe("bids", 0, 200, now_us=4 * SECOND)
    assert tracker.advance(4 * SECOND) == 40
    # after idle_micros it no longer does
    assert tracker.advance(6 * SECOND) == 200
    # it comes back with older data: the watermark never decreases
    tracker.observe("bids", 1, 50, now_us=7 * SECOND)
    assert tracker.advance(7 * SECOND) == 200


def test_idle_disabled_with_non_positive_idle_micros() -> None:
    tracker = WatermarkTracker({"bids": 0}, None, parallelism=2)
    tracker.observe("bids", 0, 100, now_us=0)
    tracker.observe("bids", 1, 10, now_us=0)
    assert tracker.advance(10**12) == 10


def test_finished_source_stops_holding_back_and_all_finished_is_end_of_time() -> None:
    tracker = WatermarkTracker({"a": SECOND * 300, "b": SECOND * 300}, None, parallelism=1)
    tracker.observe("a", 0, 10, now_us=0)
    tracker.observe("b", 0, 500, now_us=0)
    assert tracker.advance(0) == 10
    tracker.finish("a")
    assert tracker.advance(0) == 500
    tracker.finish("b")
    assert tracker.all_done
    assert tracker.advance(0) == END_OF_TIME


def test_restore_keeps_partitions_only_at_the_same_parallelism() -> None:
    tracker = WatermarkTracker({"bids": SECOND * 300}, None, parallelism=2)
    tracker.observe("bids", 0, 100, now_us=0)
    tracker.observe("bids", 1, 70, now_us=0)
    tracker.advance(0)
    stored = tracker.to_stored()
    same = WatermarkTracker({"bids": SECOND * 300}, stored, parallelism=2)
    assert same.value == 70
    same.observe("bids", 0, 300, now_us=0)
    assert same.advance(0) == 70  # partition 1 still at 70
    rescaled = WatermarkTracker({"bids": SECOND * 300}, stored, parallelism=3)
    rescaled.observe("bids", 0, 300, now_us=0)
    assert rescaled.advance(0) == 300  # old partition numbering dropped, floor kept
