"""The scalar function library: every SQL function a query may call, mapped onto
Spark built-ins so that it runs as a native Spark expression (no Python per row).

:data:`FUNCTIONS` is the one table, keyed by the name a query writes.  Each
entry either keeps the node sqlglot parsed (its Spark form is already the
native built-in) or rewrites it.  :func:`translate_functions` applies the table
to a query and turns a call to anything else into a located PlanningError.
A pipeline's Python UDFs (:mod:`engine.udf`) are callable too: their calls
are checked against the UDF's signature (argument count, and the types of
arguments whose type is evident: literals, casts, other UDFs' results).

``python -m engine.planner.functions --markdown`` prints the table that
``engine/planner/FUNCTIONS.md`` holds.
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from weakref import WeakKeyDictionary

from pyspark.sql import types as T
from sqlglot import exp
from sqlglot.tokenizer_core import TokenType

from engine.planner.dialect import Spate
from engine.planner.errors import PlanningError
from engine.planner.plan import EVENT_TIME
from engine.planner.positions import SourceText
from engine.planner.types import UnsupportedTypeError, spark_type
from engine.planner.windows import WINDOW_FUNCTIONS, IntervalError, interval_micros
from engine.udf import UdfDefinitionError, UdfRegistry, UdfSignature, ValueType
from engine.udf.signatures import AGGREGATE

#: Where the generated table lives, relative to the repository root.
DOCS_PATH = "engine/planner/FUNCTIONS.md"


@dataclass
class Translation:
    """What a translator needs besides the call: where errors point, and ``now``."""

    text: SourceText
    fallback: int
    pipeline_start: datetime

    def error(self, message: str, node: exp.Expr) -> PlanningError:
        return self.text.error(message, node, self.fallback)


Translator = Callable[[exp.Func, Translation], exp.Expr]


@dataclass(frozen=True)
class Function:
    """One supported function: its family, its Spark form, and how to get there."""

    name: str
    family: str
    spark: str
    #: None: the parsed node's own Spark SQL is already the native built-in.
    translate: Translator | None = field(default=None, compare=False)
    note: str = ""


# -- helpers the translators share --------------------------------------------------------


def _args(node: exp.Func) -> list[exp.Expr]:
    """The call's arguments in written order (Anonymous keeps them in ``expressions``)."""
    if isinstance(node, exp.Anonymous):
        return list(node.expressions)
    return [v for v in (node.args.get(k) for k in node.arg_types) if isinstance(v, exp.Expr)]


def _arity(node: exp.Func, ctx: Translation, name: str, low: int, high: int) -> list[exp.Expr]:
    args = _args(node)
    if not low <= len(args) <= high:
        wanted = str(low) if low == high else f"{low} to {high}"
        raise ctx.error(f"{name}() takes {wanted} argument(s), got {len(args)}", node)
    return args


def _call(name: str, *args: exp.Expr) -> exp.Expr:
    return exp.Anonymous(this=name, expressions=list(args))


def _string_literal(node: exp.Expr, ctx: Translation, what: str) -> str:
    if not (isinstance(node, exp.Literal) and node.is_string):
        raise ctx.error(f"{what} must be a string literal", node)
    return str(node.name)


def _rename(spark_name: str) -> Translator:
    """A call of the same arguments under Spark's name for the function."""
    return lambda node, _ctx: _call(spark_name, *_args(node))


# -- time ------------------------------------------------------------------------------------


def _now(node: exp.Func, ctx: Translation) -> exp.Expr:
    # A literal, not Spark's current_timestamp(): that is the micro-batch's
    # start, which would differ between an epoch and its replay.
    _arity(node, ctx, "now", 0, 0)
    stamp = ctx.pipeline_start.strftime("%Y-%m-%d %H:%M:%S.%f")
    return exp.cast(exp.Literal.string(stamp), exp.DataType.build("timestamp"))


def _row_time(node: exp.Func, ctx: Translation) -> exp.Expr:
    _arity(node, ctx, "row_time", 0, 0)
    return exp.column(EVENT_TIME)


