"""The incremental TUMBLE/HOP and SESSION operators equal a brute-force model,
whatever the epoch boundaries, lateness and order of the input."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from spate.engine.operators.aggregates import make_aggregate
from spate.engine.operators.session import SessionWindow
from spate.engine.operators.window import SlidingWindow

FUNCTIONS = ["count_star", "sum", "min", "max", "count_distinct", "avg"]


def _partial(values: list[int]) -> list[object]:
    """What native Spark's pre-aggregation produces for one pane."""
    return [len(values), len(values), [sum(values), len(values)], min(values), max(values),
            sorted(set(values)), [sum(values), len(values)]]


def _expected(values: list[int]) -> list[object]:
    return [len(values), sum(values), min(values), max(values), len(set(values)),
            sum(values) / len(values)]


def _aggregates():  # type: ignore[no-untyped-def]
    return [make_aggregate(f) for f in FUNCTIONS]


class DictPanes(dict):  # type: ignore[type-arg]
    """Pane entries in a dict, as the operator keeps them in the state store."""

    def put(self, pane: int, partial: list[object]) -> None:
        self[pane] = partial

    def delete(self, pane: int) -> None:
        del self[pane]


# an epoch: list of (event time, value); watermark after the epoch = max seen - delay
epochs_strategy = st.lists(
    st.lists(st.tuples(st.integers(0, 400), st.integers(-5, 5)), max_size=12),
    min_size=1, max_size=8)


def _run_sliding(width: int, slide: int, epochs: list[list[tuple[int, int]]], delay: int):  # type: ignore[no-untyped-def]
    operator = SlidingWindow(width, slide, _aggregates())
    state = operator.new_state()
    stored = DictPanes()
    watermark = -(2**62)
    accepted: list[tuple[int, int, int]] = []
    results = {}
    for position, rows in enumerate(epochs):
        panes: dict[int, list[int]] = defaultdict(list)
        for ts, value in rows:
            panes[ts - ts % slide].append(value)
        for pane, values in sorted(panes.items(), key=lambda kv: -kv[0]):
            if operator.is_late(pane, watermark):
                continue
            accepted.extend((pane, v, watermark) for v in values)
            partial = _partial(values)
            operator.add_pane(state, stored, pane, [partial[0], *partial[1:]], watermark)
        seen = [ts for rows_ in epochs[: position + 1] for ts, _ in rows_]
        new_watermark = max(watermark, max(seen, default=watermark + delay) - delay)
        if position == len(epochs) - 1:
            new_watermark = 2**62
        for fired in operator.fire(state, stored, new_watermark):
            assert (fired.start_us, fired.end_us) not in results, "window fired twice"
            results[(fired.start_us, fired.end_us)] = fired.values
        watermark = new_watermark
    assert state.empty and not stored, "state left behind after the end of input"
    return results, accepted


@settings(max_examples=150, deadline=None)
@given(epochs=epochs_strategy, slide=st.sampled_from([1, 5, 10]),
       factor=st.sampled_from([1, 2, 6]), delay=st.integers(0, 50))
def test_sliding_windows_match_brute_force(epochs, slide, factor, delay):  # type: ignore[no-untyped-def]
    width = slide * factor
    results, accepted = _run_sliding(width, slide, epochs, delay)
    expected = {}
    for start in range(-width, 500, slide):
        # a row counts in the windows still open (end > watermark) when it arrived
        inside = [v for pane, v, mark in accepted
                  if start <= pane < start + width and start + width > mark]
        if inside:
            expected[(start, start + width)] = _expected(inside)
    assert set(results) == set(expected)
    for window, values in expected.items():
        got = results[window]
        assert got[:5] == values[:5], window
        assert abs(got[5] - values[5]) < 1e-9


def test_late_pane_after_watermark_is_reported_late():
    operator = SlidingWindow(10, 10, _aggregates())
    assert operator.is_late(0, 10)
    assert not operator.is_late(10, 10)


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 300), st.integers(-5, 5)), min_size=1,
                     max_size=25), gap=st.sampled_from([1, 7, 30]))
def test_sessions_match_brute_force(rows, gap):  # type: ignore[no-untyped-def]
    operator = SessionWindow(gap, _aggregates())
    sessions: list[list[object]] = []
    by_time: dict[int, list[int]] = defaultdict(list)
    for ts, value in rows:
        by_time[ts].append(value)
    for ts, values in by_time.items():  # arbitrary order: sessions merge out of order
        partial = _partial(values)
        assert operator.add(sessions, ts, [partial[0], *partial[1:]], -(2**62))
    fired = {(f.start_us, f.end_us): f.values for f in operator.fire(sessions, 2**62)}
    # brute force: sort rows, split where the gap to the previous row is more than gap
    expected = {}
    ordered = sorted(rows)
    group = [ordered[0]]
    for row in ordered[1:]:
        if row[0] - group[-1][0] > gap:
            expected[(group[0][0], group[-1][0] + gap)] = _expected([v for _, v in group])
            group = []
        group.append(row)
    expected[(group[0][0], group[-1][0] + gap)] = _expected([v for _, v in group])
    assert set(fired) == set(expected)
    for window, values in expected.items():
        assert fired[window][:5] == values[:5]
    assert sessions == []
