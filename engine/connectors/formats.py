"""Record formats (docs/sql/connectors.md): option parsing, column rules and sink encoding.

Sources decode with :mod:`spate.engine.connectors.decoders` (Arrow, on executors);
sinks encode here with native Spark expressions (``to_json``), so no Python
runs per row on either side.  ``debezium_json`` records are change envelopes
(``{"before": row, "after": row, "op": ...}``): its sources produce updating
rows and its sinks turn updating rows into changes (:mod:`.changes`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors.arrow_batches import join_lines
from spate.engine.connectors.base import (
    HIDDEN_CONTROL,
    RETRACT,
    ROW_KEY,
    SINK,
    SOURCE,
    ColumnDef,
    ConnectorError,
    stream_schema,
)
from spate.engine.connectors.changes import change_records, change_rows
from spate.engine.connectors.options import OptionReader

JSON = "json"
DEBEZIUM_JSON = "debezium_json"
RAW_STRING = "raw_string"
FORMATS = (JSON, DEBEZIUM_JSON, RAW_STRING)
RFC3339 = "rfc3339"
UNIX_MILLIS = "unix_millis"
DECIMAL_NUMBER = "number"
DECIMAL_STRING = "string"
#: Debezium's decimal encoding: base64 of the unscaled value's big-endian two's complement.
DECIMAL_BYTES = "bytes"
#: rfc3339 as written by sinks: microseconds kept, UTC as ``Z``.
RFC3339_SPARK_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"

_JSON_OPTIONS = ("json.unstructured", "json.timestamp_format", "json.decimal_encoding")
_FORMAT_OPTIONS = ("format", *_JSON_OPTIONS, "framing", "framing.newline.max_length",
                   "bad_data")
#: Spark's ``to_json`` options of every json record: NULL fields kept, µs timestamps.
_TO_JSON_OPTIONS = {"ignoreNullFields": "false", "timestampFormat": RFC3339_SPARK_PATTERN}
#: 2**64, to split a DECIMAL(38, 0) into two 64-bit halves.
_TWO_TO_64 = "18446744073709551616"

_SCALAR_TYPES = (T.BooleanType, T.ByteType, T.ShortType, T.IntegerType, T.LongType,
                 T.FloatType, T.DoubleType, T.DecimalType, T.StringType, T.BinaryType,
                 T.DateType, T.TimestampType)


@dataclass(frozen=True)
class FormatSpec:
    """How records are encoded; a plain, JSON-serialisable value shipped to executors."""

    kind: str
    timestamp_format: str = RFC3339
    decimal_encoding: str = DECIMAL_NUMBER
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

    @property
    def updating(self) -> bool:
        """Whether records are change envelopes (debezium_json): rows carry RETRACT."""
        return self.kind == DEBEZIUM_JSON


def parse_format(options: OptionReader, role: str) -> FormatSpec:
    """Read ``format`` and its dependent options for a connector that needs a format."""
    kind = options.string("format")
    if kind is None:
        raise ConnectorError(
            f"connector '{options.table.connector}' needs option 'format' "
            "('json', 'debezium_json' or 'raw_string')", option="format")
    kind = kind.strip().lower()
    if kind not in FORMATS:
        raise ConnectorError(f"unknown format '{kind}'; Spate supports 'json', 'debezium_json' "
                             "and 'raw_string'", option="format")
    if kind == RAW_STRING:
        for key in _JSON_OPTIONS:
            options.reject(key, f"applies to formats 'json' and 'debezium_json' only, not "
                                f"'{kind}'")
    changes = kind == DEBEZIUM_JSON
    if changes:
        options.reject("json.unstructured", "applies to format 'json' only: a debezium_json "
                                            "record is a change envelope of declared columns")
        if role == SOURCE:
            _check_change_source(options)
    return FormatSpec(
        kind=kind,
        timestamp_format=options.choice("json.timestamp_format", (RFC3339, UNIX_MILLIS))
        or (UNIX_MILLIS if changes else RFC3339),
        decimal_encoding=options.choice(
            "json.decimal_encoding", (DECIMAL_NUMBER, DECIMAL_STRING, DECIMAL_BYTES))
        or (DECIMAL_BYTES if changes else DECIMAL_NUMBER),
        unstructured=options.boolean("json.unstructured", False),
        bad_data=_bad_data(options, role),
        max_line_bytes=_framing(options, role),
    )


def _check_change_source(options: OptionReader) -> None:
    """A debezium_json source needs a PRIMARY KEY, no event_time_field (docs/sql/updating.md)."""
    options.reject("event_time_field", "cannot be used with format 'debezium_json': its "
                                       "rows are changes keyed by the PRIMARY KEY; remove it")
    if not options.table.primary_key:
        raise ConnectorError(
            "a debezium_json source needs a PRIMARY KEY to know which row a change updates: "
            "declare it on the key column(s), e.g. `id BIGINT PRIMARY KEY`", option="format")


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
    """Connectors with a fixed schema or no output take no format (docs/sql/connectors.md)."""
    for key in _FORMAT_OPTIONS:
        options.reject(key, f"is not accepted by connector '{options.table.connector}', "
                            "which has no record format; remove it")


def check_columns(spec: FormatSpec, columns: tuple[ColumnDef, ...], role: str) -> None:
    """Column rules of a format (raw_string / json.unstructured: one ``value TEXT``)."""
    if spec.single_value:
        _check_single_value(spec, [(c.name, c.spark_type) for c in columns], role)
        return
    if role == SOURCE and not columns:
        raise ConnectorError(f"a {spec.kind} source needs its columns declared, e.g. "
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


# -- source schema -----------------------------------------------------------------


def source_schema(spec: FormatSpec, columns: tuple[ColumnDef, ...]) -> T.StructType:
    """The schema a reader of ``spec`` records yields: the physical columns, then
    :data:`RETRACT` for change records (debezium_json), then the hidden columns."""
    schema = stream_schema(columns)
    if not spec.updating:
        return schema
    fields = list(schema.fields)
    fields.insert(len(columns), T.StructField(RETRACT, T.BooleanType(), True))
    return T.StructType(fields)


def with_row_key(frame: DataFrame, primary_key: tuple[str, ...]) -> DataFrame:
    """Add :data:`ROW_KEY` (the primary key as JSON) after :data:`RETRACT`, if present.

    Computed natively over the decoded rows; NULL on control rows.
    """
    if RETRACT not in frame.columns:
        return frame
    key = F.to_json(F.struct(*(F.col(f"`{name}`") for name in primary_key)))
    columns: list[Column] = []
    for name in frame.columns:
        columns.append(F.col(f"`{name}`"))
        if name == RETRACT:
            columns.append(F.when(F.col(HIDDEN_CONTROL).isNull(), key).alias(ROW_KEY))
    return frame.select(*columns)


# -- sink encoding -----------------------------------------------------------------


def encode_records(df: DataFrame, spec: FormatSpec, key: str | None = None) -> DataFrame:
    """One string column ``record`` per row, encoded natively by Spark.

    debezium_json writes one change envelope per changed key (:func:`change_records`).
    ``key``: a column also selected, as TEXT, as a second column ``key`` (the record key
    of a message sink; not with debezium_json).
    """
    keys = [] if key is None else [F.col(f"`{key}`").cast("string").alias("key")]
    if spec.single_value:
        return df.select(record_column(df, spec).alias("record"), *keys)
    if spec.updating:
        changes = change_records(df)
        row_type = changes.schema["after"].dataType
        envelope = F.struct(_prepare(F.col("before"), row_type, spec).alias("before"),
                            _prepare(F.col("after"), row_type, spec).alias("after"),
                            F.col("op"))
        return changes.select(F.to_json(envelope, _TO_JSON_OPTIONS).alias("record"))
    # Updating rows reach a json encoder only in previews (the planner sends them to
    # debezium_json sinks): one row per change, with its op.
    df = change_rows(df)
    return df.select(record_column(df, spec).alias("record"), *keys)


def record_column(df: DataFrame, spec: FormatSpec) -> Column:
    """The encoded record of each append-only row of ``df`` (json or raw_string), a native
    expression a sink can select next to other columns (a key, a field)."""
    if spec.single_value:
        return F.col("value").cast("string")
    fields = [_prepare(F.col(f"`{f.name}`"), f.dataType, spec).alias(f.name)
              for f in df.schema.fields]
    return F.to_json(F.struct(*fields), _TO_JSON_OPTIONS)


def _prepare(column: Column, data_type: T.DataType, spec: FormatSpec) -> Column:
    """Rewrite values whose JSON encoding differs from Spark's default."""
    if not _needs_rewrite(data_type, spec):
        return column
    if isinstance(data_type, T.TimestampType):
        return F.unix_millis(column)
    if isinstance(data_type, T.DateType):
        return F.unix_date(column).cast("long") * 86_400_000
    if isinstance(data_type, T.DecimalType):
        if spec.decimal_encoding == DECIMAL_BYTES:
            return decimal_bytes(column, data_type)
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
        return spec.decimal_encoding != DECIMAL_NUMBER
    if isinstance(data_type, T.ArrayType):
        return _needs_rewrite(data_type.elementType, spec)
    if isinstance(data_type, T.StructType):
        return any(_needs_rewrite(f.dataType, spec) for f in data_type.fields)
    return False


