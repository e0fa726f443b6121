"""Arrow columns to the plain Python values operator state stores, and back.

State is msgpack, which holds numbers, text, lists and maps only: timestamps
become int microseconds, dates int days, and decimals floats (the arithmetic
aggregates compute on them) or, where a value is kept as it is (array_agg's
elements), their exact text.  The same holds inside arrays and structs.

Operators that keep whole tables (columnar windows and updating aggregates,
join rows) store them as Arrow IPC streams (:func:`to_ipc`, :func:`from_ipc`).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DAY = dt.date(1970, 1, 1)
_MICROSECOND = dt.timedelta(microseconds=1)


def to_python(column: pa.ChunkedArray | pa.Array, exact: bool = False) -> list[Any]:
    """Plain values: timestamps as int microseconds, dates as int days, decimals as
    float, or with ``exact`` as their text, also inside arrays and structs."""
    kind = column.type
    if pa.types.is_timestamp(kind):
        column = pc.cast(column, pa.timestamp("us", tz=kind.tz)).cast(pa.int64())
    elif pa.types.is_date32(kind):
        column = column.cast(pa.int32())
    result: list[Any] = column.to_pylist()
    if pa.types.is_decimal(kind) or pa.types.is_nested(kind):
        return [_plain(v, exact) for v in result]
    return result


def _plain(value: Any, exact: bool) -> Any:
    """One Python value from Arrow as msgpack can hold it (see :func:`to_python`)."""
    if isinstance(value, Decimal):
        return str(value) if exact else float(value)
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        return (moment - _EPOCH) // _MICROSECOND  # exact: no float seconds
    if isinstance(value, dt.date):
        return (value - _EPOCH_DAY).days
    if isinstance(value, list):
        return [_plain(v, exact) for v in value]
    if isinstance(value, dict):
        return {name: _plain(v, exact) for name, v in value.items()}
    return value


def from_python(items: list[Any], kind: pa.DataType) -> pa.Array:
    """The inverse of :func:`to_python` for a target Arrow type (a DECIMAL alone comes
    back as the float state holds; inside arrays and structs as that DECIMAL)."""
    if pa.types.is_timestamp(kind):
        return pa.array(items, pa.int64()).cast(pa.timestamp("us")).cast(kind)
    if pa.types.is_date32(kind):
        return pa.array(items, pa.int32()).cast(kind)
    if pa.types.is_decimal(kind):
        return pa.array(items, pa.float64())
    if pa.types.is_nested(kind):
        return pa.array([_rebuilt(v, kind) for v in items], kind)
    return pa.array(items, kind)


def _rebuilt(value: Any, kind: pa.DataType) -> Any:
    """A plain value (see :func:`_plain`) as the Python value Arrow takes for ``kind``."""
    if value is None:
        return None
    if pa.types.is_timestamp(kind):
        moment = _EPOCH + value * _MICROSECOND
        return moment if kind.tz is not None else moment.replace(tzinfo=None)
    if pa.types.is_date32(kind):
        return _EPOCH_DAY + dt.timedelta(days=value)
    if pa.types.is_decimal(kind):  # text is exact; a float is rounded to the scale
        return Decimal(str(value)).quantize(Decimal(1).scaleb(-kind.scale))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return [_rebuilt(v, kind.value_type) for v in value]
    if pa.types.is_struct(kind):
        if isinstance(value, dict):
            return {field.name: _rebuilt(value.get(field.name), field.type) for field in kind}
        # A struct as a sequence of its fields' values (an aggregate UDF's row).
        return {field.name: _rebuilt(item, field.type)
                for field, item in zip(kind, value, strict=True)}
    return value


def to_ipc(table: pa.Table) -> bytes:
    """``table`` as one Arrow IPC stream, as state stores it."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as stream:
        stream.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def from_ipc(data: bytes) -> pa.Table:
    """The table :func:`to_ipc` stored."""
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()
