"""What one aggregate function is made of, declared once per planner function name.

An :class:`AggregateFunction` holds everything the window and updating
operators need of one aggregate (``AggregateCall.function``): the native Spark
SQL of its pane partial and how those columns decode, the window operator's
:class:`Aggregate` (``initialize / add / merge / remove / result`` over pane
partials), the updating operator's signed-partial SQL, its decoding and
:class:`Accumulator`, and the result type of each.  The registry
(:mod:`spate.engine.operators.aggregates.registry`) maps names to them, so the
runtime looks an aggregate up instead of switching on its name.

All partials and accumulators are plain msgpack-able Python objects, because
they are stored.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Protocol

import pyarrow as pa


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


class Accumulator(ABC):
    """One aggregate function of an updating aggregate."""

    @abstractmethod
    def initialize(self) -> Any:
        """The accumulator of a key without rows."""

    @abstractmethod
    def add(self, acc: Any, partial: Any) -> Any:
        """``acc`` with one signed partial merged in."""

    @abstractmethod
    def result(self, acc: Any) -> Any:
        """The SQL value of the aggregate."""


class PartialColumns(Protocol):
    """One aggregate's partial columns ``p<i>_<j>`` of a batch, as the runtime reads
    them from Arrow (the operators stay free of the runtime)."""

    def python(self, j: int, exact: bool = False) -> list[Any]:
        """Column ``j`` as plain values (decimals as text with ``exact``)."""

    def signed(self, j: int, exact: bool = False) -> list[list[list[Any]]]:
        """Column ``j`` of ``list<struct<v, s>>``: per row ``[[value, sign], ...]``."""

    def rows(self, j: int) -> list[list[list[Any]]]:
        """Column ``j`` of lists of STRUCTs: per row, its STRUCTs as lists of values."""


class AggregateFunction(ABC):
    """Everything the operators need of one planner aggregate function ``name``.

    The window side is abstract (every aggregate runs in windows); the updating
    side defaults to the shape most families share, and an aggregate without an
    updating form (an aggregate UDF) says so when asked.
    """

    #: how the columnar paths merge the partials: "count", "sum", "extreme", "moments"
    #: (variances) or "comoments" (the (y, x) aggregates), in windows
    #: (:mod:`spate.engine.operators.window_columns`) and updating aggregates, or
    #: "distinct" or "timed" (first/last values; TUMBLE and HOP windows only), or "bits"
    #: (bit_and, bit_or, bit_xor) or "bag" (array_agg, median, percentile_cont), whose
    #: windows merge so (updating aggregates: see runtime/updating_columns.py), or "rows"
    #: (an aggregate UDF's argument rows); None: not columnar
    columnar: str | None = None

    def __init__(self, name: str) -> None:
        self.name = name

    # -- windows ------------------------------------------------------------------

    @abstractmethod
    def pane_sql(self) -> list[str]:
        """Native Spark SQL of a pane partial's columns (``{a}``: the argument)."""

    def pane_partials(self, columns: PartialColumns) -> list[Any]:
        """Per-row pane partials, in the shape :meth:`window`'s Aggregate expects."""
        return columns.python(0)

    @abstractmethod
    def window(self, fraction: float | None) -> Aggregate:
        """The window operator's aggregate (``fraction``: a percentile's)."""

    def window_type(self, partial: pa.DataType) -> pa.DataType:
        """The result type, from the type of the pane partial's first column."""
        return plain_nested(partial)

    # -- updating aggregates --------------------------------------------------------

    def signed_sql(self, a: str, sign: str, updating_input: bool) -> list[str]:
        """Native SQL of a signed partial's columns: ``a`` the quoted argument, ``sign``
        the SQL of a row's sign (+1 added, -1 withdrawn)."""
        raise NotImplementedError(f"{self.name} has no updating form")

    def signed_partials(self, columns: PartialColumns, updating_input: bool) -> list[Any]:
        """Per-row signed partials, in the shape :meth:`accumulator` expects."""
        return columns.python(0)

    def accumulator(self, updating_input: bool, fraction: float | None) -> Accumulator:
        """The updating operator's accumulator."""
        raise NotImplementedError(f"{self.name} has no updating form")

    def updating_type(self, partial: pa.DataType, updating_input: bool) -> pa.DataType:
        """The result type, from the type of the signed partial's first column."""
        return plain_type(partial)


def counted(a: str, sign: str) -> str:
    """The net number of non-NULL arguments: the count column of signed partials."""
    return f"sum(IF({a} IS NULL, 0, {sign}))"


def signed_values_sql(a: str, sign: str) -> str:
    """Every non-NULL argument with its sign (multisets and bit counts)."""
    return f"collect_list(IF({a} IS NULL, NULL, named_struct('v', {a}, 's', {sign})))"


def with_counts(totals: list[Any], counts: list[Any]) -> list[Any]:
    """``[total, non-NULL count]`` partials (a total of no values reads 0)."""
    return [[0 if s is None else s, c] for s, c in zip(totals, counts, strict=True)]


def plain_type(kind: pa.DataType) -> pa.DataType:
    """How state values of ``kind`` come back out of updating state (decimals as doubles)."""
    return pa.float64() if pa.types.is_decimal(kind) else kind


def plain_nested(kind: pa.DataType) -> pa.DataType:
    """``kind`` with decimals as float64 (how window state holds them), also nested."""
    if pa.types.is_decimal(kind):
        return pa.float64()
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(plain_nested(kind.value_type))
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(plain_nested(field.type)) for field in kind])
    return kind
