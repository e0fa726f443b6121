"""The debezium_json format: options, envelope decoding, change encoding, preview."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import (
    CONNECTORS,
    HIDDEN_CONTROL,
    ColumnDef,
    ConnectorError,
    TableConfig,
)
from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.core.base import RETRACT, ROW_KEY
from spate.engine.connectors.core.changes import change_records, change_rows
from spate.engine.connectors.core.options import OptionReader
from spate.engine.connectors.formats.decoders import Decoded, RecordDecoder, split_lines
from spate.engine.connectors.formats.records import (
    FormatSpec,
    encoded_lines,
    parse_format,
    source_schema,
)
from tests.engine.connectors.support import make_table, run_stream
from tests.engine.harness import run_pipeline

COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("name", T.StringType()),
           ColumnDef("at", T.TimestampType()), ColumnDef("price", T.DecimalType(10, 2)))
UTC = dt.UTC


def _source(path: Path | str = "x", columns: tuple[ColumnDef, ...] = COLUMNS,
            primary_key: tuple[str, ...] = ("id",), **options: Any) -> TableConfig:
    table = make_table("single_file", "source", columns, type="source", path=str(path),
                       format="debezium_json", **options)
    return dataclasses.replace(table, primary_key=primary_key)


def _error(table: TableConfig) -> ConnectorError:
    with pytest.raises(ConnectorError) as caught:
        CONNECTORS[table.connector].validate(table)
    return caught.value


def _java_bytes(unscaled: int) -> bytes:
    """BigInteger.toByteArray: the shortest big-endian two's complement."""
    length = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
    return unscaled.to_bytes(length, "big", signed=True)


def _b64(unscaled: int) -> str:
    return base64.b64encode(_java_bytes(unscaled)).decode()


# -- options ------------------------------------------------------------------------


def test_defaults_are_unix_millis_and_bytes() -> None:
    spec = parse_format(OptionReader(_source()), "source")
    assert (spec.kind, spec.timestamp_format, spec.decimal_encoding) == \
        ("debezium_json", "unix_millis", "bytes")
    assert spec.updating
    chosen = parse_format(OptionReader(_source(json__timestamp_format="rfc3339",
                                               json__decimal_encoding="number")), "source")
    assert (chosen.timestamp_format, chosen.decimal_encoding) == ("rfc3339", "number")
    plain = parse_format(OptionReader(make_table("stdout", "sink", format="json",
                                                 json__decimal_encoding="bytes")), "sink")
    assert (plain.timestamp_format, plain.decimal_encoding, plain.updating) == \
        ("rfc3339", "bytes", False)


def test_source_rules() -> None:
    assert CONNECTORS["single_file"].validate(_source()) == COLUMNS
    missing = _error(_source(primary_key=()))
    assert "PRIMARY KEY" in str(missing) and missing.option == "format"
    event_time = _error(_source(event_time_field="at"))
    assert event_time.option == "event_time_field" and event_time.at_key
    unstructured = _error(_source(json__unstructured=True))
    assert unstructured.option == "json.unstructured"
    no_columns = _error(_source(columns=()))
    assert "debezium_json source needs its columns" in str(no_columns)
    sink = make_table("single_file", "sink", type="sink", path="x", format="debezium_json")
    assert CONNECTORS["single_file"].validate(sink) == ()  # sinks need no key


def test_source_schema_puts_retract_before_the_hidden_columns() -> None:
    spec = FormatSpec("debezium_json")
    names = source_schema(spec, COLUMNS).names
    assert names[:5] == ["id", "name", "at", "price", RETRACT]
    assert names[5:] == source_schema(FormatSpec("json"), COLUMNS).names[4:]


# -- decoding (no Spark) ------------------------------------------------------------