def _to_timestamp(node: exp.Func, ctx: Translation) -> exp.Expr:
    # One argument: text (ISO 8601) or seconds since the epoch; a cast reads both.
    if isinstance(node, exp.UnixToTime):
        return exp.cast(node.this, exp.DataType.build("timestamp"))
    return node


def _from_unixtime(node: exp.Func, ctx: Translation) -> exp.Expr:
    (seconds,) = _arity(node, ctx, "from_unixtime", 1, 1)
    return _call("TIMESTAMP_SECONDS", seconds)


def _date_bin(node: exp.Func, ctx: Translation) -> exp.Expr:
    if node.args.get("unit") is not None:
        raise ctx.error("date_bin() with an origin is not supported; bins start at "
                        "1970-01-01T00:00:00", node)
    try:
        width_us = interval_micros(node.this)
    except IntervalError as error:
        raise ctx.error(f"date_bin(): {error}", node.this) from error
    micros = _call("UNIX_MICROS", node.expression)
    # pmod keeps the arithmetic exact in integers and floors times before 1970 too.
    offset = _call("PMOD", micros.copy(), exp.Literal.number(width_us))
    return _call("TIMESTAMP_MICROS", exp.Sub(this=micros, expression=offset))


# -- regex ---------------------------------------------------------------------------------


def _regexp_match(node: exp.Func, ctx: Translation) -> exp.Expr:
    subject, pattern = _arity(node, ctx, "regexp_match", 2, 2)
    regex = _string_literal(pattern, ctx, "regexp_match()'s pattern")
    try:
        groups = re.compile(regex).groups
    except re.error as error:
        raise ctx.error(f"regexp_match(): invalid pattern: {error}", pattern) from error
    parts = [_call("REGEXP_EXTRACT", subject.copy(), pattern.copy(), exp.Literal.number(i))
             for i in range(1, groups + 1) or [0]]
    matched = exp.RegexpLike(this=subject.copy(), expression=pattern.copy())
    return exp.Case(ifs=[exp.If(this=matched, true=_call("ARRAY", *parts))])


# -- arrays, structs, hashes, encodings, casts ---------------------------------------------------


def _array_size(node: exp.Func, ctx: Translation) -> exp.Expr:
    # ARRAY_SIZE, not SIZE: SIZE(NULL) is -1 outside ANSI mode.
    (array,) = _arity(node, ctx, "array_length", 1, 1)
    return _call("ARRAY_SIZE", array)


def _get_field(node: exp.Func, ctx: Translation) -> exp.Expr:
    struct, key = _arity(node, ctx, "get_field", 2, 2)
    name = _string_literal(key, ctx, "get_field()'s field name")
    return exp.Dot(this=struct, expression=exp.to_identifier(name, quoted=True))


def _sha224(node: exp.Func, ctx: Translation) -> exp.Expr:
    (value,) = _arity(node, ctx, "sha224", 1, 1)
    return _call("SHA2", value, exp.Literal.number(224))


_ENCODERS = {"base64": ("BASE64", "UNBASE64"), "hex": ("HEX", "UNHEX")}


def _codec(index: int) -> Translator:
    """``encode`` (index 0) or ``decode`` (index 1) by a literal format name."""
    def translate(node: exp.Func, ctx: Translation) -> exp.Expr:
        name = ("encode", "decode")[index]
        value, fmt = _arity(node, ctx, name, 2, 2)
        chosen = _string_literal(fmt, ctx, f"{name}()'s format").lower()
        if chosen not in _ENCODERS:
            raise ctx.error(f"{name}() format '{chosen}' is not supported; use "
                            "'base64' or 'hex'", fmt)
        result = _call(_ENCODERS[chosen][index], value)
        return _call("LOWER", result) if (chosen, index) == ("hex", 0) else result
    return translate


_ARROW_TYPES = {
    "boolean": "BOOLEAN", "int8": "TINYINT", "int16": "SMALLINT", "int32": "INT",
    "int64": "BIGINT", "uint8": "SMALLINT", "uint16": "INT", "uint32": "BIGINT",
    "uint64": "DECIMAL(20, 0)", "float32": "FLOAT", "float64": "DOUBLE", "utf8": "STRING",
    "largeutf8": "STRING", "binary": "BINARY", "largebinary": "BINARY", "date32": "DATE",
    "timestamp(microsecond, none)": "TIMESTAMP", "timestamp(nanosecond, none)": "TIMESTAMP",
    "timestamp(millisecond, none)": "TIMESTAMP", "timestamp(second, none)": "TIMESTAMP",
}


