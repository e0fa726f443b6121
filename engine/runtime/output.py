"""Builds the Arrow table of a window operator's fired windows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spate.engine.operators.aggregates import BAGS, COMOMENTS, MOMENTS
from spate.engine.operators.window import Fired
from spate.engine.planner.plan import EVENT_TIME, WINDOW_COLUMN, WindowAggregate
from spate.engine.runtime import values

TIMESTAMP = pa.timestamp("us", tz="UTC")
WINDOW_TYPE = pa.struct([pa.field("start", TIMESTAMP, nullable=False),
                         pa.field("end", TIMESTAMP, nullable=False)])


def output_schema(spec: WindowAggregate, partial_schema: pa.Schema) -> pa.Schema:
    """Keys as computed, the window struct, one column per aggregate, then the rows'
    event time (the window's end less 1 µs, docs/sql/windows.md)."""
    fields = [pa.field(k, _plain(partial_schema.field(k).type)) for k in spec.key_columns]
    fields.append(pa.field(WINDOW_COLUMN, WINDOW_TYPE))
    for i, call in enumerate(spec.aggregates):
        if call.function in ("count_star", "count", "count_distinct", "regr_count"):
            kind = pa.int64()
        elif call.function == "avg" or call.function in (*MOMENTS, *COMOMENTS, *BAGS[1:]):
            kind = pa.float64()
        elif call.function in ("first_value", "last_value"):  # from struct<t, v>
            kind = _plain(partial_schema.field(f"p{i}_0").type.field("v").type)
        elif call.function == "array_agg":  # from a list of struct<v>; values kept exact
            kind = pa.list_(partial_schema.field(f"p{i}_0").type.value_type.field(0).type)
        elif call.function in ("bit_and", "bit_or"):  # from a list of the values
            kind = _plain(partial_schema.field(f"p{i}_0").type.value_type)
        else:
            kind = _plain(partial_schema.field(f"p{i}_0").type)
        fields.append(pa.field(call.output, kind))
    fields.append(pa.field(EVENT_TIME, TIMESTAMP))
    return pa.schema(fields)


def _plain(kind: pa.DataType) -> pa.DataType:
    """``kind`` with decimals as float64 (how state holds them), also nested."""
    if pa.types.is_decimal(kind):
        return pa.float64()
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        return pa.list_(_plain(kind.value_type))
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(_plain(field.type)) for field in kind])
    return kind


def fired_table(schema: pa.Schema, key_count: int,
                fired: list[tuple[tuple[Any, ...], Fired]]) -> pa.Table:
    """One row per fired (key, window)."""
    columns: list[pa.Array] = []
    for i in range(key_count):
        columns.append(values.from_python([key[i] for key, _ in fired], schema.field(i).type))
    starts = values.from_python([f.start_us for _, f in fired], TIMESTAMP)
    ends = values.from_python([f.end_us for _, f in fired], TIMESTAMP)
    columns.append(pa.StructArray.from_arrays([starts, ends], fields=list(WINDOW_TYPE)))
    for j in range(len(schema) - key_count - 2):
        kind = schema.field(key_count + 1 + j).type
        columns.append(values.from_python([f.values[j] for _, f in fired], kind))
    columns.append(values.from_python([f.end_us - 1 for _, f in fired], TIMESTAMP))
    return pa.Table.from_arrays(columns, schema=schema)
