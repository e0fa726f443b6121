"""Builds the Arrow table of a window operator's fired windows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spate.engine.operators.aggregates import AGGREGATES
from spate.engine.operators.aggregates.base import plain_nested
from spate.engine.operators.window import Fired
from spate.engine.planner.plan import EVENT_TIME, WINDOW_COLUMN, WindowAggregate
from spate.engine.runtime import values

TIMESTAMP = pa.timestamp("us", tz="UTC")
WINDOW_TYPE = pa.struct([pa.field("start", TIMESTAMP, nullable=False),
                         pa.field("end", TIMESTAMP, nullable=False)])


def output_schema(spec: WindowAggregate, partial_schema: pa.Schema) -> pa.Schema:
    """Keys as computed, the window struct, one column per aggregate, then the rows'
    event time (the window's end less 1 µs, docs/sql/windows.md)."""
    fields = [pa.field(k, plain_nested(partial_schema.field(k).type))
              for k in spec.key_columns]
    fields.append(pa.field(WINDOW_COLUMN, WINDOW_TYPE))
    fields += [pa.field(call.output, AGGREGATES[call.function].window_type(
                   partial_schema.field(f"p{i}_0").type))
               for i, call in enumerate(spec.aggregates)]
    fields.append(pa.field(EVENT_TIME, TIMESTAMP))
    return pa.schema(fields)


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
