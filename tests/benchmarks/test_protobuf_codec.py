"""What encoding rows as protobuf costs per core, against decoding them and Avro.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_protobuf_codec.py -s``

One Arrow batch of order rows (an id, an optional note, an enum, two nested
items, a timestamp, a double) is encoded by the protobuf sink's encoder (what
its Arrow UDF runs per batch on an executor), decoded back by the protobuf
source's decoder, and, for scale, encoded by the avro sink's encoder with the
schema a sink derives from the same columns. No Spark: the figure is the
format's own cost per core, best of five. Written to ``results.json`` under
``protobuf_codec``; nothing is asserted.
"""

from __future__ import annotations

import datetime as dt
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from grpc_tools import protoc
from pyspark.sql import types as T

from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.formats import avro as avro_format
from spate.engine.connectors.formats.protobuf import ProtobufDecoder
from spate.engine.connectors.formats.protobuf_writer import encoder
from tests.benchmarks.workloads import save_result

pytestmark = [pytest.mark.benchmark]

ROWS = 100_000
PROTO = """
syntax = "proto3";
package bench;
import "google/protobuf/timestamp.proto";
message Order {
  enum Status { NEW = 0; PAID = 1; }
  message Item { string sku = 1; int32 qty = 2; }
  int64 id = 1;
  optional string note = 2;
  Status status = 3;
  repeated Item items = 4;
  google.protobuf.Timestamp at = 5;
  double price = 6;
}
"""
ITEM = T.StructType([T.StructField("sku", T.StringType()), T.StructField("qty", T.IntegerType())])
SCHEMA = T.StructType([
    T.StructField("id", T.LongType()), T.StructField("note", T.StringType()),
    T.StructField("status", T.StringType()), T.StructField("items", T.ArrayType(ITEM)),
    T.StructField("at", T.TimestampType()), T.StructField("price", T.DoubleType())])


def _descriptor() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "bench.proto").write_text(PROTO)
        out = Path(folder) / "bench.desc"
        includes = os.path.join(os.path.dirname(protoc.__file__), "_proto")
        assert protoc.main(["protoc", f"-I{folder}", f"-I{includes}", "--include_imports",
                            f"--descriptor_set_out={out}", str(Path(folder) / "bench.proto")]) == 0
        return out.read_bytes()


def _batch() -> pa.StructArray:
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    rows = [{"id": i, "note": None if i % 3 else f"note {i}", "status": "PAID" if i % 2 else "NEW",
             "items": [{"sku": f"sku-{i % 97}", "qty": i % 5}, {"sku": "x", "qty": 1}],
             "at": start + dt.timedelta(microseconds=i * 1001), "price": i / 7}
            for i in range(ROWS)]
    schema = arrow_schema(SCHEMA)
    return pa.StructArray.from_arrays([pa.array([r[f.name] for r in rows], f.type)
                                       for f in schema], fields=list(schema))


def _best(run: Callable[[], object]) -> float:
    times = []
    for _ in range(5):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times)


def test_protobuf_encoding_against_decoding_and_avro() -> None:
    descriptor = _descriptor()
    batch = _batch()
    encode = encoder(descriptor, "bench.Order", b"")
    records = encode(batch).to_pylist()
    decoder = ProtobufDecoder(arrow_schema(SCHEMA), descriptor, "bench.Order", False)
    avro = avro_format.encoder(avro_format.schema_for(SCHEMA, "order"), None)
    figures = {
        "rows": ROWS,
        "bytes_per_record": float(np.mean([len(r) for r in records])),
        "protobuf_encode_rows_per_s": ROWS / _best(lambda: encode(batch)),
        "protobuf_decode_rows_per_s": ROWS / _best(lambda: decoder.decode(records)),
        "avro_encode_rows_per_s": ROWS / _best(lambda: avro(batch)),
    }
    print(figures)
    save_result("protobuf_codec", figures)