def _arrow_cast(node: exp.Func, ctx: Translation) -> exp.Expr:
    value, arrow = _arity(node, ctx, "arrow_cast", 2, 2)
    wanted = _string_literal(arrow, ctx, "arrow_cast()'s type")
    spark_type = _ARROW_TYPES.get(re.sub(r"\s+", " ", wanted.strip().lower()))
    if spark_type is None:
        known = ", ".join(sorted({k.split("(")[0] for k in _ARROW_TYPES}))
        raise ctx.error(f"arrow_cast() cannot cast to '{wanted}'; supported Arrow types: "
                        f"{known}", arrow)
    return exp.cast(value, exp.DataType.build(spark_type, dialect="spark"))


# -- JSON (text columns; paths are built at planning from literal keys) -----------------------

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _json_path(keys: list[exp.Expr], ctx: Translation, name: str) -> str:
    """The JSONPath of ``json_get``-style keys: strings name fields, integers index arrays."""
    path = "$"
    for key in keys:
        if isinstance(key, exp.Literal) and not key.is_string:
            if not key.name.isdigit():
                raise ctx.error(f"{name}(): an array index must be a non-negative integer",
                                key)
            path += f"[{key.name}]"
        elif isinstance(key, exp.Literal):
            text = str(key.name)
            if _PLAIN_KEY.fullmatch(text):
                path += f".{text}"
            elif "'" in text or "]" in text:
                raise ctx.error(f"{name}(): key {text!r} cannot contain ' or ]", key)
            else:
                path += f"['{text}']"
        else:
            raise ctx.error(f"{name}(): keys must be string or integer literals", key)
    return path


def _json_at(node: exp.Func, ctx: Translation, name: str) -> exp.Expr:
    args = _arity(node, ctx, name, 1, 64)
    if len(args) == 1:
        return args[0]
    return _call("GET_JSON_OBJECT", args[0], exp.Literal.string(_json_path(args[1:], ctx, name)))


def _json_get(name: str, spark_type: str | None = None) -> Translator:
    def translate(node: exp.Func, ctx: Translation) -> exp.Expr:
        value = _json_at(node, ctx, name)
        if spark_type is None:
            return value
        # Outside ANSI mode a value of another type casts to NULL, as the function says.
        return exp.cast(value, exp.DataType.build(spark_type, dialect="spark"))
    return translate


def _json_contains(node: exp.Func, ctx: Translation) -> exp.Expr:
    if isinstance(node, exp.JSONBContainsTopKey):  # j ? 'k'
        args = [node.this, node.expression]
    else:
        args = _arity(node, ctx, "json_contains", 2, 64)
    parent = args[0] if len(args) == 2 else _call(
        "GET_JSON_OBJECT", args[0], exp.Literal.string(_json_path(args[1:-1], ctx,
                                                                  "json_contains")))
    last = args[-1]
    _json_path([last], ctx, "json_contains")  # validates the key
    if isinstance(last, exp.Literal) and last.is_string:
        test: exp.Expr = exp.ArrayContains(this=_call("JSON_OBJECT_KEYS", parent),
                                           expression=last.copy())
    else:
        test = exp.GT(this=_call("JSON_ARRAY_LENGTH", parent), expression=last.copy())
    return exp.Coalesce(this=test, expressions=[exp.false()])


def _json_length(node: exp.Func, ctx: Translation) -> exp.Expr:
    value = _json_at(node, ctx, "json_length")
    return exp.Coalesce(this=_call("JSON_ARRAY_LENGTH", value),
                        expressions=[_call("ARRAY_SIZE", _call("JSON_OBJECT_KEYS",
                                                               value.copy()))])


