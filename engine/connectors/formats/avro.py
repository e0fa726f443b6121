"""The ``avro`` record format (docs/sql/connectors.md): schemas, decoding and encoding.

A record is one Avro datum written with a *writer schema*, given inline
(``avro.schema``) or looked up in a Confluent-compatible schema registry by the
id in the record's header. With the Confluent wire format a record is the magic
byte 0, the schema id as a 4-byte big-endian integer, then the datum.

Decoding runs on executors with fastavro (compiled), one parsed reader per
writer schema, and builds the Arrow columns of a whole block at once. Encoding
runs in a Spark Arrow UDF, as Spark has no native Avro writer here.
"""

from __future__ import annotations

import copy
import io
import json
import struct
from collections.abc import Iterator
from typing import Any

import fastavro
import pyarrow as pa
from pyspark.sql import types as T

from spate.engine.connectors.core.base import ConnectorError
from spate.engine.connectors.core.metadata import FORMAT_OPTION

MAGIC = 0
HEADER = struct.Struct(">bI")
_NULL = "null"

#: Avro primitive types and the Spark types a column of each may be declared as.
_PRIMITIVES: dict[str, tuple[type[T.DataType], ...]] = {
    "boolean": (T.BooleanType,),
    "int": (T.IntegerType, T.LongType, T.DoubleType, T.FloatType),
    "long": (T.LongType, T.DoubleType),
    "float": (T.FloatType, T.DoubleType),
    "double": (T.DoubleType,),
    "string": (T.StringType,),
    "bytes": (T.BinaryType,),
    "fixed": (T.BinaryType,),
    "enum": (T.StringType,),
}
_LOGICAL: dict[str, tuple[type[T.DataType], ...]] = {
    "timestamp-millis": (T.TimestampType,),
    "timestamp-micros": (T.TimestampType,),
    "local-timestamp-millis": (T.TimestampType,),
    "local-timestamp-micros": (T.TimestampType,),
    "date": (T.DateType,),
    "decimal": (T.DecimalType,),
    "uuid": (T.StringType,),
}


def parse_schema(text: str, option: str) -> dict[str, Any]:
    """An Avro record schema from its JSON text; ConnectorError naming ``option``."""
    try:
        raw = json.loads(text)
    except ValueError as error:
        raise ConnectorError(f"option '{option}' is not valid JSON: {error}",
                             option=option) from None
    try:
        fastavro.parse_schema(raw)
    except Exception as error:  # noqa: BLE001 - fastavro raises several kinds
        raise ConnectorError(f"option '{option}' is not a valid Avro schema: {error}",
                             option=option) from None
    if not isinstance(raw, dict) or raw.get("type") != "record":
        raise ConnectorError(f"option '{option}' must be an Avro schema of type 'record' "
                             "(one field per column)", option=option)
    return raw


def check_compatible(schema: dict[str, Any], columns: list[tuple[str, T.DataType, bool]],
                     option: str) -> None:
    """Every declared column must be a field of ``schema`` whose Avro type reads into the
    column's type (extra Avro fields are ignored)."""
    fields = {f["name"]: f["type"] for f in schema.get("fields", [])}
    for name, data_type, _nullable in columns:
        if name not in fields:
            known = ", ".join(sorted(fields)) or "none"
            raise ConnectorError(f"column '{name}' is not a field of the Avro schema "
                                 f"(its fields: {known})", option=option)
        problem = _mismatch(fields[name], data_type, name)
        if problem is not None:
            raise ConnectorError(problem, option=option)


def _mismatch(avro: Any, data_type: T.DataType, path: str) -> str | None:
    if isinstance(avro, list):  # a union: one non-null branch must fit
        branches = [b for b in avro if b != _NULL]
        if any(_mismatch(b, data_type, path) is None for b in branches):
            return None
        return _describe(path, avro, data_type)
    if isinstance(avro, str):
        avro = {"type": avro}
    kind = avro.get("type")
    logical = avro.get("logicalType")
    if logical in _LOGICAL and isinstance(data_type, _LOGICAL[logical]):
        return None
    if isinstance(kind, dict | list):
        return _mismatch(kind, data_type, path)
    if kind == "record":
        if not isinstance(data_type, T.StructType):
            return _describe(path, avro, data_type)
        fields = {f["name"]: f["type"] for f in avro.get("fields", [])}
        for field in data_type.fields:
            if field.name not in fields:
                return f"field '{path}.{field.name}' is not in the Avro record '{avro['name']}'"
            problem = _mismatch(fields[field.name], field.dataType, f"{path}.{field.name}")
            if problem is not None:
                return problem
        return None
    if kind == "array":
        if not isinstance(data_type, T.ArrayType):
            return _describe(path, avro, data_type)
        return _mismatch(avro["items"], data_type.elementType, f"{path}[]")
    if kind in _PRIMITIVES and isinstance(data_type, _PRIMITIVES[kind]):
        return None
    return _describe(path, avro, data_type)


