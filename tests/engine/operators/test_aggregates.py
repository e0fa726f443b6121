"""Moments and bit counts of engine.operators.aggregates: merging partials and
taking them out again gives what the values left give directly."""

from __future__ import annotations

import statistics
from functools import reduce

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.engine.operators.aggregates import make_accumulator, make_aggregate
from spate.engine.operators.aggregates.bits import bit_counts, bits_result
from spate.engine.operators.aggregates.moments import merge_moments, moments_result

panes = st.lists(st.lists(st.integers(-1000, 1000), max_size=6), min_size=1, max_size=6)


def _moments(values: list[int]) -> list[float]:
    if not values:
        return [0, 0.0, 0.0]
    mean = statistics.fmean(values)
    return [len(values), mean, sum((v - mean) ** 2 for v in values)]


@given(panes=panes, leaving=st.integers(0, 5))
def test_moments_merge_and_remove(panes: list[list[int]], leaving: int) -> None:
    aggregate = make_aggregate("var_samp")
    acc = aggregate.initialize()
    for pane in panes:
        acc = aggregate.add(acc, _moments(pane))
    gone = panes[leaving % len(panes)]
    acc = aggregate.remove(acc, _moments(gone))
    left = [v for pane in panes if pane is not gone for v in pane]
    # taking values out cancels digits: the error scales with what was there before
    tolerance = 1e-9 * max(1.0, _moments([v for pane in panes for v in pane])[2])
    expected = statistics.variance(left) if len(left) > 1 else None
    got = moments_result("var_samp", acc)
    assert (got is None) == (expected is None)
    if got is not None and expected is not None:
        assert abs(got - expected) <= tolerance
    pop = moments_result("var_pop", acc)
    assert (pop is None) == (not left)
    if pop is not None:
        assert abs(pop - statistics.pvariance(left)) <= tolerance


def test_withdrawn_moments_leave_none() -> None:
    both = merge_moments(_moments([3, 5]), [-2, 4.0, -2.0])
    assert both == [0, 0.0, 0.0] and moments_result("var_pop", both) is None


@given(values=st.lists(st.integers(-2**63, 2**63 - 1), max_size=8),
       withdrawn=st.lists(st.integers(-2**63, 2**63 - 1), max_size=4))
def test_bit_counts_with_withdrawals(values: list[int], withdrawn: list[int]) -> None:
    signed = [(v, 1) for v in values + withdrawn] + [(v, -1) for v in withdrawn]
    counts = bit_counts(signed)
    if not values:
        assert bits_result("bit_and", counts) is None
        return
    assert bits_result("bit_and", counts) == reduce(lambda a, b: a & b, values)
    assert bits_result("bit_or", counts) == reduce(lambda a, b: a | b, values)


def test_bit_xor_is_its_own_inverse() -> None:
    aggregate = make_aggregate("bit_xor")
    acc = aggregate.add(aggregate.add(aggregate.initialize(), [6, 2]), [3, 1])
    assert aggregate.result(acc) == 5
    assert aggregate.result(aggregate.remove(acc, [6, 2])) == 3
    assert aggregate.result(aggregate.remove(acc, [5, 3])) is None


def test_values_leave_a_window_and_interpolate() -> None:
    median = make_aggregate("median")
    acc = median.add(median.add(median.initialize(), [4, None, 1]), [10, 2])
    assert median.result(acc) == 3.0  # 1 2 4 10
    assert median.result(median.remove(acc, [4, None, 1])) == 6.0
    quartile = make_aggregate("percentile_cont", 0.25)
    assert quartile.result([[1, 2, 4, 10]]) == 1.75
    array = make_aggregate("array_agg")
    assert array.result([[None, 3], [1]]) == [None, 3, 1] and array.result([]) is None


