"""sum and avg: a running ``[sum, non-NULL count]``, invertible in windows and
signed over updating input (a sum of no values is NULL)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spate.engine.operators.aggregates.base import (
    Accumulator,
    Aggregate,
    AggregateFunction,
    PartialColumns,
    counted,
    with_counts,
)


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


class SignedSum(Accumulator):
    """Partial and accumulator: ``[signed sum, net non-NULL count]``; no values: NULL."""

    def initialize(self) -> list[Any]:
        return [0, 0]

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        count = acc[1] + partial[1]
        # Once every value is withdrawn the sum restarts at an exact 0 (no float residue).
        return [acc[0] + partial[0] if count else 0, count]

    def result(self, acc: list[Any]) -> Any:
        return acc[0] if acc[1] > 0 else None


class SignedAvg(SignedSum):
    def result(self, acc: list[Any]) -> float | None:
        return float(acc[0]) / acc[1] if acc[1] > 0 else None


class SumFunction(AggregateFunction):
    """sum or avg (by ``name``)."""

    columnar = "sum"

    def pane_sql(self) -> list[str]:
        return ["sum({a})", "count({a})"]

    def pane_partials(self, columns: PartialColumns) -> list[Any]:
        return with_counts(columns.python(0), columns.python(1))

    def window(self, fraction: float | None) -> Aggregate:
        return Avg() if self.name == "avg" else Sum()

    def window_type(self, partial: pa.DataType) -> pa.DataType:
        return pa.float64() if self.name == "avg" else super().window_type(partial)

    def signed_sql(self, a: str, sign: str, updating_input: bool) -> list[str]:
        signed = a if sign == "1" else f"{sign} * {a}"
        return [f"sum({signed})", counted(a, sign)]

    def signed_partials(self, columns: PartialColumns, updating_input: bool) -> list[Any]:
        return with_counts(columns.python(0), columns.python(1))

    def accumulator(self, updating_input: bool, fraction: float | None) -> Accumulator:
        return SignedAvg() if self.name == "avg" else SignedSum()

    def updating_type(self, partial: pa.DataType, updating_input: bool) -> pa.DataType:
        return pa.float64() if self.name == "avg" else super().updating_type(partial,
                                                                              updating_input)
