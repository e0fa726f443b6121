"""Whole-file formats of the ``filesystem`` connector: json lines, parquet, avro, csv.

A file is encoded from, and decoded into, an Arrow table of the table's columns.
json reuses the record decoder every line-based source uses (so ``bad_data``
drops single bad lines); the other formats are read whole with pyarrow or
fastavro, and a file that cannot be read is one bad record.
"""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from pyspark.sql import types as T

from spate.engine.connectors.formats.avro import schema_for
from spate.engine.connectors.formats.decoders import RecordDecoder, split_lines
from spate.engine.connectors.formats.records import FormatSpec

JSON, PARQUET, AVRO, CSV = "json", "parquet", "avro", "csv"
FILE_FORMATS = (JSON, PARQUET, AVRO, CSV)
EXTENSIONS = {JSON: "json", PARQUET: "parquet", AVRO: "avro", CSV: "csv"}


def check_types(kind: str, schema: T.StructType) -> str | None:
    """Why ``schema`` cannot be written as ``kind`` (None: it can)."""
    if kind == CSV:
        for f in schema.fields:
            if isinstance(f.dataType, T.StructType | T.ArrayType | T.MapType):
                return (f"column '{f.name}' is {f.dataType.simpleString().upper()}; csv "
                        "holds scalar columns only (use json, parquet or avro)")
    if kind == AVRO and any(isinstance(f.dataType, T.MapType) for f in schema.fields):
        return "avro files of MAP columns are not supported; use json or parquet"
    return None


def encode(kind: str, table: pa.Table, schema: T.StructType) -> bytes:
    """The bytes of one parquet, csv or avro file holding ``table``'s rows (json files
    are lines Spark encoded: :func:`.formats.record_column`)."""
    if kind == PARQUET:
        sink = io.BytesIO()
        pq.write_table(table, sink)
        return sink.getvalue()
    if kind == CSV:
        sink = io.BytesIO()
        pa_csv.write_csv(table, sink)
        return sink.getvalue()
    if kind == AVRO:
        sink = io.BytesIO()
        fastavro.writer(sink, fastavro.parse_schema(schema_for(schema)), table.to_pylist())
        return sink.getvalue()
    raise ValueError(f"no file encoder for format '{kind}'")


class FileDecoder:
    """Decodes whole files into Arrow columns of ``schema`` (no hidden columns)."""

    def __init__(self, kind: str, schema: pa.Schema, spec: FormatSpec) -> None:
        self.kind = kind
        self.schema = schema
        self.lines = RecordDecoder(schema, spec) if kind == JSON else None

    def decode(self, data: bytes) -> tuple[pa.Table, list[tuple[int, str]]]:
        """The file's rows, and its bad records as ``(index, problem)``."""
        if self.lines is not None:
            buf, starts, lengths = split_lines(data)
            decoded = self.lines.decode(buf, starts, lengths)
            table = pa.Table.from_arrays(decoded.columns, schema=self.schema)
            return table, decoded.bad
        try:
            return self._whole(data), []
        except Exception as error:  # noqa: BLE001 - any reader's error: the file is bad
            first = str(error).strip().splitlines()[0] if str(error).strip() else type(
                error).__name__
            return self.schema.empty_table(), [(0, first)]

    def _whole(self, data: bytes) -> pa.Table:
        if self.kind == PARQUET:
            table = pq.read_table(io.BytesIO(data), columns=self.schema.names)
            return table.select(self.schema.names).cast(self.schema)
        if self.kind == CSV:
            convert = pa_csv.ConvertOptions(column_types=self.schema,
                                            include_columns=self.schema.names)
            table = pa_csv.read_csv(io.BytesIO(data), convert_options=convert)
            return table.select(self.schema.names).cast(self.schema)
        records: list[Any] = list(fastavro.reader(io.BytesIO(data)))
        columns = {name: [r.get(name) for r in records] for name in self.schema.names}
        return pa.Table.from_pydict(columns, schema=self.schema)


def estimate_row_bytes(table: pa.Table) -> float:
    """Bytes per row in memory: a rough size of the row once written."""
    size = float(table.nbytes)
    rows = float(max(1, table.num_rows))
    return size / rows