def _json_path_call(name: str, as_array: bool) -> Translator:
    def translate(node: exp.Func, ctx: Translation) -> exp.Expr:
        document, path = _arity(node, ctx, name, 2, 2)
        text = _string_literal(path, ctx, f"{name}()'s JSONPath")
        if not text.startswith("$") or "*" in text or ".." in text:
            raise ctx.error(f"{name}(): JSONPath '{text}' is not supported; use a path "
                            "from '$' of .field and [index] steps, without wildcards", path)
        value = _call("GET_JSON_OBJECT", document, path.copy())
        if not as_array:
            return value
        found = exp.Not(this=exp.Is(this=value.copy(), expression=exp.null()))
        return exp.Case(ifs=[exp.If(this=found, true=_call("ARRAY", value))],
                        default=_call("ARRAY"))
    return translate


# -- the table ---------------------------------------------------------------------------------

FUNCTIONS: dict[str, Function] = {f.name: f for f in (
    # math
    Function("abs", "math", "abs(x)"),
    Function("ceil", "math", "ceil(x)"),
    Function("floor", "math", "floor(x)"),
    Function("round", "math", "round(x[, digits])"),
    Function("power", "math", "power(x, y)"),
    Function("pow", "math", "power(x, y)"),
    Function("sqrt", "math", "sqrt(x)"),
    Function("exp", "math", "exp(x)"),
    Function("ln", "math", "ln(x)"),
    Function("log10", "math", "log(10, x)"),
    Function("mod", "math", "x % y"),
    Function("sign", "math", "sign(x)"),
    # string
    Function("concat", "string", "concat(coalesce(a, ''), ...)", note="NULL arguments are "
             "skipped"),
    Function("concat_ws", "string", "concat_ws(sep, a, ...)"),
    Function("lower", "string", "lower(s)"),
    Function("upper", "string", "upper(s)"),
    Function("trim", "string", "trim(s)"),
    Function("btrim", "string", "trim(s)"),
    Function("ltrim", "string", "ltrim(s)"),
    Function("rtrim", "string", "rtrim(s)"),
    Function("substr", "string", "substring(s, start[, length])", note="1-based"),
    Function("substring", "string", "substring(s, start[, length])", note="1-based"),
    Function("replace", "string", "replace(s, from, to)"),
    Function("split_part", "string", "split_part(s, delimiter, n)"),
    Function("length", "string", "length(s)"),
    Function("char_length", "string", "length(s)"),
    Function("left", "string", "left(s, n)"),
    Function("right", "string", "right(s, n)"),
    Function("lpad", "string", "lpad(s, n, pad)"),
    Function("rpad", "string", "rpad(s, n, pad)"),
    Function("reverse", "string", "reverse(s)"),
    Function("initcap", "string", "initcap(s)"),
    Function("starts_with", "string", "startswith(s, prefix)"),
    Function("strpos", "string", "locate(sub, s)"),
    Function("repeat", "string", "repeat(s, n)"),
    # regex
    Function("regexp_like", "regex", "s RLIKE pattern", note="Java regular expressions"),
    Function("regexp_match", "regex",
             "CASE WHEN s RLIKE p THEN array(regexp_extract(s, p, 1), ...) END",
             _regexp_match, "pattern must be a literal; the array holds the first match's "
             "groups (the whole match when it has none)"),
    Function("regexp_replace", "regex", "regexp_replace(s, pattern, replacement)",
             note="every match is replaced, as in Spark"),
    # conditional
    Function("coalesce", "conditional", "coalesce(a, b, ...)"),
    Function("nullif", "conditional", "nullif(a, b)"),
    Function("nvl", "conditional", "coalesce(a, b)"),
    Function("ifnull", "conditional", "coalesce(a, b)"),
    Function("greatest", "conditional", "greatest(a, b, ...)"),
    Function("least", "conditional", "least(a, b, ...)"),
    # time
    Function("now", "time", "CAST('<pipeline start>' AS TIMESTAMP)", _now,
             "the time this run of the pipeline was planned (its job's start), one "
             "instant for every query and epoch of the run"),
    Function("current_timestamp", "time", "CAST('<pipeline start>' AS TIMESTAMP)", _now,
             "same as now()"),
    Function("row_time", "time", "the row's event time", _row_time,
             "the source's event time (its WATERMARK column, or arrival time)"),
    Function("date_trunc", "time", "date_trunc(unit, ts)"),
    Function("date_bin", "time", "timestamp_micros(unix_micros(ts) - pmod(unix_micros(ts), "
             "width_us))", _date_bin, "the interval must be a fixed-length literal; bins "
             "start at the epoch (no origin argument)"),
    Function("extract", "time", "extract(field FROM ts)"),
    Function("date_part", "time", "extract(field FROM ts)"),
    Function("to_timestamp", "time", "CAST(x AS TIMESTAMP) / to_timestamp(s, format)",
             _to_timestamp, "one argument: ISO 8601 text or seconds since the epoch; two: "
             "text and a PostgreSQL format"),
    Function("from_unixtime", "time", "timestamp_seconds(x)", _from_unixtime),
    Function("unix_seconds", "time", "unix_seconds(ts)", note="whole seconds since the epoch"),
    Function("unix_millis", "time", "unix_millis(ts)", note="milliseconds since the epoch"),
    Function("unix_micros", "time", "unix_micros(ts)", note="microseconds since the epoch"),
    # array
    Function("make_array", "array", "array(a, ...)", _rename("ARRAY")),
    Function("array_append", "array", "array_append(coalesce(arr, array()), x)"),
    Function("array_prepend", "array", "array_prepend(coalesce(arr, array()), x)"),
    Function("array_concat", "array", "concat(a, b)"),
    Function("array_has", "array", "array_contains(arr, x)"),
    Function("array_contains", "array", "array_contains(arr, x)"),
    Function("array_position", "array", "array_position(arr, x)"),
    Function("array_remove", "array", "array_remove(arr, x)"),
    Function("array_distinct", "array", "array_distinct(arr)"),
    Function("array_length", "array", "array_size(arr)", _array_size),
    Function("cardinality", "array", "array_size(arr)", _array_size),
    # struct
    Function("struct", "struct", "struct(a, ...)"),
    Function("named_struct", "struct", "named_struct('name', value, ...)"),
    Function("get_field", "struct", "s.`name`", _get_field, "field name must be a literal"),
    # hash
    Function("md5", "hash", "md5(x)", note="hex text"),
    Function("sha1", "hash", "sha(x)", note="hex text"),
    Function("sha224", "hash", "sha2(x, 224)", _sha224, "hex text"),
    Function("sha256", "hash", "sha2(x, 256)", note="hex text"),
    Function("sha512", "hash", "sha2(x, 512)", note="hex text"),
    # encode / decode
    Function("encode", "encode", "base64(x) / lower(hex(x))", _codec(0),
             "format 'base64' or 'hex' (a literal)"),
    Function("decode", "encode", "unbase64(s) / unhex(s)", _codec(1),
             "format 'base64' or 'hex' (a literal); returns BYTEA"),
    # cast
    Function("arrow_cast", "cast", "CAST(x AS <Spark type>)", _arrow_cast,
             "Arrow type as a literal: " + ", ".join(sorted(_ARROW_TYPES))),
    # JSON
    Function("json_get", "json", "get_json_object(j, '$.k...')", _json_get("json_get"),
             "keys are string or integer literals; the value as JSON text (strings "
             "unquoted)"),
    Function("->", "json", "get_json_object(j, '$.k')", note="operator: j -> 'k' or j -> 0"),
    Function("json_get_str", "json", "get_json_object(j, '$.k...')",
             _json_get("json_get_str")),
    Function("json_get_int", "json", "CAST(get_json_object(j, '$.k...') AS BIGINT)",
             _json_get("json_get_int", "BIGINT")),
    Function("json_get_float", "json", "CAST(get_json_object(j, '$.k...') AS DOUBLE)",
             _json_get("json_get_float", "DOUBLE")),
    Function("json_get_bool", "json", "CAST(get_json_object(j, '$.k...') AS BOOLEAN)",
             _json_get("json_get_bool", "BOOLEAN")),
    Function("json_get_json", "json", "get_json_object(j, '$.k...')",
             _json_get("json_get_json")),
    Function("json_as_text", "json", "get_json_object(j, '$.k...')",
             _json_get("json_as_text")),
    Function("->>", "json", "get_json_object(j, '$.k')", note="operator: j ->> 'k'"),
    Function("json_contains", "json", "coalesce(array_contains(json_object_keys(j), k), false)",
             _json_contains, "an integer last key tests json_array_length(...) > k"),
    Function("?", "json", "coalesce(array_contains(json_object_keys(j), k), false)",
             _json_contains, "operator: j ? 'k'"),
    Function("json_length", "json", "coalesce(json_array_length(v), "
             "array_size(json_object_keys(v)))", _json_length),
    Function("extract_json", "json", "array(get_json_object(j, path)) or array()",
             _json_path_call("extract_json", True), "JSONPath without wildcards; TEXT[]"),
    Function("extract_json_string", "json", "get_json_object(j, path)",
             _json_path_call("extract_json_string", False)),
    Function("get_first_json_object", "json", "get_json_object(j, path)",
             _json_path_call("get_first_json_object", False)),
)}

