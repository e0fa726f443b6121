"""min and max (and so bool_and and bool_or, planned as min and max of booleans).

Not invertible: a sliding window serves them from a monotonic deque
(:mod:`spate.engine.operators.window`).  Over updating input they keep a multiset,
so withdrawing the current extreme finds the next; over append-only input just
the current value.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spate.engine.operators.aggregates.base import (
    Accumulator,
    Aggregate,
    AggregateFunction,
    PartialColumns,
    plain_type,
    signed_values_sql,
)
from spate.engine.operators.aggregates.multiset import Multiset, spark_order


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


class AppendExtreme(Accumulator):
    """min or max over append-only input: partial and accumulator are one value."""

    def __init__(self, is_max: bool) -> None:
        self.is_max = is_max

    def initialize(self) -> Any:
        return None

    def add(self, acc: Any, partial: Any) -> Any:
        if partial is None:
            return acc
        if acc is None:
            return partial
        return max(acc, partial) if self.is_max else min(acc, partial)

    def result(self, acc: Any) -> Any:
        return acc


class MultisetExtreme(Multiset):
    """min or max over updating input."""

    def __init__(self, is_max: bool) -> None:
        self.is_max = is_max

    def result(self, acc: list[list[Any]]) -> Any:
        if not acc:
            return None
        values = [value for value, _ in acc]
        return (max(values, key=spark_order) if self.is_max
                else min(values, key=spark_order))


class ExtremeFunction(AggregateFunction):
    """min or max (by ``name``)."""

    columnar = "extreme"

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.is_max = name == "max"

    def pane_sql(self) -> list[str]:
        return [f"{self.name}({{a}})"]

    def window(self, fraction: float | None) -> Aggregate:
        return Extreme(self.is_max)

    def signed_sql(self, a: str, sign: str, updating_input: bool) -> list[str]:
        return [signed_values_sql(a, sign) if updating_input else f"{self.name}({a})"]

    def signed_partials(self, columns: PartialColumns, updating_input: bool) -> list[Any]:
        return columns.signed(0) if updating_input else columns.python(0)

    def accumulator(self, updating_input: bool, fraction: float | None) -> Accumulator:
        return (MultisetExtreme if updating_input else AppendExtreme)(self.is_max)

    def updating_type(self, partial: pa.DataType, updating_input: bool) -> pa.DataType:
        if updating_input:  # list<struct<v, s>>
            partial = partial.value_type.field("v").type
        return plain_type(partial)
