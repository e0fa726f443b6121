"""An aggregate UDF's argument rows (``udaf_rows``): the UDF itself runs when the
window fires, over every row the window holds.  Windows only: an updating
aggregate cannot call an aggregate UDF."""

from __future__ import annotations

from typing import Any

from spate.engine.operators.aggregates.base import Aggregate, AggregateFunction, PartialColumns


class Rows(Aggregate):
    """The argument rows of an aggregate UDF.

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


class RowsFunction(AggregateFunction):
    """``udaf_rows``: a pane's argument rows."""

    columnar = "rows"  # a window's (session's) parts' rows, joined in the order of their starts

    def pane_sql(self) -> list[str]:
        # sorted so that a replay collects them alike
        return ["array_sort(collect_list({a}))"]

    def pane_partials(self, columns: PartialColumns) -> list[Any]:
        return columns.rows(0)

    def window(self, fraction: float | None) -> Aggregate:
        return Rows()
