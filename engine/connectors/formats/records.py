"""Record formats (docs/sql/connectors.md): option parsing, column rules and sink encoding.

Sources decode with :mod:`spate.engine.connectors.formats.decoders` (Arrow, on executors);
sinks encode here with native Spark expressions (``to_json``), so no Python
runs per row on either side.  ``debezium_json`` records are change envelopes
(``{"before": row, "after": row, "op": ...}``): its sources produce updating
rows and its sinks turn updating rows into changes (:mod:`spate.engine.connectors.core.changes`).
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import cache
from typing import Any
from urllib.parse import urlsplit

from cachetools import LRUCache, cached
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors.core.arrow_batches import join_lines
from spate.engine.connectors.core.base import (
    LOOKUP,
    RETRACT,
    SINK,
    SOURCE,
    ColumnDef,
    ConnectorError,
    TableConfig,
    stream_schema,
)
from spate.engine.connectors.core.changes import change_records, change_rows
from spate.engine.connectors.core.metadata import (
    AVRO_REGISTRY,
    AVRO_SCHEMA,
    AVRO_SCHEMA_ID,
    AVRO_WIRE_FORMAT,
    BAD_DATA,
    DEAD_LETTER_TABLE,
    EVENT_TIME_FIELD,
    FORMAT_OPTION,
    FRAMING,
    FRAMING_MAX_LENGTH,
    JSON_DECIMAL_ENCODING,
    JSON_TIMESTAMP_FORMAT,
    JSON_UNSTRUCTURED,
    PROTOBUF_DESCRIPTOR,
    PROTOBUF_DESCRIPTOR_FILE,
    PROTOBUF_MESSAGE_NAME,
    PROTOBUF_SCHEMA_ID,
    PROTOBUF_WIRE_FORMAT,
    REGISTRY_API_KEY,
    REGISTRY_API_SECRET,
    REGISTRY_ENDPOINT,
    VALUE_SUBJECT,
    OptionSpec,
)
from spate.engine.connectors.core.options import OptionReader
from spate.engine.connectors.formats import avro as avro_format
from spate.engine.connectors.formats import protobuf as protobuf_format
from spate.engine.connectors.formats import protobuf_writer

JSON = "json"
DEBEZIUM_JSON = "debezium_json"
RAW_STRING = "raw_string"
RAW_BYTES = "raw_bytes"
AVRO = "avro"
PROTOBUF = "protobuf"
FORMATS = (JSON, DEBEZIUM_JSON, RAW_STRING, RAW_BYTES, AVRO, PROTOBUF)
#: Formats whose records are taken byte for byte: no line handling, may hold any byte.
OPAQUE_FORMATS = (RAW_STRING, RAW_BYTES, AVRO, PROTOBUF)
#: Formats whose sinks write binary records (the ``record`` column is BINARY).
BINARY_FORMATS = (RAW_BYTES, AVRO, PROTOBUF)
DEAD_LETTER = "dead_letter"
RFC3339 = "rfc3339"
UNIX_MILLIS = "unix_millis"
DECIMAL_NUMBER = "number"
DECIMAL_STRING = "string"
#: Debezium's decimal encoding: base64 of the unscaled value's big-endian two's complement.
DECIMAL_BYTES = "bytes"
#: rfc3339 as written by sinks: microseconds kept, UTC as ``Z``.
RFC3339_SPARK_PATTERN = "yyyy-MM-dd'T'HH:mm:ss.SSSSSSXXX"

_JSON_OPTIONS = (JSON_UNSTRUCTURED, JSON_TIMESTAMP_FORMAT, JSON_DECIMAL_ENCODING)
_AVRO_OPTIONS = (AVRO_SCHEMA, AVRO_REGISTRY, AVRO_WIRE_FORMAT, AVRO_SCHEMA_ID, REGISTRY_ENDPOINT,
                 REGISTRY_API_KEY, REGISTRY_API_SECRET, VALUE_SUBJECT)
_PROTOBUF_OPTIONS = (PROTOBUF_DESCRIPTOR_FILE, PROTOBUF_DESCRIPTOR, PROTOBUF_MESSAGE_NAME,
                     PROTOBUF_WIRE_FORMAT, PROTOBUF_SCHEMA_ID)
_FORMAT_OPTIONS = (FORMAT_OPTION, *_JSON_OPTIONS, *_AVRO_OPTIONS, *_PROTOBUF_OPTIONS, FRAMING,
                   FRAMING_MAX_LENGTH, BAD_DATA, DEAD_LETTER_TABLE)
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
    #: avro: the writer schema's JSON (inline ``avro.schema``), if given
    avro_schema: str | None = None
    #: avro: records carry the Confluent header (magic byte 0, 4-byte schema id)
    confluent_wire: bool = False
    #: avro and protobuf sinks: the schema id written in the Confluent header (avro: when
    #: there is no registry)
    schema_id: int | None = None
    #: avro: the schema registry (endpoint, api_key, api_secret), if used
    registry: dict[str, str] | None = field(default=None, repr=False)
    #: avro sinks with a registry: the subject the writer schema is registered under
    subject: str | None = None
    #: protobuf: the FileDescriptorSet (base64) and the message's full name
    descriptor: str | None = None
    message_name: str | None = None
    #: bad_data = 'dead_letter': the sink table undecodable records are written to
    dead_letter: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def single_value(self) -> bool:
        """Whether a record is one ``value`` column (raw_string, raw_bytes,
        json.unstructured)."""
        return self.kind in (RAW_STRING, RAW_BYTES) or self.unstructured

    @property
    def skips_bad(self) -> bool:
        """Whether undecodable records are left out of the rows (drop, dead_letter)."""
        return self.bad_data in ("drop", DEAD_LETTER)

    @property
    def opaque(self) -> bool:
        """Whether records are decoded byte for byte (raw_string, raw_bytes, avro): line
        breaks and blank records are data, not framing."""
        return self.kind in OPAQUE_FORMATS

    @property
    def binary(self) -> bool:
        """Whether sinks write binary records (raw_bytes, avro, protobuf)."""
        return self.kind in BINARY_FORMATS

    @property
    def updating(self) -> bool:
        """Whether records are change envelopes (debezium_json): rows carry RETRACT."""
        return self.kind == DEBEZIUM_JSON


def parse_format(options: OptionReader, role: str,
                 records_in: tuple[OptionSpec, ...] = ()) -> FormatSpec:
    """Read ``format`` and its dependent options for a connector that needs a format.
    ``records_in``: the options naming where the table's records are (a topic, a
    stream); the first one set names a schema registry's default subject."""
    kind = options.string(FORMAT_OPTION)
    if kind is None:
        raise ConnectorError(
            f"connector '{options.table.connector}' needs option '{FORMAT_OPTION.name}' "
            "('json', 'debezium_json', 'avro', 'raw_string' or 'raw_bytes')",
            option=FORMAT_OPTION.name)
    kind = kind.strip().lower()
    if kind not in FORMATS:
        raise ConnectorError(f"unknown format '{kind}'; Spate supports 'json', 'debezium_json', "
                             "'avro', 'raw_string' and 'raw_bytes'", option=FORMAT_OPTION.name)
    if role == LOOKUP and kind in BINARY_FORMATS:
        raise ConnectorError(f"format '{kind}' is not supported by lookup tables yet; use "
                             "'json' or 'raw_string'", option=FORMAT_OPTION.name)
    if kind != AVRO:
        for key in _AVRO_OPTIONS:
            options.reject(key, f"applies to format 'avro' only, not '{kind}'")
    if kind != PROTOBUF:
        for key in _PROTOBUF_OPTIONS:
            options.reject(key, f"applies to format 'protobuf' only, not '{kind}'")
    if kind in OPAQUE_FORMATS:
        for key in _JSON_OPTIONS:
            options.reject(key, f"applies to formats 'json' and 'debezium_json' only, not "
                                f"'{kind}'")
    if kind in (AVRO, PROTOBUF):
        options.choice(FRAMING)
        options.reject(FRAMING_MAX_LENGTH, f"does not apply to format '{kind}': one message "
                                           "is one record")
        settings = (_avro(options, role, records_in) if kind == AVRO
                    else _protobuf(options, role))
        return FormatSpec(kind=kind, bad_data=_bad_data(options, role),
                          dead_letter=_dead_letter(options, role), **settings)
    changes = kind == DEBEZIUM_JSON
    if changes:
        options.reject(JSON_UNSTRUCTURED, "applies to format 'json' only: a debezium_json "
                                          "record is a change envelope of declared columns")
        if role == SOURCE:
            _check_change_source(options)
    return FormatSpec(
        kind=kind,
        timestamp_format=options.choice(JSON_TIMESTAMP_FORMAT)
        or (UNIX_MILLIS if changes else RFC3339),
        decimal_encoding=options.choice(JSON_DECIMAL_ENCODING)
        or (DECIMAL_BYTES if changes else DECIMAL_NUMBER),
        unstructured=options.boolean(JSON_UNSTRUCTURED),
        bad_data=_bad_data(options, role),
        dead_letter=_dead_letter(options, role),
        max_line_bytes=_framing(options, role),
    )


