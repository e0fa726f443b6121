"""Parquet files of a ``filesystem`` source read by Spark's own parquet reader.

Spark's reader (vectorized, in the JVM) reads a parquet file with no Python in
the way, where the Python source would decode it with pyarrow and hand Arrow
batches back to the JVM. It is used for a file that Spark reads exactly as the
Python source would: a file in a local folder whose every column is there with
the table's own type (timestamps in micro- or milliseconds adjusted to UTC, or
Spark's INT96), scalar columns only, no NULL in a NOT NULL column (by the
footer's statistics), and a plain name. Any other file (a wider or narrower
type, a missing column, a footer that cannot be read, nested columns) is
decoded by the Python source as before, with its conversions and its
``bad_data`` rules, so what a file reads as does not depend on the reader.

The offsets stay the Python source's: it lists the files and advances its
offset, and of the files between a batch's offsets it decodes the ones Spark
does not read (:func:`split_files`). The epoch asks the connector for the rest
(:meth:`~.connector.FilesystemConnector.spark_rows`), found again from the
same offsets by the same rule, so a replayed batch reads the same files the
same way. A table with a ``file_path`` metadata column is decoded in Python.
"""

from __future__ import annotations

import os
import re

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors.core.base import HIDDEN_CONTROL, HIDDEN_PARTITION, HIDDEN_TIMESTAMP

#: Names Spark's path handling takes as they are (no glob, no escape, no scheme).
_PLAIN_NAME = re.compile(r"[A-Za-z0-9_.=/-]+")
_SCALAR = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean, pa.types.is_date32,
           pa.types.is_decimal, pa.types.is_string, pa.types.is_binary)


def spark_reads(path: str, name: str, schema: pa.Schema, required: frozenset[str]) -> bool:
    """Whether Spark's reader reads the parquet file at ``path`` (``name`` relative to
    the root) as the Python source would decode it into ``schema``."""
    if not _PLAIN_NAME.fullmatch(name) or name.startswith("/") or "//" in name:
        return False
    try:
        metadata = pq.read_metadata(path)
        stored = metadata.schema.to_arrow_schema()
    except Exception:  # noqa: BLE001 - any reader's error: Python decides what it is
        return False
    leaves = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
    for field in schema:
        index, leaf = stored.get_field_index(field.name), leaves.get(field.name)
        if index < 0 or leaf is None:
            return False
        physical = metadata.schema.column(leaf).physical_type
        if not _same_type(stored.field(index).type, field.type, physical):
            return False
        if field.name in required and not _no_nulls(metadata, leaf):
            return False
    return True


def _same_type(stored: pa.DataType, wanted: pa.DataType, physical: str) -> bool:
    if pa.types.is_timestamp(wanted):
        if not pa.types.is_timestamp(stored):
            return False
        if physical == "INT96":
            return True
        return stored.tz is not None and stored.unit in ("ms", "us")
    if not any(kind(wanted) for kind in _SCALAR):
        return False
    if pa.types.is_string(wanted):
        return bool(pa.types.is_string(stored) or pa.types.is_large_string(stored))
    if pa.types.is_binary(wanted):
        return bool(pa.types.is_binary(stored) or pa.types.is_large_binary(stored))
    return bool(stored == wanted)


def _no_nulls(metadata: pq.FileMetaData, leaf: int) -> bool:
    """Whether the footer's statistics show no NULL in leaf column ``leaf`` (no
    statistics: not known, so not)."""
    for group in range(metadata.num_row_groups):
        statistics = metadata.row_group(group).column(leaf).statistics
        if statistics is None or not statistics.has_null_count or statistics.null_count:
            return False
    return True


def split_files(root: str, names: list[str], schema: pa.Schema, required: frozenset[str]
                ) -> tuple[list[str], list[str]]:
    """``names`` as (the ones Spark reads, the ones Python decodes), each in order."""
    spark: list[str] = []
    python: list[str] = []
    for name in names:
        (spark if spark_reads(os.path.join(root, name), name, schema, required)
         else python).append(name)
    return spark, python


def spark_frame(spark: SparkSession, root: str, files: list[list[str]],
                columns: T.StructType) -> DataFrame | None:
    """The rows of ``files`` (per reader, its files) as the source's stream has them:
    ``columns`` then the hidden columns (the reader's index, the time they were read,
    no control). None when there is no file."""
    frames = []
    decoded = T.StructType([T.StructField(f.name, f.dataType, True) for f in columns.fields])
    for reader, names in enumerate(files):
        if not names:
            continue
        read = spark.read.schema(decoded).parquet(*(os.path.join(root, n) for n in names))
        hidden: list[Column] = [F.lit(reader).cast("int").alias(HIDDEN_PARTITION),
                                F.current_timestamp().alias(HIDDEN_TIMESTAMP),
                                F.lit(None).cast("string").alias(HIDDEN_CONTROL)]
        frames.append(read.select(*(F.col(f"`{f.name}`") for f in decoded.fields), *hidden))
    if not frames:
        return None
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union
