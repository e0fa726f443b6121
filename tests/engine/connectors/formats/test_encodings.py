"""A sink's encoding expressions are built once per schema and format, and reused by
every epoch's rows of that schema (building them costs JVM calls per column)."""

from __future__ import annotations

import json

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from spate.engine.connectors.core.base import RETRACT, ROW_KEY
from spate.engine.connectors.core.changes import change_records
from spate.engine.connectors.formats.records import (
    DEBEZIUM_JSON,
    JSON,
    UNIX_MILLIS,
    FormatSpec,
    encoded_lines,
    record_column,
)

pytestmark = pytest.mark.spark

UPDATES = T.StructType([T.StructField("k", T.LongType()), T.StructField("n", T.LongType()),
                        T.StructField(RETRACT, T.BooleanType()),
                        T.StructField(ROW_KEY, T.StringType())])


def _lines(data: bytes) -> list[dict[str, object]]:
    return sorted((json.loads(line) for line in data.decode().splitlines()),
                  key=json.dumps)


def test_a_schemas_record_expression_is_built_once_and_serves_every_epoch(
        spark: SparkSession) -> None:
    spec = FormatSpec(kind=JSON)
    first = spark.createDataFrame([(1, "a")], "k BIGINT, s STRING")
    second = spark.createDataFrame([(2, "b"), (3, None)], "k BIGINT, s STRING")
    assert record_column(first, spec) is record_column(second, spec)
    assert _lines(encoded_lines(second, spec)) == [{"k": 2, "s": "b"}, {"k": 3, "s": None}]


def test_another_schema_or_format_gets_its_own_expression(spark: SparkSession) -> None:
    """Same column names, another type or format: never an expression built for others."""
    spec = FormatSpec(kind=JSON)
    numbers = spark.createDataFrame([(1, 5)], "k BIGINT, v BIGINT")
    times = spark.sql("SELECT 1L AS k, TIMESTAMP '2024-01-01 00:00:01' AS v")
    assert record_column(numbers, spec) is not record_column(times, spec)
    millis = FormatSpec(kind=JSON, timestamp_format=UNIX_MILLIS)
    assert record_column(times, spec) is not record_column(times, millis)
    assert _lines(encoded_lines(numbers, spec)) == [{"k": 1, "v": 5}]
    assert _lines(encoded_lines(times, millis)) == [{"k": 1, "v": 1704067201000}]


def test_change_envelopes_of_two_epochs_of_one_schema(spark: SparkSession) -> None:
    """The change expressions, built by the first epoch, net the second epoch's rows."""
    spec = FormatSpec(kind=DEBEZIUM_JSON)
    first = spark.createDataFrame([(1, 1, False, "1")], UPDATES)
    second = spark.createDataFrame([(1, 1, True, "1"), (1, 2, False, "1"),
                                    (2, 7, False, "2"), (2, 7, True, "2")], UPDATES)
    assert _lines(encoded_lines(first, spec)) == [
        {"after": {"k": 1, "n": 1}, "before": None, "op": "c"}]
    assert _lines(encoded_lines(second, spec)) == [
        {"after": {"k": 1, "n": 2}, "before": {"k": 1, "n": 1}, "op": "u"}]
    assert change_records(second).columns == ["before", "after", "op"]