def _avro(options: OptionReader, role: str, records_in: tuple[OptionSpec, ...]) -> dict[str, Any]:
    """The avro options (docs/sql/connectors.md#avro)."""
    text = options.string(AVRO_SCHEMA)
    if text is not None:
        avro_format.parse_schema(text, AVRO_SCHEMA.name)
    use_registry = options.boolean(AVRO_REGISTRY)
    wire = options.boolean(AVRO_WIRE_FORMAT, use_registry)
    if use_registry and not wire:
        raise ConnectorError(f"option '{AVRO_WIRE_FORMAT.name}' cannot be false with the "
                             "schema registry: registry records carry the schema id header",
                             option=AVRO_WIRE_FORMAT.name)
    registry = None
    if use_registry:
        endpoint = options.required(REGISTRY_ENDPOINT)
        urls = [url.strip() for url in endpoint.split(",")]
        if not all(url.startswith(("http://", "https://")) for url in urls):
            raise ConnectorError(f"option '{REGISTRY_ENDPOINT.name}' must be an http:// or "
                                 "https:// URL (or several, separated by commas)",
                                 option=REGISTRY_ENDPOINT.name)
        key = options.string(REGISTRY_API_KEY)
        secret = options.string(REGISTRY_API_SECRET)
        if (key is None) != (secret is None):
            missing = (REGISTRY_API_SECRET if secret is None else REGISTRY_API_KEY).name
            raise ConnectorError(f"option '{missing}' is needed too: the registry's "
                                 "credentials are a key and a secret", option=missing)
        for url in urls:  # the registry's client tries each of them
            _check_registry_egress(options, url)
        registry = {"endpoint": ",".join(url.rstrip("/") for url in urls), "api_key": key or "",
                    "api_secret": secret or ""}
    else:
        for spec in (REGISTRY_ENDPOINT, REGISTRY_API_KEY, REGISTRY_API_SECRET, VALUE_SUBJECT):
            options.reject(spec, f"needs {AVRO_REGISTRY.name} = true")
    if role == SOURCE and text is None and not use_registry:
        raise ConnectorError(f"an avro source needs its writer schema: option "
                             f"'{AVRO_SCHEMA.name}' (the schema's JSON), or "
                             f"{AVRO_REGISTRY.name} = true with {REGISTRY_ENDPOINT.name}",
                             option=AVRO_SCHEMA.name)
    schema_id = None
    if role == SOURCE:
        options.reject(AVRO_SCHEMA_ID, "applies to sinks only: a source reads each record's "
                                       "schema id from its header")
        options.reject(VALUE_SUBJECT, "applies to sinks only")
    else:
        schema_id = options.integer(AVRO_SCHEMA_ID, minimum=0)
        if schema_id is not None and (use_registry or not wire):
            raise ConnectorError(f"option '{AVRO_SCHEMA_ID.name}' is for the Confluent wire "
                                 f"format without a registry ({AVRO_WIRE_FORMAT.name} = true); "
                                 "with the registry the id is the registered schema's",
                                 option=AVRO_SCHEMA_ID.name)
        if wire and not use_registry and schema_id is None:
            raise ConnectorError("an avro sink writing the Confluent wire format without a "
                                 f"registry needs option '{AVRO_SCHEMA_ID.name}' (the id "
                                 "written in each header)", option=AVRO_SCHEMA_ID.name)
    subject = None
    if use_registry and role != SOURCE:
        subject = options.string(VALUE_SUBJECT) or _default_subject(options, records_in)
    return {"avro_schema": text, "confluent_wire": wire, "schema_id": schema_id,
            "registry": registry, "subject": subject}


