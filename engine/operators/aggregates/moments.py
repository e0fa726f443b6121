"""The variances (var_*, stddev_*) and the (y, x) aggregates (corr, covar_*, regr_*).

They keep moments: ``[count, mean, sum of squared deviations]``
(:func:`merge_moments`), or co-moments of pairs (:func:`merge_comoments`), which
combine exactly and are invertible with a negative count: a window takes a pane
out, and an updating aggregate's signed partial carries the moments of the rows
added, then of those withdrawn.
"""

from __future__ import annotations

from collections.abc import Callable
from math import sqrt
from typing import Any

import numpy as np
import pyarrow as pa

from spate.engine.operators.aggregates.base import (
    Accumulator,
    Aggregate,
    AggregateFunction,
    PartialColumns,
)
from spate.engine.planner.plan import RETRACT

#: The partial of a variance: ``[count, mean, sum of squared deviations]``.
MOMENTS_SQL = ["count({a})", "avg(CAST({a} AS DOUBLE))",
               "var_pop(CAST({a} AS DOUBLE)) * count({a})"]
#: The partial of a (y, x) aggregate over ``[y, x]`` arrays (NULL: a pair left out):
#: ``[count, mean y, mean x, y squares, x squares, products]`` (deviations summed).
COMOMENTS_SQL = ["count({a})", "avg({a}[0])", "avg({a}[1])", "var_pop({a}[0]) * count({a})",
                 "var_pop({a}[1]) * count({a})", "covar_pop({a}[0], {a}[1]) * count({a})"]


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


def combined_columns(acc: list[np.ndarray], more: list[np.ndarray]) -> list[np.ndarray]:
    """:func:`merge_moments` (three columns) or :func:`merge_comoments` (six) element by
    element, in the same order of operations, so each element equals the scalar merge."""
    count = acc[0] + more[0]
    safe = np.where(count == 0, 1, count)
    unchanged, empty, single = more[0] == 0, count == 0, count == 1
    if len(acc) == 3:
        delta = more[1] - acc[1]
        means = [acc[1] + delta * more[0] / safe]
        squares = [acc[2] + more[2] + delta * delta * acc[0] * more[0] / safe]
        spreads = [np.maximum(squares[0], 0.0)]
    else:
        dy, dx = more[1] - acc[1], more[2] - acc[2]
        weight = acc[0] * more[0] / safe
        means = [acc[1] + dy * more[0] / safe, acc[2] + dx * more[0] / safe]
        spreads = [np.maximum(acc[3] + more[3] + dy * dy * weight, 0.0),
                   np.maximum(acc[4] + more[4] + dx * dx * weight, 0.0),
                   acc[5] + more[5] + dy * dx * weight]
    merged = [count, *means, *(np.where(single, 0.0, spread) for spread in spreads)]
    return [np.where(unchanged, old, np.where(empty, 0 if j == 0 else 0.0, new))
            for j, (old, new) in enumerate(zip(acc, merged, strict=True))]


def columns_result(function: str, acc: list[np.ndarray], exists: np.ndarray) -> pa.Array:
    """:func:`moments_result` or :func:`comoments_result` element by element (NULL where
    a divisor is 0, or where ``exists`` is false)."""
    if len(acc) == 3:
        count, _, squares = acc
        divisor = count - 1 if function.endswith("_samp") else count
        valid = exists & (divisor > 0)
        variance = squares / np.where(valid, divisor, 1)
        values = np.sqrt(variance) if function.startswith("stddev") else variance
        return pa.array(values, pa.float64(), mask=~valid)
    count, mean_y, mean_x, syy, sxx, sxy = acc
    if function == "regr_count":
        return pa.array(count, pa.int64(), mask=~exists)
    syy = np.where(syy > _RESIDUE * count * (mean_y * mean_y + 1), syy, 0.0)
    sxx = np.where(sxx > _RESIDUE * count * (mean_x * mean_x + 1), sxx, 0.0)
    divisor = {"covar_samp": count - 1, "corr": np.sqrt(sxx * syy), "regr_slope": sxx,
               "regr_intercept": sxx, "regr_r2": sxx}.get(function, count)
    valid = exists & (divisor > 0)
    results: dict[str, Callable[[], np.ndarray]] = {
        "covar_pop": lambda: sxy / count, "covar_samp": lambda: sxy / (count - 1),
        "corr": lambda: sxy / divisor, "regr_slope": lambda: sxy / sxx,
        "regr_intercept": lambda: mean_y - sxy / sxx * mean_x,
        "regr_r2": lambda: np.where(syy != 0, sxy * sxy / (sxx * syy), 1.0),
        "regr_avgx": lambda: mean_x, "regr_avgy": lambda: mean_y,
        "regr_sxx": lambda: sxx, "regr_syy": lambda: syy, "regr_sxy": lambda: sxy,
    }
    with np.errstate(divide="ignore", invalid="ignore"):  # masked where a divisor is 0
        values = results[function]()
    return pa.array(np.asarray(values, np.float64), pa.float64(), mask=~valid)


