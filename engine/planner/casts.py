"""Which casts Spark makes, known at planning so a cast it refuses is a planning error.

:func:`castable` is Spark's own rule (``Cast.canCast`` with ANSI mode off, as
Spate runs Spark): any value becomes text; numbers, booleans, dates and
timestamps convert among themselves (a date only from text or a timestamp);
binary only from text or an integer; a nested value (array, map, struct) only
into the same kind, element by element, a struct field by field in order.

With ANSI mode off a text that does not read as the target type casts to
NULL without an error. :func:`literal_reading` says what a text literal is
not when that is evident, so ``'abc'`` into a BIGINT column is reported
rather than written as NULL.
"""

from __future__ import annotations

import re

from pyspark.sql import types as T

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FRACTIONAL = (T.FloatType, T.DoubleType)
_NUMERIC = (*_INTEGRAL, *_FRACTIONAL, T.DecimalType)
_NESTED = (T.ArrayType, T.MapType, T.StructType)
_INTERVAL = (T.DayTimeIntervalType, T.YearMonthIntervalType)
_TIMES = (T.DateType, T.TimestampType, T.TimestampNTZType)

#: Target kind -> the source kinds Spark casts into it (besides itself, text and NULL).
_SOURCES: dict[str, frozenset[str]] = {
    "boolean": frozenset({"numeric", "date", "timestamp"}),
    "integral": frozenset({"boolean", "numeric", "date", "timestamp", "interval"}),
    "fractional": frozenset({"boolean", "numeric", "date", "timestamp"}),
    "decimal": frozenset({"boolean", "numeric", "date", "timestamp", "interval"}),
    "timestamp": frozenset({"boolean", "numeric", "date", "timestamp"}),
    "date": frozenset({"timestamp"}),
    "binary": frozenset({"integral"}),
    "interval": frozenset({"integral", "decimal"}),
}

#: What a text literal must look like to cast to a number (Spark's own readings).
_INTEGER_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)")
_DECIMAL_TEXT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_DOUBLE_TEXT = re.compile(r"[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?[dDfF]?|inf(inity)?|nan)",
                          re.IGNORECASE)
_BOOLEAN_TEXT = frozenset({"t", "true", "y", "yes", "1", "f", "false", "n", "no", "0"})
_TIME_WORDS = frozenset({"epoch", "now", "today", "yesterday", "tomorrow"})


def castable(given: T.DataType, target: T.DataType) -> bool:
    """Whether Spark (ANSI off) casts a value of type ``given`` to ``target``."""
    if isinstance(given, T.NullType) or isinstance(target, T.StringType):
        return True
    if isinstance(given, _NESTED) or isinstance(target, _NESTED):
        return _nested_castable(given, target)
    given_kinds = {_kind(given), _group(given)}
    target_kind = _kind(target)
    return target_kind in given_kinds or given_kinds == {"text"} \
        or bool(given_kinds & _SOURCES.get(target_kind, frozenset()))


def literal_reading(value: str, target: T.DataType) -> str | None:
    """What the text literal ``value`` should be to cast to ``target`` when it evidently
    is not (it would be NULL): "a number", "a boolean"...; None when it reads."""
    stripped = value.strip()
    kind = _kind(target)
    if kind == "integral" and not _INTEGER_TEXT.fullmatch(stripped):
        return "an integer"
    if kind == "decimal" and not _DECIMAL_TEXT.fullmatch(stripped):
        return "a number"
    if kind == "fractional" and not _DOUBLE_TEXT.fullmatch(stripped):
        return "a number"
    if kind == "boolean" and stripped.lower() not in _BOOLEAN_TEXT:
        return "a boolean (true, false, yes, no, 1, 0)"
    if kind in ("date", "timestamp") and not re.search(r"\d", stripped) \
            and stripped.lower() not in _TIME_WORDS:
        return "a date" if kind == "date" else "a timestamp"
    return None


def _nested_castable(given: T.DataType, target: T.DataType) -> bool:
    if isinstance(given, T.ArrayType) and isinstance(target, T.ArrayType):
        return castable(given.elementType, target.elementType)
    if isinstance(given, T.MapType) and isinstance(target, T.MapType):
        return castable(given.keyType, target.keyType) \
            and castable(given.valueType, target.valueType)
    if isinstance(given, T.StructType) and isinstance(target, T.StructType):
        return len(given.fields) == len(target.fields) and all(
            castable(a.dataType, b.dataType)
            for a, b in zip(given.fields, target.fields, strict=True))
    return False


def _kind(data_type: T.DataType) -> str:
    """The kind a type casts as: integral, fractional, decimal, text, boolean ..."""
    if isinstance(data_type, _INTEGRAL):
        return "integral"
    if isinstance(data_type, _FRACTIONAL):
        return "fractional"
    if isinstance(data_type, T.DecimalType):
        return "decimal"
    if isinstance(data_type, T.StringType):
        return "text"
    if isinstance(data_type, T.BooleanType):
        return "boolean"
    if isinstance(data_type, T.BinaryType):
        return "binary"
    if isinstance(data_type, T.DateType):
        return "date"
    if isinstance(data_type, _TIMES):
        return "timestamp"
    if isinstance(data_type, _INTERVAL):
        return "interval"
    return "other"


def _group(data_type: T.DataType) -> str:
    """The wider group of a kind: every number is numeric."""
    return "numeric" if isinstance(data_type, _NUMERIC) else _kind(data_type)
