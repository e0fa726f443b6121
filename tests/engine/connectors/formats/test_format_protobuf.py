"""The protobuf record format: descriptors, type checks, decoding, and a pipeline
through the real Redis (docs/sql/connectors.md#protobuf)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import redis
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message
from grpc_tools import protoc
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError, TableConfig
from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.core.boundary import Boundary
from spate.engine.connectors.formats.avro import frame
from spate.engine.connectors.formats.decoders import Decoded, RecordDecoder
from spate.engine.connectors.formats.protobuf import message_descriptor, strip_header
from spate.engine.connectors.formats.protobuf_writer import (
    confluent_header,
    encoder,
    message_indexes,
)
from spate.engine.connectors.formats.records import FormatSpec, check_sink_schema, record_column
from spate.engine.runtime.reports import EpochReport
from tests.conftest import redis_key_prefix
from tests.engine.harness import run_pipeline

PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
message Order {
  enum Status { NEW = 0; PAID = 1; }
  message Item { string sku = 1; int32 qty = 2; }
  int64 id = 1;
  optional string note = 2;
  Status status = 3;
  repeated Item items = 4;
  google.protobuf.Timestamp at = 5;
  bytes blob = 6;
  repeated string tags = 7;
  double price = 8;
}
message Reading {
  optional int32 small = 1;
  optional int64 big = 2;
  optional double x = 3;
  optional float f = 4;
  optional bool ok = 5;
  optional string s = 6;
  optional bytes b = 7;
  google.protobuf.Timestamp at = 8;
  repeated int64 ns = 9;
  Order.Item item = 10;
  optional uint64 u = 11;
  map<string, int32> counts = 12;
}
"""
ITEM = T.StructType([T.StructField("sku", T.StringType()), T.StructField("qty", T.IntegerType())])
FIELDS = [T.StructField("id", T.LongType(), False), T.StructField("note", T.StringType()),
          T.StructField("status", T.StringType()), T.StructField("items", T.ArrayType(ITEM)),
          T.StructField("at", T.TimestampType()), T.StructField("blob", T.BinaryType()),
          T.StructField("tags", T.ArrayType(T.StringType()))]
COLUMNS = tuple(ColumnDef(f.name, f.dataType, f.nullable) for f in FIELDS)
AT = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC)


