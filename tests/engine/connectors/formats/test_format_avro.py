"""The avro and raw_bytes record formats: options, decoding, encoding, and a pipeline
through the real Redis (docs/sql/connectors.md#formats)."""

from __future__ import annotations

import datetime as dt
import io
import json
from collections.abc import Iterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
import redis
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError, TableConfig
from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.core.boundary import Boundary
from spate.engine.connectors.core.egress import EgressPolicy
from spate.engine.connectors.formats.avro import AvroDecoder, frame, schema_for, unframe
from spate.engine.connectors.formats.decoders import Decoded, RecordDecoder
from spate.engine.connectors.formats.records import FormatSpec, encode_records, record_column
from spate.engine.connectors.kafka.connector import parse_table as parse_kafka
from spate.engine.connectors.rabbitmq.settings import read_settings as read_rabbitmq
from spate.engine.runtime.reports import EpochReport
from tests.conftest import redis_key_prefix
from tests.engine.harness import run_pipeline

SCHEMA: dict[str, Any] = {
    "type": "record", "name": "Event", "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal",
                                   "precision": 10, "scale": 2}},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["A", "B"]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "where", "type": {"type": "record", "name": "Where", "fields": [
            {"name": "lat", "type": "double"}, {"name": "tag", "type": "bytes"}]}},
        {"name": "ignored", "type": "int", "default": 0},
    ]}
FIELDS = [T.StructField("id", T.LongType(), False), T.StructField("name", T.StringType()),
          T.StructField("ts", T.TimestampType()), T.StructField("day", T.DateType()),
          T.StructField("price", T.DecimalType(10, 2)), T.StructField("kind", T.StringType()),
          T.StructField("tags", T.ArrayType(T.StringType())),
          T.StructField("where", T.StructType([T.StructField("lat", T.DoubleType()),
                                               T.StructField("tag", T.BinaryType())]))]
COLUMNS = tuple(ColumnDef(f.name, f.dataType, f.nullable) for f in FIELDS)
TS = dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC)


def _datum(i: int, **changes: Any) -> dict[str, Any]:
    return {"id": i, "name": f"n{i}", "ts": TS, "day": dt.date(2024, 5, 6),
            "price": Decimal("12.34"), "kind": "B", "tags": ["x", "y"],
            "where": {"lat": 1.5, "tag": b"\x00\xff"}, "ignored": 7, **changes}


def _avro(datum: dict[str, Any], schema: dict[str, Any] = SCHEMA) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), datum)
    return out.getvalue()


def _decode(values: list[bytes], **spec: Any) -> Decoded:
    schema = arrow_schema(T.StructType(FIELDS))
    schema = pa.schema([f.with_nullable(FIELDS[i].nullable) for i, f in enumerate(schema)])
    decoder = RecordDecoder(schema, FormatSpec(**{"kind": "avro",
                                                  "avro_schema": json.dumps(SCHEMA), **spec}))
    lengths = np.array([len(v) for v in values], dtype=np.int64)
    starts = np.concatenate(([0], np.cumsum(lengths + 1)[:-1])).astype(np.int64)
    buf = np.frombuffer(b"\n".join(values), dtype=np.uint8)
    return decoder.decode(buf, starts, lengths)


def _rows(decoded: Decoded) -> list[dict[str, Any]]:
    return pa.Table.from_arrays(decoded.columns, names=[f.name for f in FIELDS]).to_pylist()


def test_avro_records_decode_into_the_declared_columns() -> None:
    decoded = _decode([_avro(_datum(1)), _avro(_datum(2, name=None, tags=[]))])
    assert decoded.bad == []
    first, second = _rows(decoded)
    assert first == {"id": 1, "name": "n1", "ts": TS, "day": dt.date(2024, 5, 6),
                     "price": Decimal("12.34"), "kind": "B", "tags": ["x", "y"],
                     "where": {"lat": 1.5, "tag": b"\x00\xff"}}
    assert (second["name"], second["tags"]) == (None, [])


def test_bad_avro_records_are_isolated_and_the_good_ones_kept() -> None:
    good = _avro(_datum(1))
    decoded = _decode([good, good[:5], good + b"\x01", _avro(_datum(4))])
    assert [row["id"] for row in _rows(decoded)] == [1, 4]
    assert [index for index, _ in decoded.bad] == [1, 2]
    assert "not a valid Avro record" in decoded.bad[0][1]
    assert "bytes left after the Avro datum" in decoded.bad[1][1]
    assert decoded.lines is not None and decoded.lines.tolist() == [0, 3]


