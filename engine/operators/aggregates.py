"""Aggregate functions over panes: ``initialize / add / merge / remove / result``.

A *pane partial* is what native Spark computed for one key and one pane (or
one event timestamp, for sessions).  Invertible aggregates (count, sum, avg,
count distinct) keep a running accumulator that a sliding window updates by
adding the entering pane and removing the leaving one; min and max are not
invertible and are served by a monotonic deque in ``spate.engine.operators.window``
(as are bool_and and bool_or, planned as min and max of booleans, and
first_value and last_value: :class:`ByTime`).  Variances
keep moments (:func:`merge_moments`, invertible with a negative count); bit_xor
is its own inverse; bit_and and bit_or keep per-bit counts (:func:`bit_counts`).
An aggregate UDF's rows (:class:`Rows`) and the values of array_agg, median and
percentile_cont (and the ``[value, weight]`` pairs of the weighted percentile)
(:class:`Values`) are bags, invertible too.
All values are plain msgpack-able Python objects, because they are stored.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import Callable, Iterable
from functools import partial
from itertools import accumulate
from math import floor, sqrt
from typing import Any

#: Bits of the integers bit_and and bit_or count (two's complement BIGINT).
INT_BITS = 64


class Aggregate(ABC):
    """One aggregate function of a window operator."""

    invertible = True

    @abstractmethod
    def initialize(self) -> Any:
        """The accumulator of an empty window."""

    @abstractmethod
    def add(self, acc: Any, partial: Any) -> Any:
        """``acc`` with one pane partial added."""

    @abstractmethod
    def merge(self, partial: Any, more: Any) -> Any:
        """Two partials of the same pane combined (a pane filled over several epochs)."""

    def remove(self, acc: Any, partial: Any) -> Any:
        """``acc`` with a pane partial taken out (invertible aggregates only)."""
        raise NotImplementedError(type(self).__name__)

    @abstractmethod
    def result(self, acc: Any) -> Any:
        """The SQL value of the aggregate."""


class Count(Aggregate):
    def initialize(self) -> int:
        return 0

    def add(self, acc: int, partial: int) -> int:
        return acc + partial

    def merge(self, partial: int, more: int) -> int:
        return partial + more

    def remove(self, acc: int, partial: int) -> int:
        return acc - partial

    def result(self, acc: int) -> int:
        return acc


class Sum(Aggregate):
    """Partial and accumulator: ``[sum, non-null count]`` (a sum of no values is NULL)."""

    def initialize(self) -> list[Any]:
        return [0, 0]

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        if not partial[1]:
            return acc
        return [acc[0] + partial[0], acc[1] + partial[1]]

    def merge(self, partial: list[Any], more: list[Any]) -> list[Any]:
        return self.add(partial, more)

    def remove(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        if not partial[1]:
            return acc
        remaining = acc[1] - partial[1]
        return [acc[0] - partial[0] if remaining else 0, remaining]

    def result(self, acc: list[Any]) -> Any:
        return acc[0] if acc[1] else None


class Avg(Sum):
    def result(self, acc: list[Any]) -> float | None:
        return float(acc[0]) / acc[1] if acc[1] else None


class CountDistinct(Aggregate):
    """Partial: the pane's distinct values; accumulator: value -> panes holding it."""

    def initialize(self) -> dict[Any, int]:
        return {}

    def add(self, acc: dict[Any, int], partial: list[Any]) -> dict[Any, int]:
        for value in partial:
            acc[value] = acc.get(value, 0) + 1
        return acc

    def merge(self, partial: list[Any], more: list[Any]) -> list[Any]:
        seen = set(partial)
        return partial + [v for v in more if v not in seen]

    def remove(self, acc: dict[Any, int], partial: list[Any]) -> dict[Any, int]:
        for value in partial:
            left = acc.get(value, 0) - 1
            if left > 0:
                acc[value] = left
            else:
                acc.pop(value, None)
        return acc

    def result(self, acc: dict[Any, int]) -> int:
        return len(acc)


