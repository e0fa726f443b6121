"""count(*), count(x) and count(DISTINCT x).

count(*) and count(x) keep a running number, invertible in windows and signed
over updating input.  count(DISTINCT x) keeps, in windows, each value with the
number of entered panes holding it, and over updating input a multiset.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spate.engine.operators.aggregates.base import (
    Accumulator,
    Aggregate,
    AggregateFunction,
    PartialColumns,
    counted,
    signed_values_sql,
)
from spate.engine.operators.aggregates.multiset import Multiset, hashable


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


class CountDistinct(Aggregate):
    """Partial: the pane's distinct values; accumulator: value -> panes holding it."""

    def initialize(self) -> dict[Any, int]:
        return {}

    def add(self, acc: dict[Any, int], partial: list[Any]) -> dict[Any, int]:
        for value in partial:
            key = hashable(value)
            acc[key] = acc.get(key, 0) + 1
        return acc

    def merge(self, partial: list[Any], more: list[Any]) -> list[Any]:
        seen = {hashable(v) for v in partial}
        return partial + [v for v in more if hashable(v) not in seen]

    def remove(self, acc: dict[Any, int], partial: list[Any]) -> dict[Any, int]:
        for value in partial:
            value = hashable(value)
            left = acc.get(value, 0) - 1
            if left > 0:
                acc[value] = left
            else:
                acc.pop(value, None)
        return acc

    def result(self, acc: dict[Any, int]) -> int:
        return len(acc)


class SignedCount(Accumulator):
    """count(*) and count(x): the partial is the net number of (non-NULL) rows."""

    def initialize(self) -> int:
        return 0

    def add(self, acc: int, partial: int) -> int:
        return acc + partial

    def result(self, acc: int) -> int:
        return acc


class MultisetDistinct(Multiset):
    """count(DISTINCT x): the number of values with a positive count."""

    def result(self, acc: list[list[Any]]) -> int:
        return len(acc)


class CountFunction(AggregateFunction):
    """count(*) (``count_star``) or count(x): a number of (non-NULL) rows."""

    columnar: str | None = "count"

    def pane_sql(self) -> list[str]:
        return ["count(1)"] if self.name == "count_star" else ["count({a})"]

    def window(self, fraction: float | None) -> Aggregate:
        return Count()

    def window_type(self, partial: pa.DataType) -> pa.DataType:
        return pa.int64()

    def signed_sql(self, a: str, sign: str, updating_input: bool) -> list[str]:
        return [f"sum({sign})"] if self.name == "count_star" else [counted(a, sign)]

    def accumulator(self, updating_input: bool, fraction: float | None) -> Accumulator:
        return SignedCount()

    def updating_type(self, partial: pa.DataType, updating_input: bool) -> pa.DataType:
        return pa.int64()


class CountDistinctFunction(CountFunction):
    """count(DISTINCT x): a pane's set of values; over updating input, a multiset."""

    columnar = "distinct"  # windows (TUMBLE, HOP) only

    def pane_sql(self) -> list[str]:
        return ["collect_set({a})"]

    def pane_partials(self, columns: PartialColumns) -> list[Any]:
        return [sorted(v or [], key=repr) for v in columns.python(0)]

    def window(self, fraction: float | None) -> Aggregate:
        return CountDistinct()

    def signed_sql(self, a: str, sign: str, updating_input: bool) -> list[str]:
        return [signed_values_sql(a, sign) if updating_input else f"collect_set({a})"]

    def signed_partials(self, columns: PartialColumns, updating_input: bool) -> list[Any]:
        if updating_input:
            return columns.signed(0)
        return [[[v, 1] for v in items] for items in columns.python(0)]

    def accumulator(self, updating_input: bool, fraction: float | None) -> Accumulator:
        return MultisetDistinct()