def test_the_confluent_wire_format_is_read_and_checked() -> None:
    body = _avro(_datum(9))
    assert unframe(frame(42, body)) == (42, body)
    decoded = _decode([frame(42, body), b"\x01\x00\x00\x00\x2a" + body, b"\x00\x00"],
                      confluent_wire=True)
    assert [row["id"] for row in _rows(decoded)] == [9]
    assert "magic byte 0 (found 1)" in decoded.bad[0][1]
    assert "too short for the Confluent wire format" in decoded.bad[1][1]


def _source(columns: tuple[ColumnDef, ...] = COLUMNS, **options: str) -> TableConfig:
    return TableConfig("t", "redis", "source", {
        "type": "source", "address": "redis://127.0.0.1:6379/0", "stream": "s",
        "format": "avro", **options}, columns)


@pytest.mark.parametrize(("columns", "options", "message", "option"), [
    (COLUMNS, {}, "needs its writer schema", "avro.schema"),
    (COLUMNS, {"avro.schema": "{"}, "is not valid JSON", "avro.schema"),
    (COLUMNS, {"avro.schema": '"long"'}, "of type 'record'", "avro.schema"),
    ((ColumnDef("missing", T.LongType()),), {"avro.schema": json.dumps(SCHEMA)},
     "column 'missing' is not a field of the Avro schema", "avro.schema"),
    ((ColumnDef("name", T.LongType()),), {"avro.schema": json.dumps(SCHEMA)},
     "field 'name': Avro type .* cannot be read as BIGINT", "avro.schema"),
    ((ColumnDef("where", T.StructType([T.StructField("lat", T.StringType())])),),
     {"avro.schema": json.dumps(SCHEMA)}, "field 'where.lat'", "avro.schema"),
    (COLUMNS, {"avro.confluent_schema_registry": "true"}, "needs option "
     "'schema_registry.endpoint'", "schema_registry.endpoint"),
    (COLUMNS, {"avro.confluent_schema_registry": "true", "schema_registry.endpoint": "x"},
     "must be an http", "schema_registry.endpoint"),
    (COLUMNS, {"avro.confluent_schema_registry": "true",
               "schema_registry.endpoint": "http://h", "schema_registry.api_key": "k"},
     "'schema_registry.api_secret' is needed too", "schema_registry.api_secret"),
    (COLUMNS, {"avro.schema": json.dumps(SCHEMA), "schema_registry.endpoint": "http://h"},
     "needs avro.confluent_schema_registry", "schema_registry.endpoint"),
    (COLUMNS, {"avro.schema": json.dumps(SCHEMA), "avro.schema_id": "3"},
     "applies to sinks only", "avro.schema_id"),
])
def test_avro_options_are_checked_at_plan_time(columns: tuple[ColumnDef, ...],
                                               options: dict[str, str], message: str,
                                               option: str) -> None:
    with pytest.raises(ConnectorError, match=message) as caught:
        CONNECTORS["redis"].validate(_source(columns, **options))
    assert caught.value.option == option


def test_every_registry_of_a_list_passes_the_egress_policy() -> None:
    """The registry client tries each URL of a comma-separated list: each is checked."""
    allowed, refused = "http://127.0.0.1:8081", "http://127.0.0.1:9"
    boundary = Boundary(storage_root="/", egress=EgressPolicy.from_config(
        ["127.0.0.1:6379", "127.0.0.1:8081"], []))
    registry = {"avro.confluent_schema_registry": "true"}

    def table(endpoint: str) -> TableConfig:
        return replace(_source(**registry, **{"schema_registry.endpoint": endpoint}),
                       boundary=boundary)

    CONNECTORS["redis"].validate(table(allowed))
    with pytest.raises(ConnectorError, match="cannot connect to 127.0.0.1:9") as caught:
        CONNECTORS["redis"].validate(table(f"{allowed}, {refused}"))
    assert caught.value.option == "schema_registry.endpoint"


