"""The partial columns of a batch as the aggregates read them: Arrow columns
``p<i>_<j>`` (what native Spark computed with an aggregate's partial SQL, declared
in :mod:`spate.engine.operators.aggregates`) turned into plain Python values."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from spate.engine.runtime import values


@dataclass(frozen=True)
class ArrowPartials:
    """Aggregate ``index``'s partial columns of ``table``
    (:class:`~spate.engine.operators.aggregates.PartialColumns`)."""

    table: pa.Table
    index: int

    def column(self, j: int) -> pa.ChunkedArray:
        return self.table.column(f"p{self.index}_{j}")

    def python(self, j: int, exact: bool = False) -> list[Any]:
        return values.to_python(self.column(j), exact=exact)

    def signed(self, j: int, exact: bool = False) -> list[list[list[Any]]]:
        return signed_values(self.column(j).combine_chunks(), exact)

    def rows(self, j: int) -> list[list[list[Any]]]:
        return struct_rows(self.column(j))


def signed_values(column: pa.Array, exact: bool = False) -> list[list[list[Any]]]:
    """``list<struct<v, s>>`` rows -> per row ``[[value, sign], ...]`` (plain values,
    decimals as text with ``exact``: :func:`spate.engine.runtime.values.to_python`)."""
    offsets = column.offsets.to_pylist()
    base = offsets[0] if offsets else 0
    offsets = [o - base for o in offsets]
    entries = column.flatten()
    signs = entries.field("s").to_pylist()
    items = values.to_python(entries.field("v"), exact)
    return [[[items[j], signs[j]] for j in range(offsets[i], offsets[i + 1])]
            for i in range(len(column))]


def struct_rows(column: pa.ChunkedArray) -> list[list[list[Any]]]:
    """Per row, its list of STRUCT values, each as a list of plain values."""
    lists = column.combine_chunks()
    flat = pc.list_flatten(lists)
    fields = [values.to_python(flat.field(i)) for i in range(flat.type.num_fields)]
    rows = [list(row) for row in zip(*fields, strict=True)]
    result: list[list[list[Any]]] = []
    start = 0
    for length in pc.list_value_length(lists).fill_null(0).to_pylist():
        result.append(rows[start:start + length])
        start += length
    return result