@pytest.fixture(scope="module")
def descriptor(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The FileDescriptorSet protoc writes for PROTO (with its imports)."""
    folder = tmp_path_factory.mktemp("proto")
    (folder / "shop.proto").write_text(PROTO)
    out = folder / "shop.desc"
    includes = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    assert protoc.main(["protoc", f"-I{folder}", f"-I{includes}", "--include_imports",
                        f"--descriptor_set_out={out}", str(folder / "shop.proto")]) == 0
    return out.read_bytes()


def _order_class(descriptor: bytes) -> Any:
    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor)
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def _order(descriptor: bytes, i: int, **fields: Any) -> bytes:
    message: Message = _order_class(descriptor)(id=i, **fields)
    return message.SerializeToString()


def _decode(descriptor: bytes, values: list[bytes], wire: bool = False) -> Decoded:
    schema = arrow_schema(T.StructType(FIELDS))
    schema = pa.schema([f.with_nullable(FIELDS[i].nullable) for i, f in enumerate(schema)])
    spec = FormatSpec(kind="protobuf", descriptor=base64.b64encode(descriptor).decode(),
                      message_name="shop.Order", confluent_wire=wire)
    lengths = np.array([len(v) for v in values], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
    buf = np.frombuffer(b"\n".join(values), dtype=np.uint8)
    return RecordDecoder(schema, spec).decode(buf, starts, lengths)


def _rows(decoded: Decoded) -> list[dict[str, Any]]:
    return pa.Table.from_arrays(decoded.columns, names=[f.name for f in FIELDS]).to_pylist()


def test_messages_decode_into_structs_arrays_enums_and_timestamps(descriptor: bytes) -> None:
    cls = _order_class(descriptor)
    full = cls(id=1, note="gift", status=1, items=[cls.Item(sku="a", qty=2)], blob=b"\x00\n",
               tags=["x", "y"])
    full.at.FromDatetime(AT.replace(tzinfo=None))
    decoded = _decode(descriptor, [full.SerializeToString(), _order(descriptor, 2)])
    assert decoded.bad == []
    first, second = _rows(decoded)
    assert first == {"id": 1, "note": "gift", "status": "PAID",
                     "items": [{"sku": "a", "qty": 2}], "at": AT, "blob": b"\x00\n",
                     "tags": ["x", "y"]}
    # Unset fields with presence are NULL; proto3 scalars without it read as their default.
    assert second == {"id": 2, "note": None, "status": "NEW", "items": [], "at": None,
                      "blob": b"", "tags": []}


def test_bad_messages_and_the_confluent_header(descriptor: bytes) -> None:
    good = _order(descriptor, 3)
    # Confluent's header: magic 0, schema id, message indexes (0 alone means [0]).
    framed = frame(4, b"\x00" + good)
    two_indexes = frame(4, b"\x04\x00\x02" + good)  # zig-zag count 2, indexes 0 and 1
    decoded = _decode(descriptor, [framed, b"\x00\x00\x00\x00\x04\x02", two_indexes,
                                   frame(4, b"\x00\xff\xff")], wire=True)
    assert [row["id"] for row in _rows(decoded)] == [3, 3]
    assert [index for index, _ in decoded.bad] == [1, 3]
    assert "message indexes are cut short" in decoded.bad[0][1]
    assert "not a valid shop.Order message" in decoded.bad[1][1]


def _source(columns: tuple[ColumnDef, ...], root: Path | None = None,
            **options: str) -> TableConfig:
    return TableConfig("t", "redis", "source", {
        "type": "source", "address": "redis://127.0.0.1:6379/0", "stream": "s",
        "format": "protobuf", **options}, columns, boundary=Boundary(
            storage_root=None if root is None else str(root)))


def test_descriptors_and_columns_are_checked_at_plan_time(descriptor: bytes,
                                                          tmp_path: Path) -> None:
    inline = base64.b64encode(descriptor).decode()
    (tmp_path / "shop.desc").write_bytes(descriptor)
    ok = _source(COLUMNS, tmp_path, **{"protobuf.descriptor_file": "shop.desc",
                                       "protobuf.message_name": "shop.Order"})
    assert CONNECTORS["redis"].validate(ok) == COLUMNS
    cases = [
        ({}, "exactly one of 'protobuf.descriptor_file'", "protobuf.descriptor_file"),
        ({"protobuf.descriptor": "!!"}, "base64", "protobuf.descriptor"),
        ({"protobuf.descriptor": base64.b64encode(b"\xff\xff").decode(),
          "protobuf.message_name": "x"}, "not a compiled FileDescriptorSet",
         "protobuf.descriptor"),
        ({"protobuf.descriptor": inline, "protobuf.message_name": "shop.Nope"},
         "message 'shop.Nope' is not in the descriptor set .*shop.Order",
         "protobuf.message_name"),
        ({"protobuf.descriptor_file": "../shop.desc", "protobuf.message_name": "shop.Order"},
         "is outside your storage", "protobuf.descriptor_file"),
        ({"protobuf.descriptor_file": "missing.desc", "protobuf.message_name": "shop.Order"},
         "cannot read 'missing.desc'", "protobuf.descriptor_file"),
    ]
    for options, message, option in cases:
        with pytest.raises(ConnectorError, match=message) as caught:
            CONNECTORS["redis"].validate(_source(COLUMNS, tmp_path, **options))
        assert caught.value.option == option
    named = {"protobuf.descriptor": inline, "protobuf.message_name": "shop.Order"}
    for columns, message in [
        ((ColumnDef("nope", T.LongType()),), "column 'nope' is not a field of message"),
        ((ColumnDef("id", T.StringType()),), "field 'id': protobuf type int64 cannot be read "
                                             "as STRING"),
        ((ColumnDef("items", T.ArrayType(T.StructType([T.StructField("qty", T.StringType())]))),),
         "field 'items\\[\\].qty'"),
        ((ColumnDef("at", T.LongType()),), "google.protobuf.Timestamp cannot be read as BIGINT"),
    ]:
        with pytest.raises(ConnectorError, match=message) as caught:
            CONNECTORS["redis"].validate(_source(columns, **named))
        assert caught.value.option == "protobuf.message_name"


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    yield from redis_key_prefix(redis_url)


def test_a_protobuf_pipeline_through_redis(spark: SparkSession, tmp_path: Path,
                                           redis_url: str, prefix: str,
                                           descriptor: bytes) -> None:
    client = redis.Redis.from_url(redis_url)
    cls = _order_class(descriptor)
    for i in range(1, 4):
        order = cls(id=i, status=i % 2, items=[cls.Item(sku=f"s{i}", qty=i)])
        order.at.FromDatetime((AT + dt.timedelta(seconds=i)).replace(tzinfo=None))
        client.xadd(f"{prefix}in", {"value": frame(1, b"\x00" + order.SerializeToString())})
    client.xadd(f"{prefix}in", {"value": b"garbage"})
    inline = base64.b64encode(descriptor).decode()
    sql = (
        "CREATE TABLE orders (id BIGINT NOT NULL, status TEXT, items "
        "ARRAY<STRUCT<sku TEXT, qty INT>>, at TIMESTAMP) WITH (connector = 'redis', "
        "type = 'source', "
        f"address = '{redis_url}', stream = '{prefix}in', format = 'protobuf', "
        f"'protobuf.descriptor' = '{inline}', 'protobuf.message_name' = 'shop.Order', "
        "'protobuf.confluent_wire_format' = 'true', bad_data = 'drop', "
        "'source.offset' = 'earliest');\n"
        f"CREATE TABLE out WITH (connector = 'redis', type = 'sink', address = '{redis_url}', "
        f"format = 'json', target = 'list', 'target.key_prefix' = '{prefix}out');\n"
        f"CREATE TABLE pout WITH (connector = 'redis', type = 'sink', address = '{redis_url}', "
        f"format = 'protobuf', 'protobuf.descriptor' = '{inline}', "
        "'protobuf.message_name' = 'shop.Order', 'protobuf.confluent_wire_format' = 'true', "
        f"'protobuf.schema_id' = '3', target = 'list', 'target.key_prefix' = '{prefix}pout');\n"
        "INSERT INTO out SELECT id, status, items[1].sku AS sku FROM orders;\n"
        "INSERT INTO pout SELECT id * 10 AS id, CASE WHEN id = 2 THEN NULL ELSE status END "
        "AS status, items, at FROM orders;\n")
    reports: list[EpochReport] = []
    run_pipeline(spark, sql, tmp_path, timeout_s=120, reports=reports,
                 stop_when=lambda: client.llen(f"{prefix}out") >= 3
                 and client.llen(f"{prefix}pout") >= 3)
    rows = sorted((json.loads(v) for v in client.lrange(f"{prefix}out", 0, -1)),
                  key=lambda r: r["id"])
    assert rows == [{"id": 1, "status": "PAID", "sku": "s1"},
                    {"id": 2, "status": "NEW", "sku": "s2"},
                    {"id": 3, "status": "PAID", "sku": "s3"}]
    assert sum(report.rows_dropped for report in reports) == 1
    # The protobuf sink's records, read back with the protobuf runtime.
    written = client.lrange(f"{prefix}pout", 0, -1)
    assert {record[:6] for record in written} == {b"\x00\x00\x00\x00\x03\x00"}
    orders = sorted((cls.FromString(strip_header(record)) for record in written),
                    key=lambda order: order.id)
    assert [(o.id, o.status, [(i.sku, i.qty) for i in o.items], o.at.ToDatetime(dt.UTC))
            for o in orders] == [(i * 10, i % 2 if i != 2 else 0, [(f"s{i}", i)],
                                  AT + dt.timedelta(seconds=i)) for i in range(1, 4)]
    client.close()


# -- sinks ---------------------------------------------------------------------------

READING = [T.StructField("small", T.IntegerType()), T.StructField("big", T.LongType()),
           T.StructField("x", T.DoubleType()), T.StructField("f", T.FloatType()),
           T.StructField("ok", T.BooleanType()), T.StructField("s", T.StringType()),
           T.StructField("b", T.BinaryType()), T.StructField("at", T.TimestampType()),
           T.StructField("ns", T.ArrayType(T.LongType())), T.StructField("item", ITEM),
           T.StructField("u", T.DecimalType(20, 0))]
_UTC_TIMES = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1),
                          timezones=st.just(dt.UTC))
_READINGS = st.fixed_dictionaries({
    "small": st.none() | st.integers(-2**31, 2**31 - 1),
    "big": st.none() | st.integers(-2**63, 2**63 - 1),
    "x": st.none() | st.floats(allow_nan=False),
    "f": st.none() | st.floats(width=32, allow_nan=False),
    "ok": st.none() | st.booleans(),
    "s": st.none() | st.text(),
    "b": st.none() | st.binary(),
    "at": st.none() | _UTC_TIMES,
    "ns": st.none() | st.lists(st.integers(-2**63, 2**63 - 1), max_size=3),
    "item": st.none() | st.fixed_dictionaries({"sku": st.text(max_size=5),
                                               "qty": st.integers(-2**31, 2**31 - 1)}),
    "u": st.none() | st.integers(0, 2**64 - 1).map(Decimal),
})


def _spec(descriptor: bytes, name: str, wire: bool = False, schema_id: int | None = None
          ) -> FormatSpec:
    return FormatSpec(kind="protobuf", descriptor=base64.b64encode(descriptor).decode(),
                      message_name=name, confluent_wire=wire, schema_id=schema_id)


def _decode_as(descriptor: bytes, fields: list[T.StructField], name: str,
               values: list[bytes], wire: bool = False) -> list[dict[str, Any]]:
    schema = arrow_schema(T.StructType(fields))
    schema = pa.schema([f.with_nullable(fields[i].nullable) for i, f in enumerate(schema)])
    lengths = np.array([len(v) for v in values], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
    buf = np.frombuffer(b"\n".join(values), dtype=np.uint8)
    decoded = RecordDecoder(schema, _spec(descriptor, name, wire)).decode(buf, starts, lengths)
    assert decoded.bad == []
    return pa.Table.from_arrays(decoded.columns, names=[f.name for f in fields]).to_pylist()


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(_READINGS, min_size=1, max_size=5))
def test_encoded_batches_decode_into_the_same_rows(descriptor: bytes,
                                                   rows: list[dict[str, Any]]) -> None:
    schema = arrow_schema(T.StructType(READING))
    batch = pa.StructArray.from_arrays(
        [pa.array([r[f.name] for r in rows], f.type) for f in schema], fields=list(schema))
    records = encoder(descriptor, "shop.Reading", b"")(batch).to_pylist()
    decoded = _decode_as(descriptor, READING, "shop.Reading", records)
    # NULL leaves a field unset: NULL again where the field has presence; an unset
    # repeated field reads as an empty array.
    expected = [{**r, "ns": r["ns"] or []} for r in rows]
    assert decoded == expected


def test_orders_encode_symmetrically_and_carry_the_confluent_header(descriptor: bytes) -> None:
    fields = [*FIELDS, T.StructField("price", T.DoubleType())]
    schema = arrow_schema(T.StructType(fields))
    rows = [{"id": 1, "note": "gift", "status": "PAID", "items": [{"sku": "a", "qty": 2},
             {"sku": "b", "qty": 3}], "at": AT, "blob": b"\x00\n", "tags": ["x", "y"],
             "price": 2.5},
            {"id": 2, "note": None, "status": None, "items": None, "at": None, "blob": None,
             "tags": None, "price": None}]
    batch = pa.StructArray.from_arrays(
        [pa.array([r[f.name] for r in rows], f.type) for f in schema], fields=list(schema))
    plain = encoder(descriptor, "shop.Order", b"")(batch).to_pylist()
    # Read back by the source's decoder: unset proto3 scalars read as their defaults.
    assert _decode_as(descriptor, fields, "shop.Order", plain) == [
        rows[0], {"id": 2, "note": None, "status": "NEW", "items": [], "at": None,
                  "blob": b"", "tags": [], "price": 0.0}]
    # Confluent's header: byte 0, the schema id, message indexes (a lone 0 for the first
    # message of the file; count 1 and index 1 for the second).
    header = confluent_header(7, message_indexes(_message(descriptor, "shop.Order")))
    framed = encoder(descriptor, "shop.Order", header)(batch).to_pylist()
    assert framed[0][:6] == b"\x00\x00\x00\x00\x07\x00"
    assert _decode_as(descriptor, fields, "shop.Order", framed, wire=True)[0] == rows[0]
    item = _message(descriptor, "shop.Order.Item")
    assert message_indexes(_message(descriptor, "shop.Reading")) == [1]
    assert message_indexes(item) == [0, 0]
    assert confluent_header(8, [1]) == b"\x00\x00\x00\x00\x08\x02\x02"
    with pytest.raises(ValueError, match="'ns': a repeated protobuf field cannot hold NULL"):
        encoder(descriptor, "shop.Reading", b"")(pa.array([{"ns": [1, None]}]))


def _message(descriptor: bytes, name: str) -> Any:
    return message_descriptor(descriptor, name, "protobuf.descriptor")


def _reading_class(descriptor: bytes) -> Any:
    files = descriptor_pb2.FileDescriptorSet.FromString(descriptor)
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Reading"))


def _sink(columns: tuple[ColumnDef, ...], **options: str) -> TableConfig:
    return TableConfig("o", "redis", "sink", {
        "type": "sink", "address": "redis://127.0.0.1:6379/0", "target": "list",
        "target.key_prefix": "k", "format": "protobuf", **options}, columns)


def test_sink_columns_and_options_are_checked_at_plan_time(spark: SparkSession,
                                                           descriptor: bytes) -> None:
    named = {"protobuf.descriptor": base64.b64encode(descriptor).decode(),
             "protobuf.message_name": "shop.Order"}
    assert CONNECTORS["redis"].validate(_sink(COLUMNS, **named)) == COLUMNS
    for columns, message in [
        ((ColumnDef("nope", T.LongType()),), "column 'nope' is not a field of message "
                                             "'shop.Order' .*rename it with AS"),
        ((ColumnDef("id", T.StringType()),), "a STRING cannot be written into protobuf "
                                             "type int64; CAST"),
        ((ColumnDef("items", T.ArrayType(T.StructType([T.StructField("qty", T.LongType())]))),),
         "field 'items\\[\\].qty': a BIGINT cannot be written into protobuf type int32"),
        ((ColumnDef("at", T.LongType()),), "into protobuf type google.protobuf.Timestamp"),
        ((ColumnDef("tags", T.StringType()),), "into protobuf type repeated string"),
    ]:
        with pytest.raises(ConnectorError, match=message) as caught:
            CONNECTORS["redis"].validate(_sink(columns, **named))
        assert caught.value.option == "protobuf.message_name"
    for options, message, option in [
        ({"protobuf.confluent_wire_format": "true"}, "needs option 'protobuf.schema_id'",
         "protobuf.schema_id"),
        ({"protobuf.schema_id": "3"}, "set 'protobuf.confluent_wire_format'",
         "protobuf.schema_id"),
    ]:
        with pytest.raises(ConnectorError, match=message) as caught:
            CONNECTORS["redis"].validate(_sink((), **named, **options))
        assert caught.value.option == option
    with pytest.raises(ConnectorError, match="applies to sinks only") as caught:
        CONNECTORS["redis"].validate(_source(COLUMNS, **named, **{"protobuf.schema_id": "1"}))
    # A sink without declared columns: the names of the query's columns are checked when
    # it opens, their types when an epoch is encoded.
    spec = _spec(descriptor, "shop.Reading")
    check_sink_schema(spec, T.StructType([T.StructField("small", T.StringType())]))
    with pytest.raises(ConnectorError, match="column 'nope' is not a field of message"):
        check_sink_schema(spec, T.StructType([T.StructField("nope", T.StringType())]))
    for fields, message in [
        ([T.StructField("small", T.LongType())], "'small': a BIGINT cannot be written into "
                                                 "protobuf type int32"),
        ([T.StructField("counts", T.StringType())], "protobuf maps cannot be written yet"),
        ([T.StructField("item", T.StructType([T.StructField("nope", T.LongType())]))],
         "field 'item.nope' is not in message 'shop.Order.Item'"),
    ]:
        with pytest.raises(ConnectorError, match=message):
            record_column(spark.createDataFrame([], T.StructType(fields)), spec)