def test_avro_options_need_format_avro_and_raw_bytes_needs_a_bytea_value() -> None:
    with pytest.raises(ConnectorError, match="applies to format 'avro' only") as caught:
        CONNECTORS["redis"].validate(_source((ColumnDef("value", T.StringType()),),
                                             format="raw_string", **{"avro.schema": "{}"}))
    assert caught.value.option == "avro.schema"
    with pytest.raises(ConnectorError, match="exactly one column `value BYTEA`"):
        CONNECTORS["redis"].validate(_source((ColumnDef("value", T.StringType()),),
                                             format="raw_bytes"))
    with pytest.raises(ConnectorError, match="binary and cannot be framed by newlines"):
        CONNECTORS["stdout"].validate(TableConfig("o", "stdout", "sink",
                                                  {"format": "raw_bytes"}, ()))


def test_avro_sink_records_round_trip_with_and_without_the_header(spark: SparkSession) -> None:
    rows = [(1, "n1", TS, dt.date(2024, 5, 6), Decimal("12.34"), "B", ["x"],
             (1.5, b"\x00\xff")), (2, None, None, None, None, None, None, None)]
    df = spark.createDataFrame(rows, T.StructType(FIELDS))
    inline = FormatSpec(kind="avro", avro_schema=json.dumps(
        {**SCHEMA, "fields": [{**f, "type": ["null", f["type"]]} if f["name"] != "id" else f
                              for f in SCHEMA["fields"] if f["name"] != "ignored"]}))
    framed = FormatSpec(kind="avro", confluent_wire=True, schema_id=7)  # schema from columns
    out = df.select(record_column(df, inline).alias("a"),
                    record_column(df, framed).alias("b")).collect()
    reader = fastavro.parse_schema(json.loads(inline.avro_schema or ""))
    first = fastavro.schemaless_reader(io.BytesIO(out[0]["a"]), reader, None)
    assert first == {"id": 1, "name": "n1", "ts": TS, "day": dt.date(2024, 5, 6),
                     "price": Decimal("12.34"), "kind": "B", "tags": ["x"],
                     "where": {"lat": 1.5, "tag": b"\x00\xff"}}
    schema_id, body = unframe(out[1]["b"])
    assert schema_id == 7
    # Read with the schema a sink derives from its columns.
    second = fastavro.schemaless_reader(io.BytesIO(body),
                                        fastavro.parse_schema(schema_for(df.schema)), None)
    assert second["id"] == 2 and second["name"] is None and second["where"] is None
    # A message sink's key column rides beside the binary record.
    keyed = encode_records(df, framed, "id").collect()
    assert [row["key"] for row in keyed] == ["1", "2"]
    assert [unframe(row["record"])[0] for row in keyed] == [7, 7]


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    yield from redis_key_prefix(redis_url)