#: Calls written as syntax carry no name position: their name comes from the node type.
_SYNTAX_NAMES: dict[type[exp.Func], str] = {
    exp.Floor: "floor", exp.Ceil: "ceil", exp.Trim: "trim", exp.Initcap: "initcap",
    exp.Substring: "substring", exp.Extract: "extract", exp.Decode: "decode",
    exp.CurrentTimestamp: "current_timestamp", exp.JSONExtract: "->",
    exp.JSONExtractScalar: "->>", exp.JSONBContainsTopKey: "?",
}
#: Expression syntax that parses into function nodes but is not a function call.
#: (sqlglot models AND/OR/XOR as functions too: exp.Connector.)
_SYNTAX: tuple[type[exp.Expr], ...] = (exp.Cast, exp.TryCast, exp.Case, exp.If, exp.Array,
                                       exp.Unnest, exp.Explode, exp.AggFunc, exp.Connector)
#: Calls other planning steps own: windows, windowed aggregates, OVER functions.
_OTHER_CALLS = frozenset({*(w.lower() for w in WINDOW_FUNCTIONS), "mean", "unnest",
                          "approx_median", "approx_percentile_cont"})

_STARTS: WeakKeyDictionary[SourceText, datetime] = WeakKeyDictionary()


def translate_functions(query: exp.Expr, text: SourceText, fallback: int,
                        udfs: UdfRegistry | None = None) -> exp.Expr:
    """Rewrite every scalar call of ``query`` (in place) into its Spark form.

    ``udfs`` are the pipeline's Python UDFs: a call of one is kept (Spark
    runs it under its name) once it passes :func:`check_udf_call`.  A call of
    any other name raises a PlanningError at the function's name.
    """
    # One SourceText per planned pipeline: every query of it sees the same now().
    start = _STARTS.setdefault(text, datetime.now(UTC))
    ctx = Translation(text, fallback, start)
    if udfs is not None:
        check_udf_names(udfs)
    names = _unaliased_names(query)
    calls = [node for node in query.walk() if isinstance(node, exp.Func)]
    for node in reversed(calls):  # innermost first: a rewrite sees translated arguments
        name = _written_name(node, text)
        if udfs is not None and name is not None and name in udfs.functions:
            _udf_call(node, udfs.functions[name], ctx, udfs)
            continue
        if (isinstance(node, _SYNTAX) or name in _OTHER_CALLS
                or isinstance(node.parent, exp.Window)):
            continue
        function = FUNCTIONS.get(name or "")
        if function is None:
            raise _unknown(node, name or node.sql_name().lower(), ctx, udfs)
        if function.translate is not None:
            replacement = function.translate(node, ctx)
            if replacement is not node:
                node.replace(replacement)
    _keep_names(names)
    return query