def _protobuf(options: OptionReader, role: str) -> dict[str, Any]:
    """The protobuf options (docs/sql/connectors.md#protobuf)."""
    path = options.string(PROTOBUF_DESCRIPTOR_FILE)
    inline = options.string(PROTOBUF_DESCRIPTOR)
    if (path is None) == (inline is None):
        raise ConnectorError("format 'protobuf' needs the message's descriptor: exactly one "
                             f"of '{PROTOBUF_DESCRIPTOR_FILE.name}' (a FileDescriptorSet "
                             "written by protoc --descriptor_set_out) or "
                             f"'{PROTOBUF_DESCRIPTOR.name}' (the same, base64)",
                             option=PROTOBUF_DESCRIPTOR_FILE.name)
    if path is not None:
        resolved = options.table.boundary.resolve_path(path,
                                                       option=PROTOBUF_DESCRIPTOR_FILE.name)
        try:
            with open(resolved, "rb") as handle:
                data = handle.read()
        except OSError as error:
            raise ConnectorError(f"option '{PROTOBUF_DESCRIPTOR_FILE.name}': cannot read "
                                 f"'{path}' ({error.strerror})",
                                 option=PROTOBUF_DESCRIPTOR_FILE.name) from None
        option = PROTOBUF_DESCRIPTOR_FILE.name
    else:
        data = protobuf_format.inline_descriptor(inline or "")
        option = PROTOBUF_DESCRIPTOR.name
    name = options.required(PROTOBUF_MESSAGE_NAME)
    message = protobuf_format.message_descriptor(data, name, option)
    wire = options.boolean(PROTOBUF_WIRE_FORMAT)
    schema_id = None
    if role == SOURCE:
        options.reject(PROTOBUF_SCHEMA_ID, "applies to sinks only: a source reads each "
                                           "record's schema id from its header")
    else:
        schema_id = options.integer(PROTOBUF_SCHEMA_ID, minimum=0)
        if wire and schema_id is None:
            raise ConnectorError("a protobuf sink writing the Confluent wire format needs "
                                 f"option '{PROTOBUF_SCHEMA_ID.name}' (the id written in each "
                                 "header)", option=PROTOBUF_SCHEMA_ID.name)
        if not wire and schema_id is not None:
            raise ConnectorError(f"option '{PROTOBUF_SCHEMA_ID.name}' is written in the "
                                 f"Confluent header only: set '{PROTOBUF_WIRE_FORMAT.name}' = "
                                 "'true' or remove it", option=PROTOBUF_SCHEMA_ID.name)
    return {"descriptor": base64.b64encode(data).decode(), "message_name": message.full_name,
            "confluent_wire": wire, "schema_id": schema_id}


