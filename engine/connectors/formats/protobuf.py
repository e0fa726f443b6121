"""The ``protobuf`` record format (docs/sql/connectors.md): descriptors and decoding.

The message type comes from a compiled ``FileDescriptorSet`` (what ``protoc
--descriptor_set_out`` writes), given as a file in the tenant's storage or inline
as base64, and ``protobuf.message_name``. With the Confluent wire format a record
is the magic byte 0, a 4-byte schema id, the message indexes (zig-zag varints: a
count, then the indexes; a single 0 byte for the first message), then the message.

Each record is parsed by the protobuf runtime (upb, compiled) and its fields read
straight into the Arrow columns of the table's declared types.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import DecodeError, Message
from pyspark.sql import types as T

from spate.engine.connectors.core.base import ConnectorError
from spate.engine.connectors.core.metadata import PROTOBUF_DESCRIPTOR, PROTOBUF_MESSAGE_NAME
from spate.engine.connectors.formats.avro import unframe

TIMESTAMP = "google.protobuf.Timestamp"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_FD = FieldDescriptor
_INTS32 = {_FD.TYPE_INT32, _FD.TYPE_SINT32, _FD.TYPE_SFIXED32}
_INTS64 = {_FD.TYPE_INT64, _FD.TYPE_SINT64, _FD.TYPE_SFIXED64, _FD.TYPE_UINT32,
           _FD.TYPE_FIXED32}
_UINT64 = {_FD.TYPE_UINT64, _FD.TYPE_FIXED64}
#: Protobuf scalar types and the Spark types a column of each may be declared as.
_SCALARS: dict[int, tuple[type[T.DataType], ...]] = {
    **{t: (T.IntegerType, T.LongType, T.DoubleType) for t in _INTS32},
    **{t: (T.LongType, T.DoubleType) for t in _INTS64},
    **{t: (T.DecimalType, T.DoubleType) for t in _UINT64},
    _FD.TYPE_DOUBLE: (T.DoubleType,),
    _FD.TYPE_FLOAT: (T.FloatType, T.DoubleType),
    _FD.TYPE_BOOL: (T.BooleanType,),
    _FD.TYPE_STRING: (T.StringType,),
    _FD.TYPE_BYTES: (T.BinaryType,),
    _FD.TYPE_ENUM: (T.StringType,),
}


def descriptor_set(data: bytes, option: str) -> descriptor_pb2.FileDescriptorSet:
    """A parsed FileDescriptorSet; ConnectorError naming ``option`` if it is not one."""
    files = descriptor_pb2.FileDescriptorSet()
    try:
        files.ParseFromString(data)
    except DecodeError as error:
        raise ConnectorError(f"option '{option}' is not a compiled FileDescriptorSet (as "
                             f"protoc --descriptor_set_out writes): {error}",
                             option=option) from None
    if not files.file:
        raise ConnectorError(f"option '{option}' holds no .proto file descriptors",
                             option=option)
    return files


def inline_descriptor(text: str) -> bytes:
    """The bytes of ``protobuf.descriptor`` (base64)."""
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ConnectorError(f"option '{PROTOBUF_DESCRIPTOR.name}' must be a base64-encoded "
                             "FileDescriptorSet", option=PROTOBUF_DESCRIPTOR.name) from None


def message_descriptor(data: bytes, name: str, option: str) -> Descriptor:
    """The descriptor of message ``name`` in the FileDescriptorSet ``data``."""
    files = descriptor_set(data, option)
    pool = descriptor_pool.DescriptorPool()
    try:
        for file in files.file:
            pool.Add(file)
        return pool.FindMessageTypeByName(name.strip().lstrip("."))
    except KeyError:
        known = sorted(m.name if not f.package else f"{f.package}.{m.name}"
                       for f in files.file for m in f.message_type)
        raise ConnectorError(f"message '{name}' is not in the descriptor set (its top-level "
                             f"messages: {', '.join(known) or 'none'})",
                             option=PROTOBUF_MESSAGE_NAME.name) from None
    except TypeError as error:  # an incomplete set: a file's dependency is missing
        raise ConnectorError(f"option '{option}': the descriptor set is incomplete ({error}); "
                             "compile it with protoc --include_imports",
                             option=option) from None


def check_compatible(message: Descriptor, columns: list[tuple[str, T.DataType]],
                     option: str) -> None:
    """Every declared column must be a field of ``message`` whose type reads into it."""
    for name, data_type in columns:
        field = message.fields_by_name.get(name)
        if field is None:
            known = ", ".join(f.name for f in message.fields) or "none"
            raise ConnectorError(f"column '{name}' is not a field of message "
                                 f"'{message.full_name}' (its fields: {known})", option=option)
        problem = field_mismatch(field, data_type, name, _SCALARS, _describe)
        if problem is not None:
            raise ConnectorError(problem, option=option)


def field_mismatch(field: FieldDescriptor, data_type: T.DataType, path: str,
                   scalars: Mapping[int, tuple[type[T.DataType], ...]],
                   describe: Callable[[str, str, T.DataType], str], doing: str = "read",
                   element: bool = False) -> str | None:
    """What keeps a column of ``data_type`` from matching ``field`` (None: nothing).

    Shared by sources (which read fields into columns) and sinks (which write columns
    into fields): ``scalars`` says which column types each scalar field type fits,
    ``describe`` words a mismatch, ``doing`` is "read" or "written"."""
    if _repeated(field) and not element:
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            return f"field '{path}': protobuf maps cannot be {doing} yet"
        if not isinstance(data_type, T.ArrayType):
            return describe(path, f"repeated {type_name(field)}", data_type)
        return field_mismatch(field, data_type.elementType, f"{path}[]", scalars, describe,
                              doing, element=True)
    if field.type == _FD.TYPE_MESSAGE or field.type == _FD.TYPE_GROUP:
        if field.message_type.full_name == TIMESTAMP:
            ok = isinstance(data_type, T.TimestampType)
            return None if ok else describe(path, TIMESTAMP, data_type)
        if not isinstance(data_type, T.StructType):
            return describe(path, field.message_type.full_name, data_type)
        for inner in data_type.fields:
            sub = field.message_type.fields_by_name.get(inner.name)
            if sub is None:
                return (f"field '{path}.{inner.name}' is not in message "
                        f"'{field.message_type.full_name}'")
            problem = field_mismatch(sub, inner.dataType, f"{path}.{inner.name}", scalars,
                                     describe, doing)
            if problem is not None:
                return problem
        return None
    if isinstance(data_type, scalars.get(field.type, ())):
        return None
    return describe(path, type_name(field), data_type)


def _repeated(field: FieldDescriptor) -> bool:
    return bool(field.label == _FD.LABEL_REPEATED)


def type_name(field: FieldDescriptor) -> str:
    """A field's protobuf type as a .proto file names it (for messages)."""
    if field.message_type is not None:
        return str(field.message_type.full_name)
    if field.enum_type is not None:
        return f"enum {field.enum_type.full_name}"
    names = {v: k[len("TYPE_"):].lower() for k, v in vars(_FD).items()
             if k.startswith("TYPE_") and isinstance(v, int)}
    return str(names.get(field.type, field.type))