def test_avro_and_raw_bytes_pipelines_through_redis(spark: SparkSession, tmp_path: Path,
                                                    redis_url: str, prefix: str) -> None:
    client = redis.Redis.from_url(redis_url)
    small = {"type": "record", "name": "E", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"]}]}
    for i in range(1, 4):
        client.xadd(f"{prefix}avro", {"value": frame(5, _avro({"id": i, "name": f"n{i}"},
                                                               small))})
    client.xadd(f"{prefix}avro", {"value": b"\x00\x00\x00\x00\x05\xff"})  # a bad record
    for blob in (b"\x00\xff\n\r", b"", b"plain"):
        client.xadd(f"{prefix}raw", {"value": blob})
    schema = json.dumps(small).replace("'", "''")
    sql = (
        f"CREATE TABLE events (id BIGINT NOT NULL, name TEXT) WITH (connector = 'redis', "
        f"type = 'source', address = '{redis_url}', stream = '{prefix}avro', format = 'avro', "
        f"'avro.schema' = '{schema}', 'avro.confluent_wire_format' = 'true', "
        "bad_data = 'drop', 'source.offset' = 'earliest');\n"
        f"CREATE TABLE blobs (value BYTEA) WITH (connector = 'redis', type = 'source', "
        f"address = '{redis_url}', stream = '{prefix}raw', format = 'raw_bytes', "
        "'source.offset' = 'earliest');\n"
        f"CREATE TABLE out WITH (connector = 'redis', type = 'sink', address = '{redis_url}', "
        f"format = 'avro', 'avro.confluent_wire_format' = 'true', 'avro.schema_id' = '9', "
        f"target = 'list', 'target.key_prefix' = '{prefix}out');\n"
        f"CREATE TABLE copies WITH (connector = 'redis', type = 'sink', "
        f"address = '{redis_url}', format = 'raw_bytes', target = 'list', "
        f"'target.key_prefix' = '{prefix}copies');\n"
        "INSERT INTO out SELECT id * 10 AS id, upper(name) AS name FROM events;\n"
        "INSERT INTO copies SELECT value FROM blobs;\n")
    reports: list[EpochReport] = []
    run_pipeline(spark, sql, tmp_path, timeout_s=120, reports=reports,
                            stop_when=lambda: client.llen(f"{prefix}out") >= 3
                            and client.llen(f"{prefix}copies") >= 3)
    records = [unframe(v) for v in client.lrange(f"{prefix}out", 0, -1)]
    assert {schema_id for schema_id, _ in records} == {9}
    writer = fastavro.parse_schema({"type": "record", "name": "out", "fields": [
        {"name": "id", "type": ["null", "long"]}, {"name": "name", "type": ["null", "string"]}]})
    decoded = [fastavro.schemaless_reader(io.BytesIO(body), writer, None)
               for _, body in records]
    assert sorted((d["id"], d["name"]) for d in decoded) == [(10, "N1"), (20, "N2"),
                                                             (30, "N3")]
    assert client.lrange(f"{prefix}copies", 0, -1) == [b"\x00\xff\n\r", b"", b"plain"]
    assert sum(report.rows_dropped for report in reports) == 1  # the undecodable record
    client.close()


def test_a_writer_schema_that_does_not_fit_the_columns_makes_bad_records() -> None:
    # What a registry may serve: here `name` is a long while its column is TEXT.
    writer = {"type": "record", "name": "E", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": ["null", "long"]}]}
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("name", pa.string())])
    decoder = AvroDecoder(schema, writer, wire=False, registry=None)
    columns, good, bad = decoder.decode([_avro({"id": 1, "name": None}, writer),
                                         _avro({"id": 2, "name": 7}, writer)])
    assert good == [0] and columns[0].to_pylist() == [1] and columns[1].to_pylist() == [None]
    assert bad[0][0] == 1 and "field 'name'" in bad[0][1]


def test_registry_credentials_travel_in_an_option_spark_redacts() -> None:
    from spate.engine.connectors.core.streaming import (
        CONFIG_OPTION,
        FORMAT_SECRET_OPTION,
        SpateDataSource,
        source_options,
    )

    registry = {"endpoint": "http://registry:8081", "api_key": "k", "api_secret": "hunter2"}
    spec = FormatSpec(kind="avro", confluent_wire=True, registry=registry)
    options = source_options(T.StructType(FIELDS[:1]), {"table": "t", "format": spec.to_dict()})
    assert "hunter2" not in options[CONFIG_OPTION] and "secret" in FORMAT_SECRET_OPTION
    assert "hunter2" not in repr(spec)

    class Source(SpateDataSource):
        pass

    assert Source(options).settings()["format"]["registry"] == registry



def _sink_spec(table: TableConfig) -> FormatSpec:
    """The format a sink table parses to."""
    if table.connector == "kafka":
        return parse_kafka(table).spec
    if table.connector == "rabbitmq":
        return read_rabbitmq(table, frozenset({"sink"})).spec
    return CONNECTORS[table.connector]._parse(table).spec  # type: ignore[attr-defined]


@pytest.mark.parametrize(("connector", "options", "subject"), [
    ("kafka", {"type": "sink", "bootstrap_servers": "h:9092", "topic": "orders"},
     "orders-value"),
    ("rabbitmq", {"type": "sink", "host": "h", "stream": "payments"}, "payments-value"),
    # No option says where the records are: the table's name stands for the topic.
    ("kinesis", {"type": "sink", "stream_name": "s", "aws_region": "us-east-1",
                 "aws_access_key_id": "k", "aws_secret_access_key": "s"}, "t-value"),
])
def test_a_registry_sinks_subject_follows_the_topic_name_strategy(
        connector: str, options: dict[str, str], subject: str) -> None:
    options = {**options, "format": "avro", "avro.confluent_schema_registry": "true",
               "schema_registry.endpoint": "http://h"}
    assert _sink_spec(TableConfig("t", connector, "sink", options, COLUMNS)).subject == subject
    named = {**options, "value.subject": "mine"}
    assert _sink_spec(TableConfig("t", connector, "sink", named, COLUMNS)).subject == "mine"