def _unaliased_names(query: exp.Expr) -> list[tuple[exp.Select, int, str]]:
    """Each unaliased SELECT item with the name Spark gives it as written."""
    return [(select, i, item.sql(dialect="spark"))
            for select in query.find_all(exp.Select)
            for i, item in enumerate(select.expressions)
            if not isinstance(item, exp.Alias | exp.Column | exp.Star)]


def _keep_names(names: list[tuple[exp.Select, int, str]]) -> None:
    """Alias rewritten items by their written form: a column is named after the
    call the query wrote (``JSON_LENGTH(j)``), not after its Spark translation."""
    for select, index, name in names:
        item = select.expressions[index]
        if not isinstance(item, exp.Alias) and item.sql(dialect="spark") != name:
            item.replace(exp.alias_(item.copy(), name, quoted=True))


def _written_name(node: exp.Func, text: SourceText) -> str | None:
    """The function name as the query wrote it (lower case), when it can be known."""
    start, end = node.meta.get("start"), node.meta.get("end")
    if isinstance(start, int) and isinstance(end, int):
        return text.sql[start:end + 1].lower()
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    return _SYNTAX_NAMES.get(type(node))


def _unknown(node: exp.Func, name: str, ctx: Translation,
             udfs: UdfRegistry | None) -> PlanningError:
    known = [*FUNCTIONS, *(s.name for s in udfs or ())]
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    udf_note = " and the pipeline's UDFs" if udfs else ""
    message = (f"unknown function '{name}'{hint}; {DOCS_PATH} lists the supported "
               f"functions{udf_note}")
    return _at_name(node, message, ctx)