def decimal_bytes(column: Column, data_type: T.DecimalType) -> Column:
    """A DECIMAL as Debezium encodes it: the unscaled value's shortest big-endian two's
    complement, as BINARY (which ``to_json`` writes as base64).

    Natively: the digits without the point (``to_char`` with every digit, as a
    cast to string may use an exponent) are the unscaled value (at most 38
    digits), split into a signed high and an unsigned low 64-bit half, printed
    as 32 hex digits; leading sign-extension bytes are then stripped as Java's
    ``BigInteger.toByteArray`` does.
    """
    scale = data_type.scale
    pattern = "S" + "0" * (data_type.precision - scale) + ("." + "0" * scale if scale else "")
    digits_text = F.regexp_replace(F.to_char(column, F.lit(pattern)), r"\.", "")
    unscaled = digits_text.cast(T.DecimalType(38, 0))
    two_to_64 = F.lit(_TWO_TO_64).cast(T.DecimalType(20, 0))
    # Remainder and quotient toward zero stay within 38 digits (the quotient is
    # exact although decimal division keeps only 6 places); then floor them.
    remainder = unscaled % two_to_64
    negative = remainder < 0
    quotient = ((unscaled - remainder) / two_to_64).cast("long")
    high = F.when(negative, quotient - 1).otherwise(quotient)
    low = F.when(negative, remainder + two_to_64).otherwise(remainder)
    digits = F.concat(F.lpad(F.hex(high), 16, "0"),
                      F.lpad(F.conv(low.cast("string"), 10, 16), 16, "0"))
    shortest = F.regexp_replace(digits, "^(?:00)+(?=[0-7])|^(?:FF)+(?=[89A-F])", "")
    return F.unhex(shortest)


def encoded_lines(df: DataFrame, spec: FormatSpec) -> bytes:
    """An epoch's records as newline-terminated UTF-8 (NULL raw values: empty lines)."""
    table = encode_records(df, spec).toArrow()
    return join_lines(table.column(0))
