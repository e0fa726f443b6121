"""The protobuf record format: descriptors, type checks, decoding, and a pipeline
through the real Redis (docs/sql/connectors.md#protobuf)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
import redis
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message
from grpc_tools import protoc
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError, TableConfig
from spate.engine.connectors.arrow_batches import arrow_schema
from spate.engine.connectors.avro_format import frame
from spate.engine.connectors.boundary import Boundary
from spate.engine.connectors.decoders import Decoded, RecordDecoder
from spate.engine.connectors.formats import FormatSpec
from spate.engine.runtime.runner import EpochReport
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
    sink = TableConfig("o", "redis", "sink", {"type": "sink", "address": "redis://h",
                                              "format": "protobuf", "target": "list",
                                              "target.key_prefix": "k"}, ())
    with pytest.raises(ConnectorError, match="supported by sources only"):
        CONNECTORS["redis"].validate(sink)


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
        client.xadd(f"{prefix}in", {"value": frame(1, b"\x00" + order.SerializeToString())})
    client.xadd(f"{prefix}in", {"value": b"garbage"})
    inline = base64.b64encode(descriptor).decode()
    sql = (
        "CREATE TABLE orders (id BIGINT NOT NULL, status TEXT, items "
        "ARRAY<STRUCT<sku TEXT, qty INT>>) WITH (connector = 'redis', type = 'source', "
        f"address = '{redis_url}', stream = '{prefix}in', format = 'protobuf', "
        f"'protobuf.descriptor' = '{inline}', 'protobuf.message_name' = 'shop.Order', "
        "'protobuf.confluent_wire_format' = 'true', bad_data = 'drop', "
        "'source.offset' = 'earliest');\n"
        f"CREATE TABLE out WITH (connector = 'redis', type = 'sink', address = '{redis_url}', "
        f"format = 'json', target = 'list', 'target.key_prefix' = '{prefix}out');\n"
        "INSERT INTO out SELECT id, status, items[1].sku AS sku FROM orders;\n")
    reports: list[EpochReport] = []
    run_pipeline(spark, sql, tmp_path, timeout_s=120, reports=reports,
                 stop_when=lambda: client.llen(f"{prefix}out") >= 3)
    rows = sorted((json.loads(v) for v in client.lrange(f"{prefix}out", 0, -1)),
                  key=lambda r: r["id"])
    assert rows == [{"id": 1, "status": "PAID", "sku": "s1"},
                    {"id": 2, "status": "NEW", "sku": "s2"},
                    {"id": 3, "status": "PAID", "sku": "s3"}]
    assert sum(report.rows_dropped for report in reports) == 1
    client.close()
