"""The ``protobuf`` record format on the sink side: column checks and encoding.

The mirror of :mod:`.protobuf`'s decoding, so that what a sink writes a
source reads back as the same rows: columns are fields of ``protobuf.message_name``
by name, STRUCT columns nested messages, ARRAY columns repeated fields, TIMESTAMP
columns ``google.protobuf.Timestamp``, TEXT columns of an enum field the value's
name. A NULL leaves its field unset, which a source reads as NULL where the field
has presence (``optional`` scalars, messages) and as the type's default otherwise.

Encoding runs in a Spark Arrow UDF on the executors, one Arrow batch at a time:
timestamps are turned into microseconds by one Arrow cast per batch, then each
row is built by the protobuf runtime (upb) and serialised. With the Confluent
wire format each record starts with byte 0, ``protobuf.schema_id`` and the
message's indexes within its ``.proto`` file.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa
from google.protobuf import descriptor_pb2, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from pyspark.sql import types as T

from spate.engine.connectors.core.base import ConnectorError
from spate.engine.connectors.core.metadata import PROTOBUF_DESCRIPTOR
from spate.engine.connectors.formats.avro import HEADER, MAGIC
from spate.engine.connectors.formats.protobuf import (
    TIMESTAMP,
    field_mismatch,
    message_descriptor,
)

_FD = FieldDescriptor
_SMALL_INTS = (T.ByteType, T.ShortType, T.IntegerType)
_INTS = (*_SMALL_INTS, T.LongType)
#: Protobuf scalar types and the Spark types a sink may write into each (values out
#: of a field's range fail the epoch, naming the field).
_WRITABLE: dict[int, tuple[type[T.DataType], ...]] = {
    **{t: _SMALL_INTS for t in (_FD.TYPE_INT32, _FD.TYPE_SINT32, _FD.TYPE_SFIXED32)},
    **{t: _INTS for t in (_FD.TYPE_INT64, _FD.TYPE_SINT64, _FD.TYPE_SFIXED64,
                          _FD.TYPE_UINT32, _FD.TYPE_FIXED32)},
    **{t: (*_INTS, T.DecimalType) for t in (_FD.TYPE_UINT64, _FD.TYPE_FIXED64)},
    _FD.TYPE_DOUBLE: (*_INTS, T.FloatType, T.DoubleType),
    _FD.TYPE_FLOAT: (T.FloatType, T.DoubleType),
    _FD.TYPE_BOOL: (T.BooleanType,),
    _FD.TYPE_STRING: (T.StringType,),
    _FD.TYPE_BYTES: (T.BinaryType,),
    _FD.TYPE_ENUM: (T.StringType, *_SMALL_INTS),
}


# -- planning checks ---------------------------------------------------------------


def check_writable(message: Descriptor, columns: Sequence[tuple[str, T.DataType | None]],
                   option: str) -> None:
    """Every column a sink writes must be a field of ``message`` its type can fill (a
    type of None: only the name is known yet)."""
    for name, data_type in columns:
        field = message.fields_by_name.get(name)
        if field is None:
            known = ", ".join(f.name for f in message.fields) or "none"
            raise ConnectorError(f"column '{name}' is not a field of message "
                                 f"'{message.full_name}' (its fields: {known}); rename it "
                                 "with AS or leave it out of the query", option=option)
        problem = None if data_type is None else field_mismatch(
            field, data_type, name, _WRITABLE, _describe, "written")
        if problem is not None:
            raise ConnectorError(problem, option=option)


def _describe(path: str, proto: str, data_type: T.DataType) -> str:
    return (f"field '{path}': a {data_type.simpleString().upper()} cannot be written "
            f"into protobuf type {proto}; CAST the column to a type that fits")


# -- the Confluent header ----------------------------------------------------------


def message_indexes(message: Descriptor) -> list[int]:
    """The path of ``message`` in its ``.proto`` file: the index among the file's
    top-level messages, then among each enclosing message's nested ones."""
    names: list[str] = []
    at: Descriptor | None = message
    while at is not None:
        names.append(at.name)
        at = at.containing_type
    file = descriptor_pb2.FileDescriptorProto.FromString(message.file.serialized_pb)
    indexes: list[int] = []
    siblings = list(file.message_type)
    for name in reversed(names):
        index = next(i for i, m in enumerate(siblings) if m.name == name)
        indexes.append(index)
        siblings = list(siblings[index].nested_type)
    return indexes


def _zigzag(value: int) -> bytes:
    number = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = number & 0x7F
        number >>= 7
        if number:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def confluent_header(schema_id: int, indexes: list[int]) -> bytes:
    """Byte 0, the schema id, then the message indexes (a lone 0 byte for ``[0]``)."""
    if indexes == [0]:
        tail = b"\x00"
    else:
        tail = _zigzag(len(indexes)) + b"".join(_zigzag(i) for i in indexes)
    return HEADER.pack(MAGIC, schema_id) + tail


