"""Arrow columns to the plain Python values operator state stores, and back."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def to_python(column: pa.ChunkedArray | pa.Array) -> list[Any]:
    """Plain values: timestamps as int microseconds, dates as int days, decimals as float."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        column = pc.cast(column, pa.timestamp("us", tz=kind.tz)).cast(pa.int64())
    elif pa.types.is_date32(kind):
        column = column.cast(pa.int32())
    elif pa.types.is_large_list(kind) or pa.types.is_list(kind):
        return [_plain_list(v) for v in column.to_pylist()]
    result: list[Any] = column.to_pylist()
    if pa.types.is_decimal(kind):
        return [float(v) if isinstance(v, Decimal) else v for v in result]
    return result


def _plain_list(items: list[Any] | None) -> list[Any] | None:
    if items is None:
        return None
    return [float(v) if isinstance(v, Decimal) else _plain_scalar(v) for v in items]


def _plain_scalar(value: Any) -> Any:
    if hasattr(value, "timestamp") and hasattr(value, "tzinfo"):
        return int(value.timestamp() * 1_000_000)
    return value


def from_python(items: list[Any], kind: pa.DataType) -> pa.Array:
    """The inverse of :func:`to_python` for a target Arrow type."""
    if pa.types.is_timestamp(kind):
        return pa.array(items, pa.int64()).cast(pa.timestamp("us")).cast(kind)
    if pa.types.is_date32(kind):
        return pa.array(items, pa.int32()).cast(kind)
    if pa.types.is_decimal(kind):
        return pa.array(items, pa.float64())
    return pa.array(items, kind)