class Extreme(Aggregate):
    """min or max: partial and accumulator are a value (None when no values)."""

    invertible = False

    def __init__(self, is_max: bool) -> None:
        self.is_max = is_max

    def better(self, a: Any, b: Any) -> bool:
        """Whether ``a`` wins over ``b``."""
        return bool(a > b) if self.is_max else bool(a < b)

    def initialize(self) -> Any:
        return None

    def add(self, acc: Any, partial: Any) -> Any:
        if partial is None:
            return acc
        if acc is None or self.better(partial, acc):
            return partial
        return acc

    def merge(self, partial: Any, more: Any) -> Any:
        return self.add(partial, more)

    def result(self, acc: Any) -> Any:
        return acc


def time_key(pair: list[Any]) -> tuple[Any, ...]:
    """How ``[event time, value]`` pairs order: by time, then (a tie) by value,
    NULLs first — as Spark orders the STRUCTs it pre-aggregates them as."""
    time, value = pair
    return (time is not None, time if time is not None else 0, value is not None, value)


class ByTime(Extreme):
    """first_value or last_value: partial and accumulator are ``[event time, value]``
    of the earliest (latest) row; equal times: the smaller (larger) value."""

    def better(self, a: Any, b: Any) -> bool:
        return time_key(a) > time_key(b) if self.is_max else time_key(a) < time_key(b)

    def result(self, acc: Any) -> Any:
        return None if acc is None else acc[1]


class Rows(Aggregate):
    """The argument rows of an aggregate UDF (which runs when the window fires).

    Partial: a pane's rows (each a list of argument values).  Accumulator: the
    entered panes' partials in entering order, a bag from which a leaving
    pane's partial is taken out again (usually the first one: panes leave in
    the order they entered).  Result: every row, as tuples (Arrow's STRUCTs).
    """

    def initialize(self) -> list[list[list[Any]]]:
        return []

    def add(self, acc: list[list[list[Any]]], partial: list[list[Any]]) -> list[list[list[Any]]]:
        acc.append(partial)
        return acc

    def merge(self, partial: list[list[Any]], more: list[list[Any]]) -> list[list[Any]]:
        return partial + more

    def remove(self, acc: list[list[list[Any]]],
               partial: list[list[Any]]) -> list[list[list[Any]]]:
        acc.remove(partial)
        return acc

    def result(self, acc: list[list[list[Any]]]) -> list[tuple[Any, ...]]:
        return [tuple(row) for partial in acc for row in partial]


def merge_moments(acc: list[Any], more: list[Any]) -> list[Any]:
    """Two ``[count, mean, sum of squared deviations]`` combined (Chan et al.).

    A negative count (and deviation sum) in ``more`` takes those values out
    again: the same formula, exactly inverted.  No values left: ``[0, 0.0, 0.0]``.
    """
    count = acc[0] + more[0]
    if not more[0]:
        return acc
    if not count:
        return [0, 0.0, 0.0]
    delta = more[1] - acc[1]
    mean = acc[1] + delta * more[0] / count
    squares = acc[2] + more[2] + delta * delta * acc[0] * more[0] / count
    # one value has no spread: no residue of values taken out
    return [count, mean, max(squares, 0.0) if count != 1 else 0.0]


def merge_comoments(acc: list[Any], more: list[Any]) -> list[Any]:
    """Two ``[count, mean y, mean x, sum of squared y deviations, of x deviations, of
    their products]`` combined, as :func:`merge_moments` (negative: taken out)."""
    count = acc[0] + more[0]
    if not more[0]:
        return acc
    if count == 0:
        return [0, 0.0, 0.0, 0.0, 0.0, 0.0]
    dy, dx = more[1] - acc[1], more[2] - acc[2]
    weight = acc[0] * more[0] / count
    if count == 1:
        return [1, acc[1] + dy * more[0], acc[2] + dx * more[0], 0.0, 0.0, 0.0]
    return [count, acc[1] + dy * more[0] / count, acc[2] + dx * more[0] / count,
            max(acc[3] + more[3] + dy * dy * weight, 0.0),
            max(acc[4] + more[4] + dx * dx * weight, 0.0),
            acc[5] + more[5] + dy * dx * weight]


_RESIDUE = 1e-12