# -- encoding ----------------------------------------------------------------------


#: (descriptor digest, message name) -> the message class, built once per process
_CLASSES: dict[tuple[bytes, str], Any] = {}


def _message_class(descriptor: bytes, name: str) -> Any:
    key = (hashlib.sha256(descriptor).digest(), name)
    cls = _CLASSES.get(key)
    if cls is None:
        cls = message_factory.GetMessageClass(
            message_descriptor(descriptor, name, PROTOBUF_DESCRIPTOR.name))
        _CLASSES[key] = cls
    return cls


def _micros(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every timestamp an int64 (microseconds since the epoch)."""
    if pa.types.is_timestamp(data_type):
        return pa.int64()
    if pa.types.is_struct(data_type):
        return pa.struct([data_type.field(i).with_type(_micros(data_type.field(i).type))
                          for i in range(data_type.num_fields)])
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        item = data_type.value_field.with_type(_micros(data_type.value_type))
        return pa.large_list(item) if pa.types.is_large_list(data_type) else pa.list_(item)
    return data_type


Convert = Callable[[Any], Any]


def _converter(field: FieldDescriptor, path: str, element: bool = False) -> Convert | None:
    """How a Python value of a column becomes what the message constructor takes for
    ``field`` (None: taken as is)."""
    if field.label == _FD.LABEL_REPEATED and not element:
        inner = _converter(field, path, element=True)

        def repeated(items: list[Any]) -> list[Any]:
            if any(item is None for item in items):
                raise ValueError(f"field '{path}': a repeated protobuf field cannot hold "
                                 "NULL elements")
            return items if inner is None else [inner(item) for item in items]

        return repeated
    if field.message_type is not None:
        if field.message_type.full_name == TIMESTAMP:
            return lambda micros: {"seconds": micros // 1_000_000,
                                   "nanos": micros % 1_000_000 * 1000}
        return _row_converter(field.message_type, path)
    if field.type in (_FD.TYPE_UINT64, _FD.TYPE_FIXED64):
        def whole(value: Any) -> int:
            if isinstance(value, Decimal) and value != value.to_integral_value():
                raise ValueError(f"field '{path}': {value} is not a whole number")
            return int(value)

        return whole
    if field.type in (_FD.TYPE_DOUBLE, _FD.TYPE_FLOAT):
        return float
    return None


def _row_converter(message: Descriptor, path: str) -> Convert:
    """A struct (dict) -> keyword arguments of ``message``'s constructor, NULLs left out."""
    plans: dict[str, Convert | None] = {}

    def convert(row: dict[str, Any]) -> dict[str, Any]:
        kwargs: dict[str, Any] = {}
        for name, value in row.items():
            if value is None:
                continue
            if name not in plans:
                plans[name] = _converter(message.fields_by_name[name], f"{path}.{name}")
            plan = plans[name]
            kwargs[name] = value if plan is None else plan(value)
        return kwargs

    return convert


def encoder(descriptor: bytes, message_name: str, header: bytes) -> Callable[[pa.Array],
                                                                            pa.Array]:
    """A function from an Arrow struct array (one row per element) to protobuf
    records (BINARY), each prefixed by ``header``."""
    state: dict[str, Any] = {}

    def encode(rows: pa.Array) -> pa.Array:
        if "cls" not in state:
            state["cls"] = cls = _message_class(descriptor, message_name)
            fields = cls.DESCRIPTOR.fields_by_name
            state["plans"] = {name: _converter(field, name) for name, field in fields.items()}
        cls, plans = state["cls"], state["plans"]
        rows = rows.cast(_micros(rows.type))
        out: list[bytes | None] = []
        for row in rows.to_pylist():
            if row is None:
                out.append(None)
                continue
            kwargs = {}
            for name, value in row.items():
                if value is not None:
                    plan = plans[name]
                    kwargs[name] = value if plan is None else plan(value)
            try:
                message = cls(**kwargs)
            except (ValueError, TypeError) as error:
                raise ValueError(f"a row cannot be written as {message_name}: {error}") \
                    from None
            out.append(header + message.SerializeToString())
        return pa.array(out, pa.binary())

    return encode


def encoder_udf(descriptor_b64: str, message_name: str, header: bytes) -> Any:
    """A Spark Arrow UDF from a struct column to protobuf records (BINARY)."""
    from pyspark.sql.pandas.functions import arrow_udf

    encode = encoder(base64.b64decode(descriptor_b64), message_name, header)

    def protobuf_records(rows: pa.Array) -> pa.Array:
        return encode(rows)

    return arrow_udf(protobuf_records, T.BinaryType())  # type: ignore[call-overload]