def _check_registry_egress(options: OptionReader, endpoint: str) -> None:
    """Under an egress policy the registry's host must be one the tenant may reach."""
    egress = options.table.boundary.egress
    if egress is None:
        return
    url = urlsplit(endpoint)
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError:
        raise ConnectorError(f"option '{REGISTRY_ENDPOINT.name}' has an invalid port",
                             option=REGISTRY_ENDPOINT.name) from None
    egress.resolve(url.hostname or "", port, option=REGISTRY_ENDPOINT.name)


def _default_subject(options: OptionReader, records_in: tuple[OptionSpec, ...]) -> str:
    """Confluent's TopicNameStrategy: ``<topic>-value`` (the table's name without a topic)."""
    for spec in records_in:
        value = options.peek(spec.name)
        if value:
            return f"{value}-value"
    return f"{options.table.name}-value"


def require_line_format(options: OptionReader) -> None:
    """Newline-framed connectors (files, stdout) cannot hold binary records."""
    kind = (options.peek(FORMAT_OPTION) or "").strip().lower()
    connector = options.table.connector
    if kind in BINARY_FORMATS:
        raise ConnectorError(f"format '{kind}' is binary and cannot be framed by newlines "
                             f"in connector '{connector}'; use a message connector (kafka, "
                             "redis, nats, mqtt, rabbitmq, kinesis)", option=FORMAT_OPTION.name)


