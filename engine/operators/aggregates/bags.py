"""array_agg, median and percentile_cont (and the weighted percentile): bags of values.

In windows a pane's partial is its values (NULLs too: array_agg keeps them).
The columnar windows (:mod:`spate.engine.operators.window_columns`) take each
window's values from its panes' lists; on the per-key path the accumulator is
the entered panes' values in entering order, from which a leaving pane's values
are taken out again.  Over updating input the accumulator is a multiset.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from math import floor
from typing import Any

import pyarrow as pa

from spate.engine.operators.aggregates.base import (
    Accumulator,
    Aggregate,
    AggregateFunction,
    PartialColumns,
)
from spate.engine.operators.aggregates.multiset import Multiset


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
    accumulator, the entered panes' values in entering order (usually the first
    one leaves first: panes leave in the order they entered)."""

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


class MultisetValues(Multiset):
    """array_agg, median or percentile_cont over the values of a multiset."""

    def __init__(self, function: str, fraction: float | None) -> None:
        self.function = function
        self.fraction = fraction

    def result(self, acc: list[list[Any]]) -> Any:
        return bag_result(self.function, [v for v, count in acc for _ in range(count)],
                          self.fraction)


class BagFunction(AggregateFunction):
    """array_agg, median, percentile_cont or percentile_cont_weighted (by ``name``);
    array_agg's values are kept exact (decimals as text)."""

    columnar = "bag"  # windows (TUMBLE, HOP and SESSION)

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.exact = name == "array_agg"

    def pane_sql(self) -> list[str]:
        # NULLs kept (array_agg has them), sorted so that a replay collects them alike
        return ["array_sort(collect_list(named_struct('v', {a})))"]

    def pane_partials(self, columns: PartialColumns) -> list[Any]:
        return [[item["v"] for item in bag or []] for bag in columns.python(0, self.exact)]

    def window(self, fraction: float | None) -> Aggregate:
        return Values(self.name, fraction)

    def window_type(self, partial: pa.DataType) -> pa.DataType:
        return self._result_type(partial)

    def signed_sql(self, a: str, sign: str, updating_input: bool) -> list[str]:
        # every value and its sign, NULLs too (array_agg has them)
        return [f"collect_list(named_struct('v', {a}, 's', {sign}))"]

    def signed_partials(self, columns: PartialColumns, updating_input: bool) -> list[Any]:
        return columns.signed(0, self.exact)

    def accumulator(self, updating_input: bool, fraction: float | None) -> Accumulator:
        return MultisetValues(self.name, fraction)

    def updating_type(self, partial: pa.DataType, updating_input: bool) -> pa.DataType:
        return self._result_type(partial)

    def _result_type(self, partial: pa.DataType) -> pa.DataType:
        """array_agg: a list of the values (from a list of struct<v, ...>); else DOUBLE."""
        if self.exact:
            return pa.list_(partial.value_type.field("v").type)
        return pa.float64()