def _at_name(node: exp.Func, message: str, ctx: Translation) -> PlanningError:
    start = node.meta.get("start")
    if isinstance(start, int):
        return ctx.text.error_at(message, start)
    return ctx.error(message, node)


# -- UDFs ----------------------------------------------------------------------------------

#: Aggregates (SQL.md section 4) and OVER functions (section 7) sqlglot may not know:
#: names a UDF cannot take, besides the function table's and the parser's own.
_RESERVED_NAMES = frozenset({
    "count", "sum", "avg", "mean", "min", "max", "median", "bit_and", "bit_or", "bit_xor",
    "bool_and", "bool_or", "array_agg", "first_value", "last_value", "corr", "covar",
    "covar_samp", "covar_pop", "stddev", "stddev_samp", "stddev_pop", "var", "var_samp",
    "var_pop", "regr_slope", "regr_intercept", "regr_count", "regr_r2", "regr_avgx",
    "regr_avgy", "regr_sxx", "regr_syy", "regr_sxy", "approx_distinct", "approx_median",
    "approx_percentile_cont", "approx_percentile_cont_with_weight", "row_number", "rank",
    "dense_rank", "ntile", "lag", "lead", "nth_value", "cume_dist", "percent_rank",
})


def check_udf_names(udfs: UdfRegistry) -> None:
    """A UDF may not take a built-in function's name (SQL.md section 10), nor a
    SQL keyword's: a call of it would not reach the UDF."""
    parser = Spate.Parser
    for signature in udfs:
        name = signature.name
        if (name in FUNCTIONS or name in _OTHER_CALLS or name in _RESERVED_NAMES
                or name.upper() in parser.FUNCTIONS or name.upper() in parser.FUNCTION_PARSERS):
            clash = f"the built-in function {name}()"
        elif [t.token_type for t in Spate().tokenize(name)] != [TokenType.VAR]:
            clash = f"the SQL keyword {name.upper()}"
        else:
            continue
        raise UdfDefinitionError(f"UDF '{name}' has the name of {clash}; rename it",
                                 udfs.filename, signature.line, signature.column)


class UdafRows(exp.Expression, exp.AggFunc):
    """The rows of an aggregate UDF's arguments over a group (a STRUCT per row).

    ``spread(x)`` plans as ``spread(UdafRows(STRUCT(x AS a0)))``: the window
    operator collects the rows (aggregate kind ``udaf_rows``) and the UDF,
    registered in Spark as a scalar function of those rows, runs in the
    query's output SQL when the window fires.
    """

    arg_types = {"this": True}


def _udf_call(node: exp.Func, signature: UdfSignature, ctx: Translation,
              udfs: UdfRegistry) -> None:
    if isinstance(node.parent, exp.Window):
        raise _at_name(node, f"UDF {signature.name}() cannot be used with OVER", ctx)
    check_udf_call(node, signature, ctx, udfs)
    if signature.kind == AGGREGATE:
        fields = [exp.alias_(arg.copy(), f"a{i}") for i, arg in enumerate(_args(node))]
        node.set("expressions", [UdafRows(this=exp.Struct(expressions=fields))])