@pytest.mark.parametrize("fraction, expected", [
    (0.3, 3.2),   # -4 -4 5 5 5 7 7: position 1.8, between -4 and 5
    (0.0, -4.0), (0.5, 5.0), (1.0, 7.0),
    (0.25, 0.5),  # position 1.5
])
def test_weighted_percentile_repeats_each_value_weight_times(fraction: float,
                                                             expected: float) -> None:
    weighted = make_aggregate("percentile_cont_weighted", fraction)
    acc = weighted.add(weighted.add(weighted.initialize(), [[5.0, 3.0], None]),
                       [[-4.0, 2.0], [7.0, 2.0]])
    assert weighted.result(acc) == pytest.approx(expected)
    plain = make_aggregate("percentile_cont", fraction)
    assert weighted.result([[[v, 1.0] for v in (5.0, -4.0, 7.0)]]) == \
        pytest.approx(plain.result([[5.0, -4.0, 7.0]]))


def test_weighted_percentile_of_fractional_and_no_weights() -> None:
    half = make_aggregate("percentile_cont_weighted", 0.5)
    assert half.result([[[3.0, 0.5]]]) == 3.0
    # weights 1.5 and 2.5: places [0, 1.5) hold 1, [1.5, 4) hold 2; position 1.5 is
    # halfway from place 1 (a 1) to place 2 (a 2)
    assert half.result([[[1.0, 1.5], [2.0, 2.5]]]) == pytest.approx(1.5)
    assert half.result([[[1.0, 0.0]], [None]]) is None
    assert half.result(half.remove([[[1.0, 1.0]], [[2.0, 1.0]]], [[1.0, 1.0]])) == 2.0


def test_first_and_last_value_by_event_time() -> None:
    first, last = make_aggregate("first_value"), make_aggregate("last_value")
    panes = [[5, 7], [2, None], [9, 1], [2, 4]]  # [event time, value]
    for aggregate, expected in ((first, None), (last, 1)):
        acc = aggregate.initialize()
        for pane in panes:
            acc = aggregate.add(acc, pane)
        assert aggregate.result(acc) == expected  # equal times: NULL first
    withdrawing = make_accumulator("first_value", updating_input=True)
    acc = withdrawing.add(withdrawing.initialize(), [[pane, 1] for pane in panes])
    assert withdrawing.result(acc) is None
    acc = withdrawing.add(acc, [[[2, None], -1]])
    assert withdrawing.result(acc) == 4
    appended = make_accumulator("last_value", updating_input=False)
    acc = appended.add(appended.add(appended.initialize(), [9, 1]), [5, 7])
    assert appended.result(acc) == 1


def test_comoments_take_pairs_out() -> None:
    slope = make_aggregate("regr_slope")
    pairs = [[[1.0, 0.0], [3.0, 1.0]], [[5.0, 3.0]], [[4.0, 2.0], [4.0, 2.0]]]  # [y, x]

    def comoments(pane: list[list[float]]) -> list[float]:
        n = len(pane)
        my, mx = sum(p[0] for p in pane) / n, sum(p[1] for p in pane) / n
        return [n, my, mx, sum((p[0] - my) ** 2 for p in pane),
                sum((p[1] - mx) ** 2 for p in pane),
                sum((p[0] - my) * (p[1] - mx) for p in pane)]

    acc = slope.initialize()
    for pane in pairs:
        acc = slope.add(acc, comoments(pane))
    acc = slope.remove(acc, comoments(pairs[0]))
    assert abs(slope.result(acc) - 1.0) < 1e-12
    acc = slope.remove(acc, comoments(pairs[1]))
    assert slope.result(acc) is None  # x has no spread left
    assert make_aggregate("regr_count").result(acc) == 2


@given(st.lists(st.tuples(st.integers(-50, 50), st.integers(1, 4)), min_size=1, max_size=8),
       st.floats(0, 1))
def test_whole_weights_are_repetitions(pairs: list[tuple[int, int]], fraction: float) -> None:
    weighted = make_aggregate("percentile_cont_weighted", fraction)
    plain = make_aggregate("percentile_cont", fraction)
    repeated = [value for value, weight in pairs for _ in range(weight)]
    assert weighted.result([[[float(v), float(w)] for v, w in pairs]]) == \
        pytest.approx(plain.result([repeated]))