def _check_change_source(options: OptionReader) -> None:
    """A debezium_json source needs a PRIMARY KEY, no event_time_field (docs/sql/updating.md)."""
    options.reject(EVENT_TIME_FIELD, "cannot be used with format 'debezium_json': its rows "
                                     "are changes keyed by the PRIMARY KEY; remove it")
    if not options.table.primary_key:
        raise ConnectorError(
            "a debezium_json source needs a PRIMARY KEY to know which row a change updates: "
            "declare it on the key column(s), e.g. `id BIGINT PRIMARY KEY`",
            option=FORMAT_OPTION.name)


def _bad_data(options: OptionReader, role: str) -> str:
    if role != SOURCE:
        return "fail"
    return options.choice(BAD_DATA) or "fail"


def _dead_letter(options: OptionReader, role: str) -> str | None:
    """The dead-letter table of a ``bad_data = 'dead_letter'`` source."""
    if role != SOURCE or (options.peek(BAD_DATA) or "").strip().lower() != DEAD_LETTER:
        options.reject(DEAD_LETTER_TABLE, f"applies with {BAD_DATA.name} = 'dead_letter' only")
        return None
    takers = dead_letter_connectors()
    if options.table.connector not in takers:
        raise ConnectorError(f"{BAD_DATA.name} = 'dead_letter' is not supported by "
                             f"{options.table.connector} sources yet (only by "
                             f"{', '.join(sorted(takers))}); use 'drop' or 'fail'",
                             option=BAD_DATA.name)
    table = options.required(DEAD_LETTER_TABLE).strip()
    if table.lower() == options.table.name.lower():
        raise ConnectorError(f"option '{DEAD_LETTER_TABLE.name}' must name a sink table, not "
                             "the source itself", option=DEAD_LETTER_TABLE.name)
    return table


@cache
def dead_letter_connectors() -> frozenset[str]:
    """The sources whose readers hand undecodable records to a dead-letter table: those
    that declare ``dead_letter.table``, by name, as some connectors declare it again
    (the message sources, whose readers' bad records go through
    ``dead_letter.BadRecords``).  Computed on first use: the registry imports every
    connector, and they import this module."""
    from spate.engine.connectors import CONNECTORS

    return frozenset(name for name, connector in CONNECTORS.items()
                     if any(spec.name == DEAD_LETTER_TABLE.name for spec in connector.options))



def _framing(options: OptionReader, role: str) -> int | None:
    options.choice(FRAMING)
    if role != SOURCE:
        return None
    return options.integer(FRAMING_MAX_LENGTH, minimum=1)


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
    if spec.kind == AVRO:
        if role == SOURCE and not columns:
            raise ConnectorError("an avro source needs its columns declared, e.g. "
                                 "CREATE TABLE t (id BIGINT, name TEXT) WITH (...)")
        if spec.avro_schema is not None and columns:
            avro_format.check_compatible(json.loads(spec.avro_schema),
                                         [(c.name, c.spark_type, c.nullable) for c in columns],
                                         AVRO_SCHEMA.name)
        return
    if spec.kind == PROTOBUF:
        if role == SOURCE and not columns:
            raise ConnectorError("a protobuf source needs its columns declared, e.g. "
                                 "CREATE TABLE t (id BIGINT, name TEXT) WITH (...)")
        message = _protobuf_message(spec)
        typed = [(c.name, c.spark_type) for c in columns]
        if role == SINK:
            protobuf_writer.check_writable(message, typed, PROTOBUF_MESSAGE_NAME.name)
        else:
            protobuf_format.check_compatible(message, typed, PROTOBUF_MESSAGE_NAME.name)
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
                    option=FORMAT_OPTION.name)


def _protobuf_message(spec: FormatSpec) -> Any:
    """The message descriptor of a protobuf :class:`FormatSpec`."""
    return protobuf_format.message_descriptor(base64.b64decode(spec.descriptor or ""),
                                              spec.message_name or "", PROTOBUF_DESCRIPTOR.name)


