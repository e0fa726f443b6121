"""Spark's casts as the planner knows them: the table matches ``Cast.canCast`` (ANSI off,
as Spate runs Spark), and a text literal that would cast to NULL is recognised."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from spate.engine.planner.casts import castable, literal_reading

TYPES = {
    "boolean": T.BooleanType(), "tinyint": T.ByteType(), "int": T.IntegerType(),
    "bigint": T.LongType(), "float": T.FloatType(), "double": T.DoubleType(),
    "decimal": T.DecimalType(10, 2), "string": T.StringType(), "binary": T.BinaryType(),
    "timestamp": T.TimestampType(), "date": T.DateType(),
    "interval": T.DayTimeIntervalType(), "array": T.ArrayType(T.LongType()),
    "struct": T.StructType([T.StructField("a", T.LongType())]),
    "map": T.MapType(T.StringType(), T.LongType()),
}
_NUMBERS = {"tinyint", "int", "bigint", "float", "double", "decimal"}
_INTEGERS = {"tinyint", "int", "bigint"}
#: What Spark 4 (spark.sql.ansi.enabled=false) answered for Cast.canCast(from, to).
SPARK_CASTS = {
    "boolean": {"boolean", "string", "timestamp"} | _NUMBERS,
    **{name: _NUMBERS | {"boolean", "string", "binary", "timestamp", "interval"}
       for name in _INTEGERS},
    "float": _NUMBERS | {"boolean", "string", "timestamp"},
    "double": _NUMBERS | {"boolean", "string", "timestamp"},
    "decimal": _NUMBERS | {"boolean", "string", "timestamp", "interval"},
    "string": set(TYPES) - {"array", "struct", "map"},
    "binary": {"string", "binary"},
    "timestamp": _NUMBERS | {"boolean", "string", "timestamp", "date"},
    "date": _NUMBERS | {"boolean", "string", "timestamp", "date"},
    "interval": _INTEGERS | {"decimal", "string", "interval"},
    "array": {"string", "array"},
    "struct": {"string", "struct"},
    "map": {"string", "map"},
}


@pytest.mark.parametrize("source", sorted(TYPES))
def test_castable_is_sparks_table(source: str) -> None:
    assert {target for target in TYPES
            if castable(TYPES[source], TYPES[target])} == SPARK_CASTS[source]


def test_nested_values_cast_element_by_element_and_field_by_field() -> None:
    pair = T.StructType([T.StructField("a", T.LongType()), T.StructField("b", T.StringType())])
    renamed = T.StructType([T.StructField("x", T.StringType()),
                            T.StructField("y", T.LongType())])
    assert castable(pair, renamed)  # by position, names aside
    assert not castable(pair, TYPES["struct"])  # a field fewer
    assert castable(T.ArrayType(T.NullType()), T.ArrayType(pair))
    assert not castable(T.ArrayType(T.BinaryType()), T.ArrayType(T.LongType()))
    assert castable(T.NullType(), pair)


@pytest.mark.parametrize(("text", "target", "reading"), [
    ("abc", T.LongType(), "an integer"),
    ("1e3", T.LongType(), "an integer"),  # Spark reads no exponent into an integer
    (" 12.7 ", T.LongType(), None),
    ("1e3", T.DecimalType(10, 2), None),
    ("1_000", T.DoubleType(), "a number"),
    ("NaN", T.DoubleType(), None),
    ("1.5f", T.FloatType(), None),
    ("maybe", T.BooleanType(), "a boolean (true, false, yes, no, 1, 0)"),
    ("Yes", T.BooleanType(), None),
    ("soon", T.TimestampType(), "a timestamp"),
    ("today", T.DateType(), None),
    ("2024-01-01", T.DateType(), None),
    ("anything", T.StringType(), None),
])
def test_a_text_literal_that_would_be_null_is_named(text: str, target: T.DataType,
                                                     reading: str | None) -> None:
    assert literal_reading(text, target) == reading
