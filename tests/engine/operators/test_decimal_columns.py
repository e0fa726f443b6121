"""Exact decimal sums and extremes in NumPy against Python's ``Decimal``: over any
values a DECIMAL(38, s) holds, NULLs among them, in segments and in windows of panes."""

from __future__ import annotations

from decimal import Decimal, localcontext

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spate.engine.operators.decimal_columns import decimal_sums, doubles
from spate.engine.operators.window_columns import (
    FiredWindows,
    ranked_extremes,
    window_extremes,
    window_sums,
)

LARGEST = 10**38 - 1


@st.composite
def _columns(draw: st.DrawFn) -> tuple[list[Decimal | None], int, list[int]]:
    """Values of a DECIMAL(38, scale), NULLs among them, and the first row of each
    segment they split into."""
    scale = draw(st.sampled_from([0, 2, 10, 37]))
    magnitude = draw(st.sampled_from([10**3, 10**18, LARGEST // 1000]))
    unscaled = draw(st.lists(st.one_of(st.none(), st.integers(-magnitude, magnitude)),
                             min_size=1, max_size=60))
    values = [None if u is None else Decimal(u).scaleb(-scale) for u in unscaled]
    cuts = draw(st.sets(st.integers(1, len(values) - 1), max_size=len(values) - 1)) \
        if len(values) > 1 else set()
    return values, scale, [0, *sorted(cuts)]


def _exact(values: list[Decimal | None]) -> Decimal | None:
    present = [v for v in values if v is not None]
    with localcontext(prec=100):  # Python's default 28 digits would round the sum
        return sum(present, Decimal(0)) if present else None


@settings(max_examples=200, deadline=None)
@given(case=_columns())
def test_segment_sums_and_extremes_are_exact(
        case: tuple[list[Decimal | None], int, list[int]]) -> None:
    values, scale, firsts = case
    column = pa.chunked_array([pa.array(values[:3], pa.decimal128(38, scale)),
                               pa.array(values[3:], pa.decimal128(38, scale))])
    starts = np.array(firsts)
    segments = [values[a:b] for a, b in zip(firsts, [*firsts[1:], len(values)], strict=True)]
    expected = [_exact(segment) for segment in segments]
    nulls = np.array([e is None for e in expected])
    wide = pa.decimal256(76, scale)
    sums = decimal_sums(column, lambda words: np.add.reduceat(words, starts), nulls, wide)
    assert sums.to_pylist() == expected
    rounded = decimal_sums(column, lambda words: np.add.reduceat(words, starts), nulls,
                           pa.float64())
    assert rounded.to_pylist() == [None if e is None else float(e) for e in expected]
    stops = np.append(starts[1:], len(values))
    spans = FiredWindows(starts, starts, starts, stops)
    for largest, pick in ((True, max), (False, min)):
        best = ranked_extremes(  # by each value's place in a sort of the column
            column, lambda order, largest=largest: window_extremes(order, spans, largest),
            largest)
        assert best.to_pylist() == [pick((v for v in segment if v is not None), default=None)
                                    for segment in segments]


@settings(max_examples=100, deadline=None)
@given(case=_columns(), width=st.integers(1, 8))
def test_window_sums_of_panes_are_exact(case: tuple[list[Decimal | None], int, list[int]],
                                        width: int) -> None:
    """Prefix sums of the words, differenced per window, as the columnar windows take
    them: every window of ``width`` consecutive panes."""
    values, scale, _ = case
    column = pa.array(values, pa.decimal128(38, scale))
    first = np.arange(len(values), dtype=np.int64)
    stop = np.minimum(first + width, len(values))
    fired = FiredWindows(first, first, first, stop)
    expected = [_exact(values[a:b]) for a, b in zip(first, stop, strict=True)]
    nulls = np.array([e is None for e in expected])
    sums = decimal_sums(column, lambda words: window_sums(words, fired), nulls,
                        pa.decimal256(76, scale))
    assert sums.to_pylist() == expected


def test_a_sum_past_the_precision_is_refused_as_spark_refuses_it() -> None:
    column = pa.array([Decimal(LARGEST), Decimal(1)], pa.decimal128(38, 0))
    with pytest.raises(pa.ArrowInvalid, match="precision"):
        decimal_sums(column, lambda words: words.sum(axis=0, keepdims=True),
                     np.zeros(1, bool), pa.decimal128(38, 0))


def test_doubles_are_the_nearest_to_the_decimals() -> None:
    """Arrow's own decimal-to-double cast misses some by one unit in the last place."""
    rng = np.random.default_rng(7)
    values = [Decimal(int(u)).scaleb(-10) for u in rng.integers(-10**12, 10**12, 2000)]
    column = pa.array(values, pa.decimal128(38, 10))
    assert doubles(column).to_pylist() == [float(v) for v in values]