def _describe(path: str, avro: Any, data_type: T.DataType) -> str:
    shown = json.dumps(avro)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    return (f"field '{path}': Avro type {shown} cannot be read as "
            f"{data_type.simpleString().upper()}")


def schema_for(schema: T.StructType, name: str = "record") -> dict[str, Any]:
    """An Avro record schema for rows of ``schema`` (a sink with no ``avro.schema``)."""
    return {"type": "record", "name": _avro_name(name),
            "fields": [{"name": f.name, "type": _avro_type(f.dataType, f"{name}_{f.name}")}
                       for f in schema.fields]}


def _avro_name(name: str) -> str:
    cleaned = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return cleaned if cleaned and not cleaned[0].isdigit() else f"r_{cleaned}"


#: The Avro type of each Spark type that maps to one whatever its parameters.
_AVRO_TYPES: dict[type[T.DataType], Any] = {
    T.BooleanType: "boolean", T.ByteType: "int", T.ShortType: "int", T.IntegerType: "int",
    T.LongType: "long", T.FloatType: "float", T.DoubleType: "double", T.StringType: "string",
    T.BinaryType: "bytes", T.DateType: {"type": "int", "logicalType": "date"},
    T.TimestampType: {"type": "long", "logicalType": "timestamp-micros"},
    T.TimestampNTZType: {"type": "long", "logicalType": "timestamp-micros"},
}


def _avro_type(data_type: T.DataType, name: str) -> Any:
    """A nullable Avro type for a Spark type (every column may be NULL)."""
    inner: Any
    if type(data_type) in _AVRO_TYPES:
        inner = copy.copy(_AVRO_TYPES[type(data_type)])  # a schema of its own to change
    elif isinstance(data_type, T.DecimalType):
        inner = {"type": "bytes", "logicalType": "decimal",
                 "precision": data_type.precision, "scale": data_type.scale}
    elif isinstance(data_type, T.ArrayType):
        inner = {"type": "array", "items": _avro_type(data_type.elementType, f"{name}_item")}
    elif isinstance(data_type, T.StructType):
        inner = schema_for(data_type, name)
    else:
        raise ConnectorError(f"type {data_type.simpleString()} cannot be written as Avro",
                             option=FORMAT_OPTION.name)
    return [_NULL, inner]


# -- the Confluent wire format -----------------------------------------------------


def frame(schema_id: int, body: bytes) -> bytes:
    """``body`` in the Confluent wire format."""
    return HEADER.pack(MAGIC, schema_id) + body


def unframe(record: bytes) -> tuple[int, bytes]:
    """(schema id, body) of a Confluent-framed record; ValueError saying why not."""
    if len(record) < HEADER.size:
        raise ValueError(f"a record of {len(record)} bytes is too short for the Confluent "
                         "wire format (magic byte and 4-byte schema id)")
    magic, schema_id = HEADER.unpack_from(record)
    if magic != MAGIC:
        raise ValueError(f"the record does not start with the Confluent magic byte 0 "
                         f"(found {magic & 0xFF})")
    return schema_id, record[HEADER.size:]


# -- schema registry ---------------------------------------------------------------


#: (registry endpoint, subject, schema JSON) -> the id the registry gave it
_REGISTERED: dict[tuple[str, str, str], int] = {}


class Registry:
    """A Confluent-API schema registry, through confluent-kafka's client (cached)."""

    def __init__(self, settings: dict[str, Any]) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self.endpoint = settings["endpoint"]
        config: dict[str, Any] = {"url": self.endpoint}
        if settings.get("api_key"):
            config["basic.auth.user.info"] = f"{settings['api_key']}:{settings['api_secret']}"
        self.client = SchemaRegistryClient(config)

    def schema(self, schema_id: int) -> dict[str, Any]:
        """The Avro writer schema registered under ``schema_id``."""
        found = self.client.get_schema(schema_id)
        if found.schema_type not in (None, "AVRO"):
            raise ValueError(f"schema id {schema_id} is a {found.schema_type} schema, not Avro")
        parsed: dict[str, Any] = json.loads(found.schema_str or "{}")
        return parsed

    def register(self, subject: str, schema: dict[str, Any]) -> int:
        """The id of ``schema`` under ``subject``, registering it if new (asked once per
        process: a sink registers its schema when it writes its first epoch)."""
        from confluent_kafka.schema_registry import Schema

        text = json.dumps(schema, sort_keys=True)
        known = _REGISTERED.get((self.endpoint, subject, text))
        if known is None:
            known = int(self.client.register_schema(subject, Schema(text, "AVRO")))
            _REGISTERED[(self.endpoint, subject, text)] = known
        return known


