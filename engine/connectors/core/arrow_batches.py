"""Arrow helpers shared by the sources' readers and the file sinks.

A source's ``read`` yields ``pyarrow.RecordBatch`` es whose schema must equal
exactly what Spark derives from the DataFrame schema (including nullability),
so every batch is assembled here against :func:`arrow_schema`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from spate.engine.connectors.core.base import HIDDEN_COLUMNS

#: Arrow type of SQL TIMESTAMP as Spark exchanges it (session time zone UTC).
TIMESTAMP_US = pa.timestamp("us", tz="UTC")


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """The Arrow schema Spark expects for batches of ``schema``."""
    return to_arrow_schema(schema, timezone="UTC")


def _hidden_arrays(length: int, partition: int, timestamps: pa.Array | None,
                   control: str | None) -> list[pa.Array]:
    partitions = pa.array(np.full(length, partition, dtype=np.int32), pa.int32())
    if timestamps is None:
        timestamps = pa.nulls(length, TIMESTAMP_US)
    elif timestamps.type != TIMESTAMP_US:
        timestamps = timestamps.cast(TIMESTAMP_US)
    controls = pa.nulls(length, pa.string()) if control is None else pa.array(
        [control] * length, pa.string())
    return [partitions, timestamps, controls]


def data_batch(schema: pa.Schema, physical: list[pa.Array], partition: int,
               timestamps: pa.Array) -> pa.RecordBatch:
    """A batch of data rows: ``physical`` columns then the hidden columns."""
    length = len(timestamps)
    hidden = _hidden_arrays(length, partition, timestamps, None)
    return pa.RecordBatch.from_arrays(physical + hidden, schema=schema)


def control_batch(schema: pa.Schema, partition: int, control: str) -> pa.RecordBatch:
    """A one-row control batch: NULL physical columns and timestamp, ``control`` set."""
    physical_fields = [f for f in schema if f.name not in HIDDEN_COLUMNS]
    physical = [pa.nulls(1, f.type) for f in physical_fields]
    hidden = _hidden_arrays(1, partition, None, control)
    return pa.RecordBatch.from_arrays(physical + hidden, schema=schema)


def timestamps_us(micros: np.ndarray) -> pa.Array:
    """A TIMESTAMP array from int64 microseconds since the epoch."""
    return pa.array(micros.astype(np.int64, copy=False), pa.int64()).cast(TIMESTAMP_US)


def gather(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
           terminate: bool) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate the given slices of ``buf`` (each followed by ``\\n`` if ``terminate``).

    Returns the bytes and the ``len + 1`` offsets of the slices in them.
    """
    sizes = lengths + 1 if terminate else lengths
    offsets = np.zeros(len(sizes) + 1, dtype=np.int64)
    np.cumsum(sizes, out=offsets[1:])
    total = int(offsets[-1])
    if total == 0:
        return np.zeros(0, dtype=np.uint8), offsets
    if terminate and _newline_separated(buf, starts, lengths):
        return _terminated_slice(buf, int(starts[0]), total), offsets
    source = np.arange(total, dtype=np.int64) - np.repeat(offsets[:-1] - starts, sizes)
    out = buf[np.minimum(source, len(buf) - 1)]
    if terminate:
        out[offsets[1:] - 1] = 10
    return out, offsets


def _newline_separated(buf: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> bool:
    """Whether the slices are consecutive lines of ``buf``, one ``\\n`` apart."""
    ends = starts + lengths
    return bool(np.array_equal(starts[1:], ends[:-1] + 1)
                and (len(ends) < 2 or (buf[ends[:-1]] == 10).all()))


def _terminated_slice(buf: np.ndarray, start: int, total: int) -> np.ndarray:
    end = start + total  # one past the last line's terminator
    if end <= len(buf) and buf[end - 1] == 10:
        return buf[start:end]
    return np.concatenate((buf[start:end - 1], np.array([10], dtype=np.uint8)))


def join_lines(records: pa.ChunkedArray | pa.Array) -> bytes:
    """Strings as newline-terminated UTF-8 bytes; NULL becomes an empty line."""
    if isinstance(records, pa.ChunkedArray):
        records = records.combine_chunks() if records.num_chunks else pa.array([], pa.string())
    if len(records) == 0:
        return b""
    records = pc.fill_null(records.cast(pa.large_string()), "")
    empty, newline = pa.scalar("", pa.large_string()), pa.scalar("\n", pa.large_string())
    terminated = pc.binary_join_element_wise(records, empty, newline)
    offsets = np.frombuffer(terminated.buffers()[1], dtype=np.int64)
    offsets = offsets[terminated.offset:terminated.offset + len(terminated) + 1]
    first, last = int(offsets[0]), int(offsets[-1])
    return bytes(terminated.buffers()[2].slice(first, last - first).to_pybytes())


def string_array(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """A UTF-8 string array over ``data`` bytes split at ``offsets`` (``len + 1`` of them)."""
    return pa.StringArray.from_buffers(
        len(offsets) - 1, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data))