def check_udf_call(node: exp.Func, signature: UdfSignature, ctx: Translation,
                   udfs: UdfRegistry) -> None:
    """The call passes one argument per parameter, of an accepted type where it is evident."""
    args = _args(node)
    if len(args) != len(signature.params):
        raise _at_name(node, f"{signature.kind} UDF {signature.describe()} takes "
                             f"{len(signature.params)} argument(s), got {len(args)}", ctx)
    for position, (arg, param) in enumerate(zip(args, signature.params, strict=True), 1):
        given = _evident_type(arg, udfs)
        if given is not None and not param.type.accepts(given):
            message = (f"argument {position} of {signature.name}() is {given.sql}, but "
                       f"parameter '{param.name}' is {param.type.hint()} ({param.type.sql}); "
                       "cast it or change the UDF's type hint")
            # A literal or call is located at itself; syntax (TRUE, CAST) carries no
            # position of its own, so the error points at the call.
            if "start" in arg.meta:
                raise ctx.error(message, arg)
            raise _at_name(node, message, ctx)


#: Spark type -> the UDF value type a value of it arrives as.
_SPARK_VALUE_TYPES: tuple[tuple[type[T.DataType], str], ...] = (
    (T.BooleanType, "bool"), (T.ByteType, "int"), (T.ShortType, "int"),
    (T.IntegerType, "int"), (T.LongType, "int"), (T.FloatType, "float"),
    (T.DoubleType, "float"), (T.DecimalType, "Decimal"), (T.StringType, "str"),
    (T.BinaryType, "bytes"), (T.TimestampType, "datetime"), (T.TimestampNTZType, "datetime"),
    (T.DateType, "date"),
)


def _evident_type(node: exp.Expr, udfs: UdfRegistry) -> ValueType | None:
    """The type of an argument when it is evident without resolving columns."""
    if isinstance(node, exp.Paren | exp.Neg):
        return _evident_type(node.this, udfs)
    if isinstance(node, exp.Boolean):
        return ValueType("bool", True)
    if isinstance(node, exp.Literal):
        if node.is_string:
            return ValueType("str", True)
        number = str(node.name).lower()
        # Spark reads 1.5 as DECIMAL and 1e3 as DOUBLE.
        kind = "float" if "e" in number else "Decimal" if "." in number else "int"
        return ValueType(kind, True)
    if isinstance(node, exp.Cast) and isinstance(node.to, exp.DataType):
        try:
            return _value_type(spark_type(node.to))
        except UnsupportedTypeError:
            return None
    if isinstance(node, exp.Anonymous):
        signature = udfs.get(str(node.name))
        return signature.returns if signature is not None else None
    return None


def _value_type(kind: T.DataType) -> ValueType | None:
    if isinstance(kind, T.ArrayType):
        element = _value_type(kind.elementType)
        return None if element is None else ValueType("list", True, element)
    for spark_kind, python in _SPARK_VALUE_TYPES:
        if isinstance(kind, spark_kind):
            return ValueType(python, True)
    return None


def markdown() -> str:
    """The generated documentation table, by family."""
    lines = [
        "# Supported functions",
        "",
        "Generated by `python -m engine.planner.functions --markdown > "
        f"{DOCS_PATH}`; a test fails when it is out of date. Every function runs as "
        "a native Spark expression. Aggregates, windows (TUMBLE, HOP, SESSION) and "
        "OVER functions are planned elsewhere; any other name is a planning error.",
        "",
        "| Function | Family | Spark translation | Note |",
        "|---|---|---|---|",
    ]
    for function in sorted(FUNCTIONS.values(), key=lambda f: (f.family, f.name)):
        cells = (f"`{function.name}`", function.family, f"`{function.spark}`", function.note)
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m engine.planner.functions --markdown``: print the documentation table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--markdown", action="store_true", required=True,
                        help="print the function table as Markdown")
    parser.parse_args(argv)
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
