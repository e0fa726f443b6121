"""Exact sums and extremes of DECIMAL columns in NumPy, with no Python number per value.

A decimal128 value is its unscaled integer in 128 bits of two's complement: four
32-bit words, lowest first.  :func:`words` reads a column as those words, each in an
int64 (the top one signed), so any sum of words taken column by column (prefix sums,
segment sums) stays exact for fewer than 2**31 values.  :func:`from_words` carries
such sums back into one integer per row, as a decimal256 wide enough for any of them,
and casts it to the type asked for: a decimal (checked against its precision, as Spark
checks a sum's) or the double nearest to the exact total (:func:`doubles`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: 32-bit words in a decimal128 value, and in the decimal256 the sums come back in.
WORDS, WIDE_WORDS = 4, 8
_LOW = 0xFFFF_FFFF


def words(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``column`` (decimal128; NULL as 0) as an ``(n, 4)`` int64 array of its unscaled
    values' 32-bit words, lowest first, the top word signed."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_decimal128(array.type):
        raise TypeError(f"expected decimal128 values, not {array.type}")
    count = len(array)
    if count == 0:
        return np.zeros((0, WORDS), np.int64)
    array = array.fill_null(0)
    raw = np.frombuffer(array.buffers()[1], dtype="<u4",
                        count=WORDS * (array.offset + count))[WORDS * array.offset:]
    unsigned = raw.reshape(count, WORDS)
    split: np.ndarray = unsigned.astype(np.int64)
    split[:, -1] = unsigned[:, -1].view("<i4")
    return split


def from_words(sums: np.ndarray, nulls: np.ndarray, scale: int, kind: pa.DataType) -> pa.Array:
    """Per row, the decimal of ``scale`` whose unscaled value is ``sums``' words added up
    (``sums[:, k]`` counts ``2**(32 k)`` times), as ``kind``; NULL where ``nulls``."""
    count = len(sums)
    wide = np.zeros((count, WIDE_WORDS), np.int64)
    carry = np.zeros(count, np.int64)
    for k in range(WIDE_WORDS):
        total = carry + sums[:, k] if k < WORDS else carry
        wide[:, k] = total & _LOW
        carry = total >> 32  # arithmetic: a negative total carries -1s up, its sign
    data = pa.py_buffer(wide.astype("<u4").tobytes())
    exact = pa.Array.from_buffers(pa.decimal256(76, scale), count, [None, data])
    values = doubles(exact).cast(kind) if pa.types.is_floating(kind) else exact.cast(kind)
    if nulls.any():
        values = pc.if_else(pa.array(nulls), pa.nulls(count, kind), values)
    return values


def compare_words(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Per row, -1, 0 or 1 as the decimal ``first`` (its :func:`words`) is below, equal to
    or above ``second``: the most significant word that differs decides."""
    result = np.zeros(len(first), np.int64)
    for k in range(WORDS):  # lowest first: a higher word that differs overrides
        result = np.where(first[:, k] != second[:, k], np.sign(first[:, k] - second[:, k]),
                          result)
    return result


def doubles(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The decimal ``column`` as the doubles nearest its values.  (Arrow's own cast can
    miss by one unit in the last place; its reading of decimal text does not.)"""
    return column.cast(pa.string()).cast(pa.float64())


def as_output(values: pa.Array | pa.ChunkedArray, kind: pa.DataType
              ) -> pa.Array | pa.ChunkedArray:
    """``values`` as an aggregate's output type ``kind``: decimals that come out as
    doubles through :func:`doubles`, anything else by Arrow's cast."""
    if pa.types.is_decimal(values.type) and pa.types.is_floating(kind):
        return doubles(values).cast(kind)
    return values.cast(kind)


def decimal_sums(column: pa.Array | pa.ChunkedArray, summed: Callable[[np.ndarray], np.ndarray],
                 nulls: np.ndarray, kind: pa.DataType) -> pa.Array:
    """Exact sums of the decimal ``column`` (NULL as 0), as ``kind``: ``summed`` takes
    one int64 word per value and gives the sums wanted (of segments, of windows' panes);
    NULL where ``nulls``."""
    split = words(column)
    sums = np.stack([summed(split[:, k]) for k in range(WORDS)], axis=1)
    return from_words(sums, nulls, column.type.scale, kind)