def comoments_result(function: str, acc: list[Any]) -> Any:
    """corr, covar_* or regr_* of (y, x) pairs; NULL where a divisor is 0 (DuckDB: NaN)."""
    count, mean_y, mean_x, syy, sxx, sxy = acc
    if function == "regr_count":
        return count
    # panes taken out of a sliding window leave rounding residue where no spread is
    # left: below this much of the values' squares, a spread counts as none
    syy = syy if syy > _RESIDUE * count * (mean_y * mean_y + 1) else 0.0
    sxx = sxx if sxx > _RESIDUE * count * (mean_x * mean_x + 1) else 0.0
    divisor = {"covar_samp": count - 1, "corr": sqrt(sxx * syy), "regr_slope": sxx,
               "regr_intercept": sxx, "regr_r2": sxx}.get(function, count)
    if divisor <= 0:
        return None
    results: dict[str, Callable[[], float]] = {
        "covar_pop": lambda: sxy / count, "covar_samp": lambda: sxy / (count - 1),
        "corr": lambda: sxy / divisor, "regr_slope": lambda: sxy / sxx,
        "regr_intercept": lambda: mean_y - sxy / sxx * mean_x,
        "regr_r2": lambda: sxy * sxy / (sxx * syy) if syy else 1.0,
        "regr_avgx": lambda: mean_x, "regr_avgy": lambda: mean_y,
        "regr_sxx": lambda: sxx, "regr_syy": lambda: syy, "regr_sxy": lambda: sxy,
    }
    return float(results[function]())


def moments_result(function: str, acc: list[Any]) -> float | None:
    """var_samp, var_pop, stddev_samp or stddev_pop of ``[count, mean, squares]``."""
    count, _, squares = acc
    divisor = count - 1 if function.endswith("_samp") else count
    if divisor <= 0:
        return None
    variance = squares / divisor
    return sqrt(variance) if function.startswith("stddev") else variance


def bit_counts(signed_values: Iterable[tuple[int, int]]) -> list[Any]:
    """``[net count, [net count of values with bit i set, for each bit]]``."""
    count = 0
    bits = [0] * INT_BITS
    for value, sign in signed_values:
        count += sign
        for i in range(INT_BITS):
            if value >> i & 1:
                bits[i] += sign
    return [count, bits]


def add_bit_counts(acc: list[Any], more: list[Any], sign: int = 1) -> list[Any]:
    return [acc[0] + sign * more[0],
            [a + sign * b for a, b in zip(acc[1], more[1], strict=True)]]


def bits_result(function: str, acc: list[Any]) -> int | None:
    """bit_and (bits every value has) or bit_or (bits some value has), signed 64-bit."""
    count, bits = acc
    if count <= 0:
        return None
    value = sum(1 << i for i, set_in in enumerate(bits)
                if (set_in == count if function == "bit_and" else set_in > 0))
    return value - (1 << INT_BITS) if value >> (INT_BITS - 1) else value