def moments_result(function: str, acc: list[Any]) -> float | None:
    """var_samp, var_pop, stddev_samp or stddev_pop of ``[count, mean, squares]``."""
    count, _, squares = acc
    divisor = count - 1 if function.endswith("_samp") else count
    if divisor <= 0:
        return None
    variance = squares / divisor
    return sqrt(variance) if function.startswith("stddev") else variance


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


#: How many numbers a partial holds, by columnar kind (``AggregateFunction.columnar``).
MOMENT_COLUMNS = {"moments": Moments.width, "comoments": Comoments.width}


def negated(moments: list[Any]) -> list[Any]:
    """Moments (or co-moments) that take ``moments`` out again: negative count and sums."""
    count, *rest = moments
    means = 1 if len(moments) == 3 else 2
    return [-count, *rest[:means], *(-v for v in rest[means:])]


class SignedMoments(Accumulator):
    """Variances: the partial is the moments of the rows added, then of those withdrawn
    (the accumulator, its width and arithmetic are :class:`Moments`')."""

    kind: type[Moments] = Moments

    def __init__(self, function: str) -> None:
        self.moments = self.kind(function)

    def initialize(self) -> list[Any]:
        return self.moments.initialize()

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        width = self.moments.width
        return self.moments.remove(self.moments.add(acc, partial[:width]), partial[width:])

    def result(self, acc: list[Any]) -> Any:
        return self.moments.result(acc)


class SignedComoments(SignedMoments):
    """corr, covar_*, regr_*: co-moments of the pairs added, then of those withdrawn."""

    kind = Comoments


class MomentsFunction(AggregateFunction):
    """var_samp, var_pop, stddev_samp or stddev_pop (by ``name``)."""

    columnar: str | None = "moments"
    templates = MOMENTS_SQL
    window_kind: type[Moments] = Moments
    signed_kind: type[SignedMoments] = SignedMoments

    def pane_sql(self) -> list[str]:
        return list(self.templates)

    def pane_partials(self, columns: PartialColumns) -> list[Any]:
        more = [columns.python(j) for j in range(1, len(self.templates))]
        return [[n, *(v or 0.0 for v in rest)]
                for n, *rest in zip(columns.python(0), *more, strict=True)]

    def window(self, fraction: float | None) -> Aggregate:
        return self.window_kind(self.name)

    def window_type(self, partial: pa.DataType) -> pa.DataType:
        return pa.int64() if self.name == "regr_count" else pa.float64()

    def signed_sql(self, a: str, sign: str, updating_input: bool) -> list[str]:
        # (co-)moments of the rows added, then of those withdrawn
        withdrawn = f"IF(`{RETRACT}`, {a}, NULL)" if updating_input else "NULL"
        added = f"IF(`{RETRACT}`, NULL, {a})" if updating_input else a
        return [sql.format(a=rows) for rows in (added, withdrawn) for sql in self.templates]

    def signed_partials(self, columns: PartialColumns, updating_input: bool) -> list[Any]:
        width = 2 * len(self.templates)
        rows = zip(*(columns.python(j) for j in range(width)), strict=True)
        return [[0 if v is None else v for v in row] for row in rows]

    def accumulator(self, updating_input: bool, fraction: float | None) -> Accumulator:
        return self.signed_kind(self.name)

    def updating_type(self, partial: pa.DataType, updating_input: bool) -> pa.DataType:
        return self.window_type(partial)


class ComomentsFunction(MomentsFunction):
    """corr, covar_*, regr_* (by ``name``): over ``[y, x]`` pairs."""

    columnar = "comoments"
    templates = COMOMENTS_SQL
    window_kind = Comoments
    signed_kind = SignedComoments