def _decode(lines: list[str], **spec: Any) -> Decoded:
    schema = arrow_schema(source_schema(FormatSpec("debezium_json"), COLUMNS))
    physical = pa.schema([f.with_nullable(f.name != "id") for f in list(schema)[:5]])
    spec = {"timestamp_format": "unix_millis", "decimal_encoding": "bytes", **spec}
    decoder = RecordDecoder(physical, FormatSpec("debezium_json", **spec))
    return decoder.decode(*split_lines(("\n".join(lines) + "\n").encode()))


def _rows(decoded: Decoded) -> list[tuple[Any, ...]]:
    names = ["id", "name", "at", "price", RETRACT]
    return [tuple(row.values()) for row in
            pa.Table.from_arrays(decoded.columns, names=names).to_pylist()]


def _envelope(op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    return json.dumps({"before": before, "after": after, "op": op, "ts_ms": 1,
                       "source": {"db": "shop"}})


def test_ops_unroll_into_updating_rows_in_order() -> None:
    one = {"id": 1, "name": "a", "at": 1704067200123456789, "price": _b64(1999)}
    two = {"id": 1, "name": "b", "at": None, "price": _b64(-5)}
    decoded = _decode([_envelope("c", None, one), _envelope("u", one, two), "",
                       _envelope("r", None, {"id": 2}), _envelope("d", two, None)])
    assert decoded.bad == []
    at = dt.datetime(2024, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)
    a = (1, "a", at, decimal.Decimal("19.99"))
    b = (1, "b", None, decimal.Decimal("-0.05"))
    assert _rows(decoded) == [(*a, False), (*a, True), (*b, False), (2, None, None, None, False),
                              (*b, True)]


@pytest.mark.parametrize("line, problem", [
    ('{"before": null, "after": {"id": 1}, "op": "x"}', "unknown op 'x'"),
    ('{"before": null, "after": {"id": 1}}', "no 'op'"),
    ('{"before": null, "after": null, "op": "c"}', "'c' record needs 'after'"),
    ('{"before": null, "after": {"id": 1}, "op": "u"}', "'u' record needs 'before'"),
    ('{"before": null, "op": "d"}', "'d' record needs 'before'"),
    ('{"before": null, "after": {"name": "x"}, "op": "c"}', "column 'id' is NOT NULL"),
    ('{"before": {"name": "x"}, "after": {"id": 1}, "op": "u"}', "'before' has no value"),
    ('{"before": null, "after": {"id": "one"}, "op": "c"}', "field 'after.id'"),
    ('{"before": null, "after": {"id": 1, "price": "%%%"}, "op": "c"}', "price"),
    (json.dumps({"after": {"id": 1, "price": _b64(10**10)}, "op": "c"}), "price"),  # too wide
    ('{"after": {"id": 1}, "op": "c"', ""),
])
def test_malformed_envelopes_are_bad_records(line: str, problem: str) -> None:
    good = _envelope("c", None, {"id": 7})
    decoded = _decode([good, line, good])
    assert [index for index, _ in decoded.bad] == [1]
    assert problem in decoded.bad[0][1]
    assert [row[0] for row in _rows(decoded)] == [7, 7]


@pytest.mark.parametrize("nanos, micros", [
    (1734539354748899, 1734539354748),  # Debezium's MicroTimestamp, read as Arroyo reads it
    (1704067200123456789, 1704067200123456),
    (0, 0), (999, 0), (-1000, -1), (-1500, -2),  # rounded down, also before 1970
])
def test_numeric_timestamps_are_nanoseconds(nanos: int, micros: int) -> None:
    decoded = _decode([_envelope("c", None, {"id": 1, "at": nanos})])
    epoch = dt.datetime(1970, 1, 1, tzinfo=UTC)
    assert _rows(decoded)[0][2] == epoch + dt.timedelta(microseconds=micros)


def test_bytes_decimals_decode_like_debezium_writes_them() -> None:
    values = [0, 1, -1, 127, 128, -128, -129, 10**10 - 1, -(10**10) + 1]
    lines = [_envelope("c", None, {"id": i, "price": _b64(v)}) for i, v in enumerate(values)]
    decoded = _decode(lines)
    assert [row[3] for row in _rows(decoded)] == [decimal.Decimal(f"{v}E-2") for v in values]


# -- encoding and the preview (Spark) -----------------------------------------------

ROW_SCHEMA = T.StructType([T.StructField("k", T.StringType()), T.StructField("v", T.LongType()),
                           T.StructField(RETRACT, T.BooleanType()),
                           T.StructField(ROW_KEY, T.StringType())])


def _changes(spark: SparkSession, rows: list[tuple[Any, ...]]) -> list[dict[str, Any]]:
    frame = spark.createDataFrame(rows, ROW_SCHEMA)
    spec = FormatSpec("debezium_json")
    lines = encoded_lines(frame, spec).decode().splitlines()
    return sorted((json.loads(line) for line in lines), key=json.dumps)


@pytest.mark.spark
def test_changes_per_key(spark: SparkSession) -> None:
    def row(k: str, v: int) -> dict[str, Any]:
        return {"k": k, "v": v}

    records = _changes(spark, [
        ("a", 1, True, "a"), ("a", 2, False, "a"),            # update
        ("b", 5, False, "b"),                                 # create
        ("c", 9, True, "c"),                                  # delete
        ("d", 1, False, "d"), ("d", 1, True, "d"),            # created and removed: nothing
        ("e", 1, True, "e"), ("e", 2, False, "e"), ("e", 2, True, "e"), ("e", 3, False, "e"),
        ("f", 1, False, "f"), ("f", 2, False, "f"),           # two rows added under one key
        ("g", 4, False, None), ("g", 5, True, None),          # no key: each row on its own
    ])
    assert records == sorted([
        {"before": row("a", 1), "after": row("a", 2), "op": "u"},
        {"before": None, "after": row("b", 5), "op": "c"},
        {"before": row("c", 9), "after": None, "op": "d"},
        {"before": row("e", 1), "after": row("e", 3), "op": "u"},
        {"before": None, "after": row("f", 1), "op": "c"},
        {"before": None, "after": row("f", 2), "op": "c"},
        {"before": None, "after": row("g", 4), "op": "c"},
        {"before": row("g", 5), "after": None, "op": "d"},
    ], key=json.dumps)


@pytest.mark.spark
def test_changes_of_keys_spread_over_partitions_net_in_one_shuffle(spark: SparkSession) -> None:
    """A key's rows in different input partitions still net to one change, and the
    netting places rows by key once (its two aggregations share that shuffle)."""
    rows: list[tuple[str, int, bool, str]] = []
    expected = []
    for n in range(300):
        k = f"k{n}"
        if n % 3 == 0:    # replaced twice: one update from the first row to the last
            rows += [(k, n, True, k), (k, n + 1, False, k), (k, n + 1, True, k),
                     (k, n + 2, False, k)]
            expected.append({"before": {"k": k, "v": n}, "after": {"k": k, "v": n + 2},
                             "op": "u"})
        elif n % 3 == 1:  # created and withdrawn: nothing
            rows += [(k, n, False, k), (k, n, True, k)]
        else:             # deleted
            rows.append((k, n, True, k))
            expected.append({"before": {"k": k, "v": n}, "after": None, "op": "d"})
    random.Random(7).shuffle(rows)
    frame = spark.createDataFrame(rows, ROW_SCHEMA).repartition(4)
    changes = change_records(frame)
    assert _exchanges(changes) - _exchanges(frame) == 1
    records = [row.asDict(recursive=True) for row in changes.collect()]
    assert sorted(records, key=json.dumps) == sorted(expected, key=json.dumps)


def _exchanges(frame: DataFrame) -> int:
    """The shuffles in ``frame``'s physical plan."""
    plan: str = frame._jdf.queryExecution().executedPlan().toString()
    return plan.count("Exchange ")


@pytest.mark.spark
def test_append_only_rows_are_creates_with_debezium_value_encodings(spark: SparkSession) -> None:
    frame = spark.sql("SELECT 1 AS id, CAST('-1.28' AS DECIMAL(5, 2)) AS price, "
                      "TIMESTAMP '2024-01-01 00:00:00.5' AS at, NULL AS note")
    lines = encoded_lines(frame, FormatSpec("debezium_json", "unix_millis", "bytes"))
    assert json.loads(lines) == {"before": None, "op": "c", "after": {
        "id": 1, "price": _b64(-128), "at": 1704067200500, "note": None}}


@pytest.mark.spark
def test_plain_json_writes_updating_rows_as_changes_for_previews(spark: SparkSession) -> None:
    frame = spark.createDataFrame([("a", 1, True, "a"), ("a", 2, False, "a")], ROW_SCHEMA)
    assert json.loads(encoded_lines(frame, FormatSpec("json"))) == {"op": "u", "k": "a", "v": 2}


@pytest.mark.spark
def test_decimal_bytes_match_big_integer_encoding(spark: SparkSession) -> None:
    draw = random.Random(4)
    unscaled = [draw.randrange(-(10**digits), 10**digits) for digits in range(1, 39)
                for _ in range(4)]
    unscaled += [0, -1, 2**63, -(2**63), 2**64 - 1, -(2**64), 10**38 - 1, -(10**38) + 1]
    values = [decimal.Decimal(f"{v}E-10") for v in unscaled]
    schema = T.StructType([T.StructField("d", T.DecimalType(38, 10))])
    frame = spark.createDataFrame([(v,) for v in values], schema).coalesce(1)
    encoded = encoded_lines(frame, FormatSpec("json", decimal_encoding="bytes")).decode()
    assert [json.loads(line)["d"] for line in encoded.splitlines()] == [_b64(v) for v in unscaled]


@pytest.mark.spark
def test_preview_shows_one_row_per_change(spark: SparkSession) -> None:
    frame = spark.createDataFrame([("a", 1, True, "a"), ("a", 2, False, "a"),
                                   ("b", 3, False, "b"), ("c", 4, True, "c")], ROW_SCHEMA)
    rows = sorted((row.asDict() for row in change_rows(frame).collect()),
                  key=lambda r: r["k"])
    assert list(rows[0]) == ["op", "k", "v"]
    assert rows == [
        {"op": "u", "k": "a", "v": 2}, {"op": "c", "k": "b", "v": 3},
        {"op": "d", "k": "c", "v": 4}]
    clash = frame.withColumnRenamed("v", "op")
    assert change_rows(clash).columns == ["_op", "k", "op"]
    plain = spark.sql("SELECT 1 AS v")
    assert change_rows(plain) is plain


# -- the single_file source and sink (Spark) ----------------------------------------


def _data(run_rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(row["id"], row["name"], row[RETRACT], row[ROW_KEY]) for row in run_rows]


@pytest.mark.spark
def test_single_file_source_reads_changes_with_keys(spark: SparkSession,
                                                    tmp_path: Path) -> None:
    path = tmp_path / "changes.jsonl"
    path.write_text("\n".join([
        _envelope("c", None, {"id": 1, "name": "a"}),
        _envelope("u", {"id": 1, "name": "a"}, {"id": 1, "name": "b"}),
        _envelope("z", None, {"id": 2}),
        _envelope("c", None, {"name": "no key"}),
        _envelope("d", {"id": 1, "name": "b"}, None),
    ]) + "\n")
    table = _source(path, bad_data="drop")
    frame = CONNECTORS["single_file"].read_stream(spark, table, 1)
    assert frame.columns[4:6] == [RETRACT, ROW_KEY]
    run = run_stream(frame, tmp_path / "checkpoint")
    assert run.failure is None
    key = '{"id":1}'
    assert _data(run.data_rows()) == [(1, "a", False, key), (1, "a", True, key),
                                      (1, "b", False, key), (1, "b", True, key)]
    assert [control for _, control in run.controls()] == ["dropped:2", "eof"]
    failing = CONNECTORS["single_file"].read_stream(spark, _source(path), 1)
    failed = run_stream(failing, tmp_path / "checkpoint-fail")
    assert failed.failure is not None and "at line 3: unknown op 'z'" in str(failed.failure)


@pytest.mark.spark
def test_what_the_sink_writes_the_source_reads(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    sink_table = make_table("single_file", "sink", type="sink", path=str(path),
                            format="debezium_json")
    frame: DataFrame = spark.sql(
        "SELECT * FROM VALUES (1, 'a', TIMESTAMP '2024-01-01 00:00:01', 1.25, true, '1'), "
        "(1, 'b', NULL, -3.50, false, '1'), (2, 'c', NULL, NULL, false, '2') "
        f"AS t(id, name, at, price, {RETRACT}, {ROW_KEY})")
    frame = frame.selectExpr("CAST(id AS BIGINT) AS id", "name", "CAST(at AS TIMESTAMP) AS at",
                             "CAST(price AS DECIMAL(10, 2)) AS price", RETRACT, ROW_KEY)
    sink = CONNECTORS["single_file"].create_sink(sink_table, frame.schema)
    sink.open(None)
    sink.write_epoch(0, frame)
    sink.close()
    read = run_stream(CONNECTORS["single_file"].read_stream(spark, _source(path), 1),
                      tmp_path / "checkpoint")
    assert read.failure is None
    rows = sorted((row["id"], row["name"], row["at"], row["price"], row[RETRACT])
                  for row in read.data_rows())
    # Timestamps are written as milliseconds and read as nanoseconds, as Arroyo does.
    at = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=1704067201)
    assert rows == [(1, "a", at, decimal.Decimal("1.25"), True),
                    (1, "b", None, decimal.Decimal("-3.50"), False),
                    (2, "c", None, None, False)]
    assert all(row[HIDDEN_CONTROL] is None for row in read.data_rows())


@pytest.mark.spark
def test_pass_through_writes_what_arroyo_writes(spark: SparkSession, tmp_path: Path) -> None:
    """A Debezium (PostgreSQL) microsecond timestamp comes out as Arroyo writes it: read
    as nanoseconds, written as milliseconds, so 1734539354748899 becomes 1734539354."""
    source = tmp_path / "orders.jsonl"
    first = {"id": 1, "at": 1734539354748899}
    changed = {"id": 1, "at": 1734539355447444}
    source.write_text("\n".join([_envelope("c", None, first), _envelope("r", None, {"id": 2}),
                                  _envelope("u", first, changed)]) + "\n")
    sink = tmp_path / "out.jsonl"
    sql = f"""
        CREATE TABLE orders (id INT PRIMARY KEY, at TIMESTAMP) WITH (connector =
          'single_file', path = '{source}', format = 'debezium_json', type = 'source',
          max_lines_per_batch = '2');
        CREATE TABLE out (id INT PRIMARY KEY, at TIMESTAMP) WITH (connector =
          'single_file', path = '{sink}', format = 'debezium_json', type = 'sink');
        INSERT INTO out SELECT * FROM orders;"""
    run_pipeline(spark, sql, tmp_path, update_flush_interval_ms=0)
    records = [json.loads(line) for line in sink.read_text().splitlines()]
    assert sorted(records, key=json.dumps) == sorted([
        {"before": None, "after": {"id": 1, "at": 1734539354}, "op": "c"},
        {"before": None, "after": {"id": 2, "at": None}, "op": "c"},
        {"before": {"id": 1, "at": 1734539354}, "after": {"id": 1, "at": 1734539355}, "op": "u"},
    ], key=json.dumps)
