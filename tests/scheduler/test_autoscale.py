"""The autoscaler's decisions (:mod:`spate.scheduler.autoscale`): up on a backlog or a busy
run, down when idle with nothing to read, never out of range, never flapping."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from spate.scheduler.autoscale import (
    COOLDOWN_S,
    DOWN_BUSY,
    QUIET_AFTER_S,
    SETTLE_S,
    UP_BUSY,
    AutoscaleRange,
    Load,
    Rescale,
    decide_scale,
)

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
WIDE = AutoscaleRange(1, 8)
SETTLED = T0 - timedelta(seconds=SETTLE_S)


def _decide(parallelism: int, load: Load, setting: AutoscaleRange = WIDE,
            last_change: datetime | None = None) -> Rescale | None:
    return decide_scale(setting, parallelism, load, running_since=SETTLED,
                        last_change=last_change, now=T0)


def test_a_backlog_that_takes_too_long_to_read_scales_up_and_says_why() -> None:
    decision = _decide(1, Load(busy_ratio=0.95, rows_in_per_s=5_000, backlog=1_000_000))
    assert decision is not None and decision.parallelism == 2
    assert "1,000,000 rows behind (200 s at 5,000 rows/s)" in decision.reason


def test_a_busy_run_grows_to_the_parallelism_that_fits_at_most_double() -> None:
    assert _decide(2, Load(0.9, 100, None)) == Rescale(3, "autoscale: 2 → 3: busy 90% of "
                                                          "the time")
    assert _decide(2, Load(1.0, 100, 0), AutoscaleRange(1, 3)).parallelism == 3  # type: ignore[union-attr]
    assert _decide(4, Load(1.0, 100, None)).parallelism == 7  # type: ignore[union-attr]


def test_an_idle_run_with_nothing_to_read_shrinks() -> None:
    decision = _decide(4, Load(0.05, 10, 0))
    assert decision is not None and decision.parallelism == 1
    assert "busy 5% of the time with nothing left to read" in decision.reason
    assert _decide(4, Load(0.05, 10, 0), AutoscaleRange(2, 8)).parallelism == 2  # type: ignore[union-attr]


def test_a_backlog_keeps_an_idle_looking_run_from_shrinking() -> None:
    # Busy little (the source's batches are small) but far behind: not spare capacity.
    assert _decide(2, Load(0.2, 100_000, 50_000)) is None


def test_between_the_thresholds_nothing_changes() -> None:
    for busy in (DOWN_BUSY, 0.5, UP_BUSY - 0.01):
        assert _decide(3, Load(busy, 100, 0)) is None


def test_unknown_figures_decide_nothing() -> None:
    assert _decide(3, Load(None, None, None)) is None
    assert Load.of({"busy_ratio": "high", "backlog": -5, "rows_in_per_s": float("nan")},
                   T0) == Load(None, None, None)
    assert Load.of(None, T0) == Load(None, None, None)


def test_a_run_without_epochs_for_a_while_is_idle_whatever_its_last_epoch_said() -> None:
    busy = {"busy_ratio": 1.0, "rows_in_per_s": 500.0, "backlog": 0,
            "committed_at_ms": int(T0.timestamp() * 1000) - int(QUIET_AFTER_S * 1000) - 1}
    assert Load.of(busy, T0) == Load(0.0, 0.0, 0)
    assert _decide(2, Load.of(busy, T0)).parallelism == 1  # type: ignore[union-attr]
    busy["committed_at_ms"] = int(T0.timestamp() * 1000) - 1_000  # a second ago: busy
    assert Load.of(busy, T0) == Load(1.0, 500.0, 0)


def test_a_pipeline_outside_its_range_is_brought_back_at_once() -> None:
    just_changed = T0 - timedelta(seconds=1)
    assert _decide(1, Load(None, None, None), AutoscaleRange(2, 4),
                   last_change=just_changed).parallelism == 2  # type: ignore[union-attr]
    assert _decide(6, Load(1.0, 1, 10**9), AutoscaleRange(2, 4)).parallelism == 4  # type: ignore[union-attr]


def test_no_decision_within_the_cooldown_nor_before_a_new_run_settles() -> None:
    busy = Load(1.0, 10, 10**6)
    recent = T0 - timedelta(seconds=COOLDOWN_S - 1)
    assert _decide(1, busy, last_change=recent) is None
    assert decide_scale(WIDE, 1, busy, running_since=T0 - timedelta(seconds=2),
                        last_change=None, now=T0) is None
    assert decide_scale(WIDE, 1, busy, running_since=None, last_change=None, now=T0) is None


def test_a_configured_cooldown_replaces_the_default() -> None:
    busy = Load(1.0, 10, 10**6)
    settled = T0 - timedelta(seconds=120)
    twenty_ago = T0 - timedelta(seconds=20)
    assert decide_scale(WIDE, 1, busy, running_since=settled, last_change=twenty_ago,
                        now=T0) is None
    shorter = decide_scale(WIDE, 1, busy, running_since=settled, last_change=twenty_ago,
                           now=T0, cooldown_s=15)
    assert shorter is not None and shorter.parallelism == 2


@settings(max_examples=300, deadline=None)
@given(work=st.floats(0.0, 12.0), start=st.integers(1, 8),
       noise=st.lists(st.floats(-0.1, 0.1), min_size=120, max_size=120),
       bounds=st.tuples(st.integers(1, 4), st.integers(4, 8)))
def test_a_steady_load_settles_and_never_flaps(work: float, start: int, noise: list[float],
                                              bounds: tuple[int, int]) -> None:
    """A load of ``work`` (busy ratio ``work / parallelism``, with noise), looked at every
    5 s for 10 minutes: decisions come at least a cooldown apart, stay in range, and
    once settled the parallelism stays (a load at a threshold does not flap)."""
    setting = AutoscaleRange(*bounds)
    parallelism, last_change = start, None
    running_since = T0
    changes: list[datetime] = []
    for step, jitter in enumerate(noise):
        now = T0 + timedelta(seconds=5 * step)
        busy = min(1.0, max(0.0, work / parallelism + jitter))
        decision = decide_scale(setting, parallelism, Load(busy, 100.0, 0),
                                running_since=running_since, last_change=last_change, now=now)
        if decision is None:
            continue
        assert setting.min <= decision.parallelism <= setting.max
        assert decision.parallelism != parallelism
        in_range = setting.min <= parallelism <= setting.max
        if in_range and changes:
            assert (now - changes[-1]).total_seconds() >= COOLDOWN_S
        parallelism, last_change, running_since = decision.parallelism, now, now
        changes.append(now)
    # Up moves at least one step and at most doubles, down fits the load: a steady load
    # settles in a few moves, however noisy the figures around a threshold.
    assert len(changes) <= 5, changes