class Moments(Aggregate):
    """Variances and standard deviations: ``[count, mean, squared deviations]``."""

    #: how many numbers a partial holds, how two combine, and the SQL result
    width = 3
    combine = staticmethod(merge_moments)
    finish = staticmethod(moments_result)

    def __init__(self, function: str) -> None:
        self.function = function

    def initialize(self) -> list[Any]:
        return [0] + [0.0] * (self.width - 1)

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        return self.combine(acc, partial)

    def merge(self, partial: list[Any], more: list[Any]) -> list[Any]:
        return self.combine(partial, more)

    def remove(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        return self.combine(acc, negated(partial))

    def result(self, acc: list[Any]) -> Any:
        return self.finish(self.function, acc)


class Comoments(Moments):
    """corr, covar_*, regr_*: :func:`merge_comoments` partials and accumulator."""

    width = 6
    combine = staticmethod(merge_comoments)
    finish = staticmethod(comoments_result)


def negated(moments: list[Any]) -> list[Any]:
    """Moments (or co-moments) that take ``moments`` out again: negative count and sums."""
    count, *rest = moments
    means = 1 if len(moments) == 3 else 2
    return [-count, *rest[:means], *(-v for v in rest[means:])]


class BitXor(Sum):
    """Partial and accumulator: ``[xor, non-null count]``; xor is its own inverse."""

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        return [acc[0] ^ partial[0], acc[1] + partial[1]] if partial[1] else acc

    def remove(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        return [acc[0] ^ partial[0], acc[1] - partial[1]] if partial[1] else acc


class Bits(Aggregate):
    """bit_and or bit_or: partial and accumulator are :func:`bit_counts`."""

    def __init__(self, function: str) -> None:
        self.function = function

    def initialize(self) -> list[Any]:
        return [0, [0] * INT_BITS]

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        return add_bit_counts(acc, partial)

    def merge(self, partial: list[Any], more: list[Any]) -> list[Any]:
        return add_bit_counts(partial, more)

    def remove(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        return add_bit_counts(acc, partial, sign=-1)

    def result(self, acc: list[Any]) -> int | None:
        return bits_result(self.function, acc)


def bag_result(function: str, values: list[Any], fraction: float | None) -> Any:
    """array_agg (NULLs kept; None for no rows), median or percentile_cont (NULLs
    ignored, interpolated linearly as DuckDB's quantile_cont; None for no values)."""
    if function == "array_agg":
        return values or None
    if function == "percentile_cont_weighted":
        return weighted_percentile([v for v in values if v is not None],
                                   0.5 if fraction is None else fraction)
    ordered = sorted(v for v in values if v is not None)
    if not ordered:
        return None
    position = (0.5 if fraction is None else fraction) * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    return float(ordered[below] + (ordered[above] - ordered[below]) * (position - below))


def weighted_percentile(pairs: list[list[float]], fraction: float) -> float | None:
    """The ``fraction`` percentile of ``[value, weight]`` pairs, exact: percentile_cont's
    linear interpolation over the values as if each were repeated ``weight`` times
    (DuckDB's quantile_cont of that multiset, Spark's percentile with frequencies), a
    fractional weight covering that much of a position.  None without positive weights."""
    ordered = sorted((value, weight) for value, weight in pairs if weight > 0)
    if not ordered:
        return None
    ends = list(accumulate(weight for _, weight in ordered))  # each value's last position + 1
    position = max(0.0, fraction * (ends[-1] - 1))
    below = floor(position)

    def value_at(index: int) -> float:
        return ordered[min(bisect_right(ends, index), len(ordered) - 1)][0]

    low, high = value_at(below), value_at(below + 1)
    return float(low + (high - low) * (position - below))


class Values(Aggregate):
    """array_agg, median, percentile_cont: partial, a pane's values (NULLs too);
    accumulator, the entered panes' values in entering order (see :class:`Rows`)."""

    def __init__(self, function: str, fraction: float | None) -> None:
        self.function = function
        self.fraction = fraction

    def initialize(self) -> list[list[Any]]:
        return []

    def add(self, acc: list[list[Any]], partial: list[Any]) -> list[list[Any]]:
        acc.append(partial)
        return acc

    def merge(self, partial: list[Any], more: list[Any]) -> list[Any]:
        return partial + more

    def remove(self, acc: list[list[Any]], partial: list[Any]) -> list[list[Any]]:
        acc.remove(partial)
        return acc

    def result(self, acc: list[list[Any]]) -> Any:
        return bag_result(self.function, [v for partial in acc for v in partial],
                          self.fraction)


#: Planner function names kept as bags of values (AggregateCall.function).
BAGS = ("array_agg", "median", "percentile_cont", "percentile_cont_weighted")
#: Planner function names of the variance family (AggregateCall.function).
MOMENTS = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")
#: ... and of (y, x) pairs.
COMOMENTS = ("corr", "covar_samp", "covar_pop", "regr_slope", "regr_intercept", "regr_count",
             "regr_r2", "regr_avgx", "regr_avgy", "regr_sxx", "regr_syy", "regr_sxy")


def make_aggregate(function: str, fraction: float | None = None) -> Aggregate:
    """The :class:`Aggregate` for a planner function name (and percentile fraction)."""
    factories: dict[str, Callable[[], Aggregate]] = {
        "count_star": Count, "count": Count, "sum": Sum, "avg": Avg,
        "count_distinct": CountDistinct,
        "min": lambda: Extreme(is_max=False), "max": lambda: Extreme(is_max=True),
        "udaf_rows": Rows, "bit_xor": BitXor,
        "first_value": lambda: ByTime(is_max=False), "last_value": lambda: ByTime(is_max=True),
        "bit_and": lambda: Bits("bit_and"), "bit_or": lambda: Bits("bit_or"),
        **{name: partial(Moments, name) for name in MOMENTS},
        **{name: partial(Values, name, fraction) for name in BAGS},
        **{name: partial(Comoments, name) for name in COMOMENTS},
    }
    return factories[function]()