# -- decoding ----------------------------------------------------------------------


class AvroDecoder:
    """Avro records -> Arrow columns of ``schema`` (the table's physical columns)."""

    def __init__(self, schema: pa.Schema, writer: dict[str, Any] | None, wire: bool,
                 registry: dict[str, Any] | None) -> None:
        self.schema = schema
        self.wire = wire
        self.writer = None if writer is None else fastavro.parse_schema(writer)
        self.registry_settings = registry
        self._registry: Registry | None = None
        self._by_id: dict[int, Any] = {}
        self.names = [f.name for f in schema]

    def _writer_for(self, schema_id: int) -> Any:
        if self.registry_settings is None:
            return self.writer
        parsed = self._by_id.get(schema_id)
        if parsed is None:
            if self._registry is None:
                self._registry = Registry(self.registry_settings)
            try:
                parsed = fastavro.parse_schema(self._registry.schema(schema_id))
            except Exception as error:  # noqa: BLE001 - the registry client's errors
                raise ValueError(f"schema id {schema_id} could not be fetched from the "
                                 f"schema registry: {error}") from None
            self._by_id[schema_id] = parsed
        return parsed

    def records(self, values: list[bytes]) -> Iterator[tuple[int, dict[str, Any] | str]]:
        """Each record's datum, or what is wrong with it."""
        for index, value in enumerate(values):
            try:
                body = value
                writer = self.writer
                if self.wire:
                    schema_id, body = unframe(value)
                    writer = self._writer_for(schema_id)
                stream = io.BytesIO(body)
                if writer is None:
                    raise ValueError("no writer schema")
                datum = fastavro.schemaless_reader(stream, writer, None)
                if stream.tell() != len(body):
                    raise ValueError(f"{len(body) - stream.tell()} bytes left after the "
                                     "Avro datum")
                if not isinstance(datum, dict):
                    raise ValueError("the datum is not an Avro record")
                yield index, datum
            except Exception as error:  # noqa: BLE001 - fastavro's errors vary by type
                text = str(error) or type(error).__name__
                yield index, f"not a valid Avro record: {text}"

    def decode(self, values: list[bytes]) -> tuple[list[pa.Array], list[int],
                                                   list[tuple[int, str]]]:
        """The columns of the good records, their indexes, and the bad ones."""
        rows: list[dict[str, Any]] = []
        good: list[int] = []
        bad: list[tuple[int, str]] = []
        for index, datum in self.records(values):
            if isinstance(datum, str):
                bad.append((index, datum))
                continue
            rows.append(datum)
            good.append(index)
        columns: list[pa.Array] = []
        for field in self.schema:
            data = [row.get(field.name) for row in rows]
            try:
                columns.append(pa.array(data, field.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError):
                return self._decode_one_by_one(rows, good, bad)
        return columns, good, bad

    def _decode_one_by_one(self, rows: list[dict[str, Any]], good: list[int],
                           bad: list[tuple[int, str]]) -> tuple[list[pa.Array], list[int],
                                                                list[tuple[int, str]]]:
        kept: list[dict[str, Any]] = []
        kept_index: list[int] = []
        for row, index in zip(rows, good, strict=True):
            try:
                for field in self.schema:
                    pa.array([row.get(field.name)], field.type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as error:
                bad.append((index, f"field '{field.name}': {error}"))
                continue
            kept.append(row)
            kept_index.append(index)
        columns = [pa.array([r.get(f.name) for r in kept], f.type) for f in self.schema]
        return columns, kept_index, sorted(bad)


# -- encoding ----------------------------------------------------------------------


def encoder(writer: dict[str, Any], schema_id: int | None) -> Any:
    """A function from Arrow struct arrays to Avro records (framed if ``schema_id``)."""
    parsed = fastavro.parse_schema(writer)
    header = b"" if schema_id is None else HEADER.pack(MAGIC, schema_id)

    def encode(rows: pa.Array) -> pa.Array:
        out: list[bytes | None] = []
        buffer = io.BytesIO()
        for row in rows.to_pylist():
            if row is None:
                out.append(None)
                continue
            buffer.seek(0)
            buffer.truncate()
            fastavro.schemaless_writer(buffer, parsed, row)
            out.append(header + buffer.getvalue())
        return pa.array(out, pa.binary())

    return encode


def encoder_udf(writer: dict[str, Any], schema_id: int | None) -> Any:
    """A Spark Arrow UDF from a struct column to Avro records (BINARY)."""
    from pyspark.sql.pandas.functions import arrow_udf

    encode = encoder(writer, schema_id)

    def avro_records(rows: pa.Array) -> pa.Array:
        return encode(rows)

    return arrow_udf(avro_records, T.BinaryType())  # type: ignore[call-overload]
