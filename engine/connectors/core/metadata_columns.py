"""Metadata columns (``col type METADATA FROM 'key'``) in a source's Arrow batches.

A source decodes its records into the data columns (:attr:`TableConfig.data_columns`)
and computes each metadata column batch-wise from what its system says of the
records; :func:`merge_physical` puts both in the table's column order.
"""

from __future__ import annotations

from collections.abc import Mapping

import pyarrow as pa
from pyspark.sql import types as T

from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.core.base import HIDDEN_COLUMNS

#: Arrow/Spark type of a ``headers`` metadata column: an array of (key, value) pairs, which,
#: unlike a map, keeps repeated keys and their order.
HEADER = T.StructType([T.StructField("key", T.StringType(), True),
                       T.StructField("value", T.BinaryType(), True)])
HEADERS = T.ArrayType(HEADER, True)
#: Its Arrow type, converted once rather than per batch.
_HEADERS_ARROW = arrow_schema(T.StructType([T.StructField("h", HEADERS, True)])).field("h").type


def decoded_schema(stream: pa.Schema, metadata: Mapping[str, str]) -> pa.Schema:
    """``stream`` (a source's Arrow schema) less its metadata columns: what its decoder
    fills."""
    return pa.schema([f for f in stream if f.name not in metadata])


def merge_physical(stream: pa.Schema, decoded: list[pa.Array],
                   metadata: Mapping[str, pa.Array]) -> list[pa.Array]:
    """The columns before the hidden ones, in ``stream``'s order: the metadata columns from
    ``metadata`` (by column name, cast to the declared type), the others from ``decoded``
    in turn."""
    if not metadata:
        return decoded
    physical = list(stream)[: len(stream) - len(HIDDEN_COLUMNS)]
    rest = iter(decoded)
    merged: list[pa.Array] = []
    for arrow_field in physical:
        array = metadata.get(arrow_field.name)
        if array is None:
            merged.append(next(rest))
        else:
            merged.append(array if array.type == arrow_field.type else
                          array.cast(arrow_field.type))
    return merged


def utf8(values: list[bytes | None]) -> pa.Array:
    """Bytes as TEXT, invalid UTF-8 replaced (a metadata column never fails a record)."""
    return pa.array([None if v is None else v.decode("utf-8", "replace") for v in values],
                    pa.string())


def headers_array(rows: list[list[tuple[str, bytes | None]] | None]) -> pa.Array:
    """A ``headers`` column from each row's (key, value) pairs."""
    return pa.array([None if r is None else [{"key": k, "value": v} for k, v in r]
                     for r in rows], _HEADERS_ARROW)