def check_sink_schema(spec: FormatSpec, schema: T.StructType) -> None:
    """The rows a sink will receive must fit its format."""
    if spec.single_value:
        _check_single_value(spec, [(f.name, f.dataType) for f in schema.fields], SINK)
    if spec.kind == PROTOBUF:
        # As for avro, only the names of the query's columns are known here; their types
        # are checked when an epoch is encoded (:func:`_protobuf_column`), on the driver.
        protobuf_writer.check_writable(_protobuf_message(spec),
                                       [(name, None) for name in schema.names],
                                       PROTOBUF_MESSAGE_NAME.name)
    if spec.kind == AVRO and spec.avro_schema is not None:
        # The runtime knows the names of a query's columns when it opens a sink; their
        # types meet the schema when the first epoch is encoded.
        names = {f["name"] for f in json.loads(spec.avro_schema).get("fields", [])}
        for name in schema.names:
            if name not in names:
                raise ConnectorError(f"column '{name}' is not a field of the Avro schema "
                                     f"(its fields: {', '.join(sorted(names))})",
                                     option=AVRO_SCHEMA.name)


def _check_single_value(spec: FormatSpec, columns: list[tuple[str, T.DataType]],
                        role: str) -> None:
    what = JSON_UNSTRUCTURED.name if spec.unstructured else f"format '{spec.kind}'"
    option = JSON_UNSTRUCTURED.name if spec.unstructured else FORMAT_OPTION.name
    if role == SINK and not columns:
        return
    wanted: tuple[type[T.DataType], ...] = (T.StringType,)
    sql = "TEXT"
    if spec.kind == RAW_BYTES:  # a sink also takes TEXT, written as its UTF-8 bytes
        wanted, sql = ((T.BinaryType, T.StringType) if role == SINK else (T.BinaryType,)), "BYTEA"
    if (len(columns) != 1 or columns[0][0] != "value"
            or not isinstance(columns[0][1], wanted)):
        found = ", ".join(f"{n} {t.simpleString()}" for n, t in columns) or "none"
        raise ConnectorError(f"{what} needs exactly one column `value {sql}`; found: {found}",
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


def single_value_columns(spec: FormatSpec | None = None) -> tuple[ColumnDef, ...]:
    """The default columns of a raw_string / raw_bytes / unstructured table."""
    if spec is not None and spec.kind == RAW_BYTES:
        return (ColumnDef("value", T.BinaryType(), True),)
    return (ColumnDef("value", T.StringType(), True),)


def message_columns(table: TableConfig, spec: FormatSpec, role: str) -> tuple[ColumnDef, ...]:
    """A message table's physical columns, checked against its format: the data columns
    (a source of a single-value format declaring none gets the default ``value``), with
    its metadata columns in declaration order (after that default ``value``)."""
    columns = table.data_columns
    if not columns and role == SOURCE and spec.single_value:
        columns = single_value_columns(spec)
    check_columns(spec, columns, role)
    if table.metadata:
        columns = table.columns if table.data_columns else columns + table.columns
    return columns


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


# -- sink encoding -----------------------------------------------------------------


def encode_records(df: DataFrame, spec: FormatSpec, key: str | None = None) -> DataFrame:
    """One column ``record`` per row, encoded natively by Spark: TEXT, or BINARY for the
    :attr:`FormatSpec.binary` formats (avro and protobuf are encoded by Arrow UDFs).

    debezium_json writes one change envelope per changed key (:func:`change_records`).
    ``key``: a column also selected, as TEXT, as a second column ``key`` (the record key
    of a message sink; not with debezium_json).
    """
    keys = [] if key is None else [F.col(f"`{key}`").cast("string").alias("key")]
    if spec.single_value:
        return df.select(record_column(df, spec).alias("record"), *keys)
    if spec.updating:
        changes = change_records(df)
        return changes.select(_encoded(changes.schema, spec, _envelope).alias("record"))
    # Updating rows reach a json encoder only in previews (the planner sends them to
    # debezium_json sinks): one row per change, with its op.
    df = change_rows(df)
    return df.select(record_column(df, spec).alias("record"), *keys)


def record_column(df: DataFrame, spec: FormatSpec) -> Column:
    """The encoded record of each append-only row of ``df`` (json or raw_string), a native
    expression a sink can select next to other columns (a key, a field)."""
    return _encoded(df.schema, spec, _record)


def _encoding_key(rows: T.StructType, spec: FormatSpec,
                  build: Callable[[T.StructType, FormatSpec], Column]) -> tuple[str, str, str]:
    return build.__name__, rows.json(), json.dumps(spec.to_dict(), sort_keys=True)


# Encoding expressions are built once per schema and format (and builder): sinks encode
# every epoch's rows, whose schema does not change within a run, and building an
# expression costs JVM calls per column (a sink of 35 aggregates spent most of its
# epoch's driver time here).  Expressions are not tied to a DataFrame: any epoch's rows
# of that schema take them.  Locked: a tenant's application runs pipelines in threads.
@cached(LRUCache(maxsize=256), key=_encoding_key, lock=threading.Lock())
def _encoded(rows: T.StructType, spec: FormatSpec,
             build: Callable[[T.StructType, FormatSpec], Column]) -> Column:
    return build(rows, spec)


def _record(rows: T.StructType, spec: FormatSpec) -> Column:
    if spec.kind == RAW_BYTES:
        return F.col("value").cast("binary")
    if spec.single_value:
        return F.col("value").cast("string")
    if spec.kind == AVRO:
        return _avro_column(rows, spec)
    if spec.kind == PROTOBUF:
        return _protobuf_column(rows, spec)
    fields = [_prepare(F.col(f"`{f.name}`"), f.dataType, spec).alias(f.name)
              for f in rows.fields]
    return F.to_json(F.struct(*fields), _TO_JSON_OPTIONS)


def _envelope(changes: T.StructType, spec: FormatSpec) -> Column:
    """A debezium_json record of each row of :func:`change_records`."""
    row_type = changes["after"].dataType
    envelope = F.struct(_prepare(F.col("before"), row_type, spec).alias("before"),
                        _prepare(F.col("after"), row_type, spec).alias("after"),
                        F.col("op"))
    return F.to_json(envelope, _TO_JSON_OPTIONS)


def _avro_column(rows: T.StructType, spec: FormatSpec) -> Column:
    """Avro records of rows of schema ``rows``, by an Arrow UDF (Spark has no native Avro
    writer)."""
    writer = (json.loads(spec.avro_schema) if spec.avro_schema is not None
              else avro_format.schema_for(rows, spec.subject or "record"))
    schema_id = spec.schema_id
    if spec.registry is not None:
        try:
            schema_id = avro_format.Registry(spec.registry).register(
                spec.subject or "record-value", writer)
        except Exception as error:  # noqa: BLE001 - the registry client's errors
            raise ConnectorError(f"the schema registry did not register the writer schema "
                                 f"under subject '{spec.subject}': {error}",
                                 option=REGISTRY_ENDPOINT.name) from None
    udf = avro_format.encoder_udf(writer, schema_id if spec.confluent_wire else None)
    encoded: Column = udf(F.struct(*(F.col(f"`{f.name}`") for f in rows.fields)))
    return encoded


def _protobuf_column(rows: T.StructType, spec: FormatSpec) -> Column:
    """Protobuf records of rows of schema ``rows``, by an Arrow UDF (on the executors)."""
    message = _protobuf_message(spec)
    protobuf_writer.check_writable(message, [(f.name, f.dataType) for f in rows.fields],
                                   PROTOBUF_MESSAGE_NAME.name)
    header = b""
    if spec.confluent_wire:
        indexes = protobuf_writer.message_indexes(message)
        header = protobuf_writer.confluent_header(spec.schema_id or 0, indexes)
    udf = protobuf_writer.encoder_udf(spec.descriptor or "", spec.message_name or "", header)
    encoded: Column = udf(F.struct(*(F.col(f"`{f.name}`") for f in rows.fields)))
    return encoded


def record_bytes(record: str | bytes | None) -> bytes:
    """An encoded record as message bytes (NULL: empty)."""
    if record is None:
        return b""
    return record if isinstance(record, bytes) else record.encode("utf-8")


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