def _describe(path: str, proto: str, data_type: T.DataType) -> str:
    return (f"field '{path}': protobuf type {proto} cannot be read as "
            f"{data_type.simpleString().upper()}")


def strip_header(record: bytes) -> bytes:
    """The message of a Confluent-framed protobuf record (schema id and indexes skipped)."""
    _schema_id, body = unframe(record)
    count, at = _zigzag(body, 0)
    if count < 0:
        raise ValueError("the message-index count of the Confluent header is negative")
    for _ in range(count):
        _index, at = _zigzag(body, at)
    return body[at:]


def _zigzag(data: bytes, at: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if at >= len(data):
            raise ValueError("the Confluent header's message indexes are cut short")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), at
        if shift > 63:
            raise ValueError("a message index of the Confluent header is too long")


class ProtobufDecoder:
    """Protobuf records -> Arrow columns of ``schema`` (the table's physical columns)."""

    def __init__(self, schema: pa.Schema, descriptor: bytes, message_name: str,
                 wire: bool) -> None:
        self.schema = schema
        self.wire = wire
        self.message = message_descriptor(descriptor, message_name, PROTOBUF_DESCRIPTOR.name)
        self.cls = message_factory.GetMessageClass(self.message)
        self.fields = [self.message.fields_by_name[f.name] for f in schema]

    def decode(self, values: list[bytes]) -> tuple[list[pa.Array], list[int],
                                                   list[tuple[int, str]]]:
        """The columns of the good records, their indexes, and the bad ones."""
        data: list[list[Any]] = [[] for _ in self.schema]
        good: list[int] = []
        bad: list[tuple[int, str]] = []
        for index, value in enumerate(values):
            try:
                body = strip_header(value) if self.wire else value
                parsed: Message = self.cls()
                parsed.ParseFromString(body)
                row = [_value(parsed, field, f.type)
                       for field, f in zip(self.fields, self.schema, strict=True)]
            except (DecodeError, ValueError, OverflowError) as error:
                bad.append((index, f"not a valid {self.message.full_name} message: "
                                   f"{error or type(error).__name__}"))
                continue
            for column, item in zip(data, row, strict=True):
                column.append(item)
            good.append(index)
        columns = [pa.array(column, f.type) for column, f in zip(data, self.schema, strict=True)]
        return columns, good, bad


def _value(message: Message, field: FieldDescriptor, target: pa.DataType) -> Any:
    """A field of ``message`` as a Python value of Arrow type ``target`` (None if unset
    and the field has presence)."""
    if _repeated(field):
        items = getattr(message, field.name)
        return [_scalar(item, field, target.value_type) for item in items]
    if field.has_presence and not message.HasField(field.name):
        return None
    return _scalar(getattr(message, field.name), field, target)


def _scalar(value: Any, field: FieldDescriptor, target: pa.DataType) -> Any:
    if field.type == _FD.TYPE_ENUM:
        named = field.enum_type.values_by_number.get(value)
        return named.name if named is not None else str(value)
    if field.message_type is not None:
        if field.message_type.full_name == TIMESTAMP:
            return _EPOCH + dt.timedelta(seconds=value.seconds, microseconds=value.nanos // 1000)
        return {f.name: _value(value, value.DESCRIPTOR.fields_by_name[f.name], f.type)
                for f in target}
    if pa.types.is_decimal(target):
        from decimal import Decimal
        return Decimal(value)
    return value
