"""Record formats (SQL.md 1.2): option parsing, column rules and sink encoding.

Sources decode with :mod:`engine.connectors.decoders` (Arrow, on executors);
sinks encode here with native Spark expressions (``to_json``), so no Python
runs per row on either side.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from engine.connectors.arrow_batches import join_lines
from engine.connectors.base import SINK, SOURCE, ColumnDef, ConnectorError
from engine.connectors.options import OptionReader

JSON = "json"
RAW_STRING = "raw_string"
RFC3339 = "rfc3339"
UNIX_MILLIS = "unix_millis"
#: rfc3339 as written by sinks: microseconds kept, UTC as ``Z``.
RFC3339_SPARK_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"

_JSON_OPTIONS = ("json.unstructured", "json.timestamp_format", "json.decimal_encoding")
_FORMAT_OPTIONS = ("format", *_JSON_OPTIONS, "framing", "framing.newline.max_length",
                   "bad_data")

_SCALAR_TYPES = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType,
                 T.FloatType, T.DoubleType, T.DecimalType, T.StringType, T.BinaryType,
                 T.DateType, T.TimestampType)


@dataclass(frozen=True)
class FormatSpec:
    """How records are encoded; a plain, JSON-serialisable value shipped to executors."""

    kind: str
    timestamp_format: str = RFC3339
    decimal_encoding: str = "number"
    unstructured: bool = False
    bad_data: str = "fail"
    #: framing.newline.max_length: lines longer than this many bytes are truncated
    max_line_bytes: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def single_value(self) -> bool:
        """Whether a record is one ``value`` column (raw_string, json.unstructured)."""
        return self.kind == RAW_STRING or self.unstructured


def parse_format(options: OptionReader, role: str) -> FormatSpec:
    """Read ``format`` and its dependent options for a connector that needs a format."""
    kind = options.string("format")
    if kind is None:
        raise ConnectorError(
            f"connector '{options.table.connector}' needs option 'format' "
            "('json' or 'raw_string')", option="format")
    kind = kind.strip().lower()
    if kind == "debezium_json":
        raise ConnectorError("format 'debezium_json' is not supported yet; use 'json' "
                             "(append-only output) instead", option="format")
    if kind not in (JSON, RAW_STRING):
        raise ConnectorError(f"unknown format '{kind}'; Spate supports 'json' and 'raw_string'",
                             option="format")
    if kind != JSON:
        for key in _JSON_OPTIONS:
            options.reject(key, f"applies to format 'json' only, not '{kind}'")
    spec = FormatSpec(
        kind=kind,
        timestamp_format=options.choice("json.timestamp_format", (RFC3339, UNIX_MILLIS),
                                        RFC3339) or RFC3339,
        decimal_encoding=_decimal_encoding(options),
        unstructured=options.boolean("json.unstructured", False),
        bad_data=_bad_data(options, role),
        max_line_bytes=_framing(options, role),
    )
    return spec


def _decimal_encoding(options: OptionReader) -> str:
    encoding = options.choice("json.decimal_encoding", ("number", "string", "bytes"), "number")
    if encoding == "bytes":
        raise ConnectorError("json.decimal_encoding 'bytes' is not supported yet; use "
                             "'number' or 'string'", option="json.decimal_encoding")
    return encoding or "number"


def _bad_data(options: OptionReader, role: str) -> str:
    if role != SOURCE:
        return "fail"
    return options.choice("bad_data", ("fail", "drop"), "fail") or "fail"


def _framing(options: OptionReader, role: str) -> int | None:
    options.choice("framing", ("newline",), "newline")
    if role != SOURCE:
        return None
    return options.integer("framing.newline.max_length", None, minimum=1)


def reject_format_options(options: OptionReader) -> None:
    """Connectors with a fixed schema or no output take no format (Spate rule, SQL.md 1.2)."""
    for key in _FORMAT_OPTIONS:
        options.reject(key, f"is not accepted by connector '{options.table.connector}', "
                            "which has no record format; remove it")


def check_columns(spec: FormatSpec, columns: tuple[ColumnDef, ...], role: str) -> None:
    """Column rules of a format (raw_string / json.unstructured: one ``value TEXT``)."""
    if spec.single_value:
        _check_single_value(spec, [(c.name, c.spark_type) for c in columns], role)
        return
    if role == SOURCE and not columns:
        raise ConnectorError("a json source needs its columns declared, e.g. "
                             "CREATE TABLE t (id BIGINT, name TEXT) WITH (...)")
    if role == SOURCE:
        for column in columns:
            problem = unsupported_type(column.spark_type)
            if problem is not None:
                raise ConnectorError(
                    f"column '{column.name}': type {problem} cannot be read from JSON yet",
                    option="format")


def check_sink_schema(spec: FormatSpec, schema: T.StructType) -> None:
    """The rows a sink will receive must fit its format."""
    if spec.single_value:
        _check_single_value(spec, [(f.name, f.dataType) for f in schema.fields], SINK)


def _check_single_value(spec: FormatSpec, columns: list[tuple[str, T.DataType]],
                        role: str) -> None:
    what = "format 'raw_string'" if spec.kind == RAW_STRING else "json.unstructured"
    option = "format" if spec.kind == RAW_STRING else "json.unstructured"
    if role == SINK and not columns:
        return
    if (len(columns) != 1 or columns[0][0] != "value"
            or not isinstance(columns[0][1], T.StringType)):
        found = ", ".join(f"{n} {t.simpleString()}" for n, t in columns) or "none"
        raise ConnectorError(f"{what} needs exactly one column `value TEXT`; found: {found}",
                             option=option)


def unsupported_type(data_type: T.DataType) -> str | None:
    """The name of a type JSON decoding does not support, or None if all of it is."""
    if isinstance(data_type, T.ArrayType):
        return unsupported_type(data_type.elementType)
    if isinstance(data_type, T.StructType):
        for field in data_type.fields:
            problem = unsupported_type(field.dataType)
            if problem is not None:
                return problem
        return None
    if isinstance(data_type, _SCALAR_TYPES):
        return None
    return data_type.simpleString()


def single_value_columns() -> tuple[ColumnDef, ...]:
    """The default columns of a raw_string / unstructured table."""
    return (ColumnDef("value", T.StringType(), True),)


# -- sink encoding -----------------------------------------------------------------


def encode_records(df: DataFrame, spec: FormatSpec) -> DataFrame:
    """One string column ``record`` per row, encoded natively by Spark."""
    if spec.single_value:
        return df.select(F.col("value").cast("string").alias("record"))
    options = {"ignoreNullFields": "false", "timestampFormat": RFC3339_SPARK_PATTERN}
    fields = [_prepare(F.col(f"`{f.name}`"), f.dataType, spec).alias(f.name)
              for f in df.schema.fields]
    return df.select(F.to_json(F.struct(*fields), options).alias("record"))


def _prepare(column: Column, data_type: T.DataType, spec: FormatSpec) -> Column:
    """Rewrite values whose JSON encoding differs from Spark's default."""
    if not _needs_rewrite(data_type, spec):
        return column
    if isinstance(data_type, T.TimestampType):
        return F.unix_millis(column)
    if isinstance(data_type, T.DateType):
        return F.unix_date(column).cast("long") * 86_400_000
    if isinstance(data_type, T.DecimalType):
        return column.cast("string")
    if isinstance(data_type, T.ArrayType):
        element = data_type.elementType
        return F.transform(column, lambda item: _prepare(item, element, spec))
    if isinstance(data_type, T.StructType):
        inner = [_prepare(column.getField(f.name), f.dataType, spec).alias(f.name)
                 for f in data_type.fields]
        return F.when(column.isNull(), F.lit(None)).otherwise(F.struct(*inner))
    return column


def _needs_rewrite(data_type: T.DataType, spec: FormatSpec) -> bool:
    if isinstance(data_type, T.TimestampType | T.DateType):
        return spec.timestamp_format == UNIX_MILLIS
    if isinstance(data_type, T.DecimalType):
        return spec.decimal_encoding == "string"
    if isinstance(data_type, T.ArrayType):
        return _needs_rewrite(data_type.elementType, spec)
    if isinstance(data_type, T.StructType):
        return any(_needs_rewrite(f.dataType, spec) for f in data_type.fields)
    return False


def encoded_lines(df: DataFrame, spec: FormatSpec) -> bytes:
    """An epoch's records as newline-terminated UTF-8 (NULL raw values: empty lines)."""
    table = encode_records(df, spec).toArrow()
    return join_lines(table.column(0))
