"""bit_xor, bit_and and bit_or over BIGINT values.

In windows a pane's partial is Spark's own ``bit_xor``, ``bit_and`` or ``bit_or``
of its values and their non-NULL count: the columnar windows
(:mod:`spate.engine.operators.window_columns`) combine those directly.  bit_xor
keeps ``[xor, non-NULL count]``: xor is its own inverse, so the per-key path
removes a pane and updating input withdraws a value by xoring it again.  bit_and
and bit_or are not invertible as values, so the per-key path keeps per-bit counts
(:func:`bit_counts`), which add and subtract, and the columnar updating aggregate
a multiset of values (:mod:`spate.engine.runtime.updating_columns`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pyarrow as pa

from spate.engine.operators.aggregates.base import (
    Accumulator,
    Aggregate,
    AggregateFunction,
    PartialColumns,
    counted,
    plain_type,
    signed_values_sql,
    with_counts,
)
from spate.engine.operators.aggregates.sums import SignedSum, Sum

#: Bits of the integers bit_and and bit_or count (two's complement BIGINT).
INT_BITS = 64


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


def pane_bit_counts(value: int | None, count: int) -> list[Any]:
    """A pane's bit_and or bit_or ``value`` of ``count`` non-NULL values, as
    :func:`bit_counts` that add up to the same results: each bit of ``value`` counts
    as set in all ``count`` values, any other in none.  For bit_and a bit is set in
    all of them or not; bit_or asks only whether some value has it."""
    bits = [count if value is not None and value >> i & 1 else 0 for i in range(INT_BITS)]
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


class BitXor(Sum):
    """Partial and accumulator: ``[xor, non-null count]``; xor is its own inverse."""

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        return [acc[0] ^ partial[0], acc[1] + partial[1]] if partial[1] else acc

    def remove(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        return [acc[0] ^ partial[0], acc[1] - partial[1]] if partial[1] else acc


class BitCounts:
    """bit_and or bit_or over :func:`bit_counts`: what a window's and an updating
    aggregate's accumulator share."""

    def __init__(self, function: str) -> None:
        self.function = function

    def initialize(self) -> list[Any]:
        return [0, [0] * INT_BITS]

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        return add_bit_counts(acc, partial)

    def result(self, acc: list[Any]) -> int | None:
        return bits_result(self.function, acc)


class Bits(BitCounts, Aggregate):
    """bit_and or bit_or: partial and accumulator are :func:`bit_counts`."""

    def merge(self, partial: list[Any], more: list[Any]) -> list[Any]:
        return add_bit_counts(partial, more)

    def remove(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        return add_bit_counts(acc, partial, sign=-1)


class SignedBitXor(SignedSum):
    """bit_xor: ``[xor of every value added or withdrawn, net non-NULL count]``."""

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        count = acc[1] + partial[1]
        return [acc[0] ^ partial[0] if count else 0, count]


class SignedBits(BitCounts, Accumulator):
    """bit_and or bit_or: net per-bit counts (:func:`bit_counts`)."""


class BitXorFunction(AggregateFunction):
    """bit_xor: ``[xor, non-NULL count]`` partials."""

    columnar = "bits"  # windows (TUMBLE, HOP and SESSION)

    def pane_sql(self) -> list[str]:
        return ["bit_xor({a})", "count({a})"]

    def pane_partials(self, columns: PartialColumns) -> list[Any]:
        return with_counts(columns.python(0), columns.python(1))

    def window(self, fraction: float | None) -> Aggregate:
        return BitXor()

    def signed_sql(self, a: str, sign: str, updating_input: bool) -> list[str]:
        return [f"bit_xor({a})", counted(a, sign)]  # a withdrawn value xors out again

    def signed_partials(self, columns: PartialColumns, updating_input: bool) -> list[Any]:
        return with_counts(columns.python(0), columns.python(1))

    def accumulator(self, updating_input: bool, fraction: float | None) -> Accumulator:
        return SignedBitXor()


class BitsFunction(AggregateFunction):
    """bit_and or bit_or (by ``name``): in windows, Spark's own of a pane and its
    non-NULL count; over updating input, the values with their signs, counted per bit."""

    columnar = "bits"  # windows (TUMBLE, HOP and SESSION)

    def pane_sql(self) -> list[str]:
        return [f"{self.name}({{a}})", "count({a})"]

    def pane_partials(self, columns: PartialColumns) -> list[Any]:
        return [pane_bit_counts(value, count) for value, count
                in zip(columns.python(0), columns.python(1), strict=True)]

    def window(self, fraction: float | None) -> Aggregate:
        return Bits(self.name)

    def signed_sql(self, a: str, sign: str, updating_input: bool) -> list[str]:
        return [signed_values_sql(a, sign)]

    def signed_partials(self, columns: PartialColumns, updating_input: bool) -> list[Any]:
        return [bit_counts((v, s) for v, s in row) for row in columns.signed(0)]

    def accumulator(self, updating_input: bool, fraction: float | None) -> Accumulator:
        return SignedBits(self.name)

    def updating_type(self, partial: pa.DataType, updating_input: bool) -> pa.DataType:
        return plain_type(partial.value_type.field("v").type)  # list<struct<v, s>>
