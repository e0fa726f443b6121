"""The scalar function library's table: each function a query may call, by family,
with the Spark built-in it becomes (JSON functions are in :mod:`.json_functions`)."""

from __future__ import annotations

import re

from sqlglot import exp

from spate.engine.planner.function_base import (
    Function,
    Translation,
    Translator,
    arity,
    call,
    rename,
    string_literal,
)
from spate.engine.planner.plan import EVENT_TIME
from spate.engine.planner.windows import IntervalError, interval_micros

# -- time ------------------------------------------------------------------------------------


def _now(node: exp.Func, ctx: Translation) -> exp.Expr:
    # A literal, not Spark's current_timestamp(): that is the micro-batch's
    # start, which would differ between an epoch and its replay.
    arity(node, ctx, "now", 0, 0)
    stamp = ctx.pipeline_start.strftime("%Y-%m-%d %H:%M:%S.%f")
    return exp.cast(exp.Literal.string(stamp), exp.DataType.build("timestamp"))


def _row_time(node: exp.Func, ctx: Translation) -> exp.Expr:
    arity(node, ctx, "row_time", 0, 0)
    return exp.column(EVENT_TIME)


def _to_timestamp(node: exp.Func, ctx: Translation) -> exp.Expr:
    # One argument: text (ISO 8601) or seconds since the epoch; a cast reads both.
    if isinstance(node, exp.UnixToTime):
        return exp.cast(node.this, exp.DataType.build("timestamp"))
    return node


def _from_unixtime(node: exp.Func, ctx: Translation) -> exp.Expr:
    (seconds,) = arity(node, ctx, "from_unixtime", 1, 1)
    return call("TIMESTAMP_SECONDS", seconds)


def _date_bin(node: exp.Func, ctx: Translation) -> exp.Expr:
    if node.args.get("unit") is not None:
        raise ctx.error("date_bin() with an origin is not supported; bins start at "
                        "1970-01-01T00:00:00", node)
    try:
        width_us = interval_micros(node.this)
    except IntervalError as error:
        raise ctx.error(f"date_bin(): {error}", node.this) from error
    micros = call("UNIX_MICROS", node.expression)
    # pmod keeps the arithmetic exact in integers and floors times before 1970 too.
    offset = call("PMOD", micros.copy(), exp.Literal.number(width_us))
    return call("TIMESTAMP_MICROS", exp.Sub(this=micros, expression=offset))


def _current_date(node: exp.Func, ctx: Translation) -> exp.Expr:
    # The pipeline's start date, as now() is its start: an epoch and its replay agree.
    return exp.cast(_now(node, ctx), exp.DataType.build("date"))


def _from_epoch(spark_name: str, name: str) -> Translator:
    """``to_timestamp_seconds(x)`` and kin: a number since the epoch as a timestamp."""
    def translate(node: exp.Func, ctx: Translation) -> exp.Expr:
        (value,) = arity(node, ctx, name, 1, 1)
        return call(spark_name, value)
    return translate


# -- math ------------------------------------------------------------------------------------


def _log(node: exp.Func, ctx: Translation) -> exp.Expr:
    """``log(x)`` is base 10 in the dialect (Spark's one-argument log is natural);
    ``log(base, x)`` is the same in both."""
    args = arity(node, ctx, "log", 1, 2)
    if len(args) == 1:
        return call("LOG10", args[0])
    return call("LOG", *args)


def _trunc(node: exp.Func, ctx: Translation) -> exp.Expr:
    """Toward zero, to ``digits`` decimals (default 0): Spark's trunc is for dates."""
    args = arity(node, ctx, "trunc", 1, 2)
    digits = args[1] if len(args) == 2 else exp.Literal.number(0)
    value = args[0]
    down = call("ROUND", call("FLOOR", value.copy(), digits.copy()), digits.copy())
    up = call("ROUND", call("CEIL", value.copy(), digits.copy()), digits.copy())
    negative = exp.LT(this=value.copy(), expression=exp.Literal.number(0))
    return exp.Case(ifs=[exp.If(this=negative, true=up)], default=down)


# -- strings -------------------------------------------------------------------------------


def _to_hex(node: exp.Func, ctx: Translation) -> exp.Expr:
    (value,) = arity(node, ctx, "to_hex", 1, 1)
    return call("LOWER", call("HEX", value))


# -- regex ---------------------------------------------------------------------------------


def _regexp_match(node: exp.Func, ctx: Translation) -> exp.Expr:
    subject, pattern = arity(node, ctx, "regexp_match", 2, 2)
    regex = string_literal(pattern, ctx, "regexp_match()'s pattern")
    try:
        groups = re.compile(regex).groups
    except re.error as error:
        raise ctx.error(f"regexp_match(): invalid pattern: {error}", pattern) from error
    parts = [call("REGEXP_EXTRACT", subject.copy(), pattern.copy(), exp.Literal.number(i))
             for i in range(1, groups + 1) or [0]]
    matched = exp.RegexpLike(this=subject.copy(), expression=pattern.copy())
    return exp.Case(ifs=[exp.If(this=matched, true=call("ARRAY", *parts))])


# -- arrays, structs, hashes, encodings, casts ---------------------------------------------------


def _array_size(node: exp.Func, ctx: Translation) -> exp.Expr:
    # ARRAY_SIZE, not SIZE: SIZE(NULL) is -1 outside ANSI mode.
    (array,) = arity(node, ctx, "array_length", 1, 1)
    return call("ARRAY_SIZE", array)


def _get_field(node: exp.Func, ctx: Translation) -> exp.Expr:
    struct, key = arity(node, ctx, "get_field", 2, 2)
    name = string_literal(key, ctx, "get_field()'s field name")
    return exp.Dot(this=struct, expression=exp.to_identifier(name, quoted=True))


def _array_slice(node: exp.Func, ctx: Translation) -> exp.Expr:
    """``array_slice(a, begin, end)``: elements begin..end, 1-based and inclusive."""
    array, begin, end = arity(node, ctx, "array_slice", 3, 3)
    length = exp.Add(this=exp.Sub(this=end, expression=begin.copy()),
                     expression=exp.Literal.number(1))
    return call("SLICE", array, begin, call("GREATEST", length, exp.Literal.number(0)))


def _range(inclusive: bool) -> Translator:
    """``range(start, stop[, step])`` (stop excluded) or ``generate_series`` (included)."""
    def translate(node: exp.Func, ctx: Translation) -> exp.Expr:
        name = "generate_series" if inclusive else "range"
        args = arity(node, ctx, name, 1, 3)
        if len(args) == 1:
            args = [exp.Literal.number(0), args[0]]
        start, stop = args[0], args[1]
        step = args[2] if len(args) == 3 else exp.Literal.number(1)
        # An integer direction keeps the arithmetic integral, as sequence() wants.
        direction = exp.Case(ifs=[exp.If(this=exp.LT(this=step.copy(),
                                                     expression=exp.Literal.number(0)),
                                         true=exp.Literal.number(-1))],
                             default=exp.Literal.number(1))
        if not inclusive:  # the last value before stop, in the step's direction
            stop = exp.Sub(this=stop, expression=direction.copy())
        empty = exp.GT(this=exp.Mul(this=exp.Sub(this=stop.copy(), expression=start.copy()),
                                    expression=direction),
                       expression=exp.Literal.number(-1))
        return exp.Case(ifs=[exp.If(this=empty, true=call("SEQUENCE", start, stop, step))],
                        default=call("ARRAY"))
    return translate


def _string_to_array(node: exp.Func, ctx: Translation) -> exp.Expr:
    """``string_to_array(s, delimiter)``: split at a literal delimiter (not a regex)."""
    value, delimiter = arity(node, ctx, "string_to_array", 2, 2)
    text = string_literal(delimiter, ctx, "string_to_array()'s delimiter")
    return call("SPLIT", value, exp.Literal.string(re.escape(text)))


def _array_has_all(node: exp.Func, ctx: Translation) -> exp.Expr:
    array, wanted = arity(node, ctx, "array_has_all", 2, 2)
    return exp.EQ(this=call("ARRAY_SIZE", call("ARRAY_EXCEPT", wanted, array)),
                  expression=exp.Literal.number(0))


def _array_empty(node: exp.Func, ctx: Translation) -> exp.Expr:
    (array,) = arity(node, ctx, "empty", 1, 1)
    return exp.EQ(this=call("ARRAY_SIZE", array), expression=exp.Literal.number(0))


def _sha(bits: int) -> Translator:
    def translate(node: exp.Func, ctx: Translation) -> exp.Expr:
        (value,) = arity(node, ctx, f"sha{bits}", 1, 1)
        return call("SHA2", value, exp.Literal.number(bits))
    return translate


_DIGESTS = {"md5": ("MD5",), "sha1": ("SHA",), "sha224": ("SHA2", 224), "sha256": ("SHA2", 256),
            "sha384": ("SHA2", 384), "sha512": ("SHA2", 512)}


def _digest(node: exp.Func, ctx: Translation) -> exp.Expr:
    value, algorithm = arity(node, ctx, "digest", 2, 2)
    chosen = string_literal(algorithm, ctx, "digest()'s algorithm").lower()
    if chosen not in _DIGESTS:
        raise ctx.error(f"digest() algorithm '{chosen}' is not supported; use one of "
                        f"{', '.join(sorted(_DIGESTS))}", algorithm)
    spark_name, *bits = _DIGESTS[chosen]
    return call(str(spark_name), value, *(exp.Literal.number(b) for b in bits))


_ENCODERS = {"base64": ("BASE64", "UNBASE64"), "hex": ("HEX", "UNHEX")}


def _codec(index: int) -> Translator:
    """``encode`` (index 0) or ``decode`` (index 1) by a literal format name."""
    def translate(node: exp.Func, ctx: Translation) -> exp.Expr:
        name = ("encode", "decode")[index]
        value, fmt = arity(node, ctx, name, 2, 2)
        chosen = string_literal(fmt, ctx, f"{name}()'s format").lower()
        if chosen not in _ENCODERS:
            raise ctx.error(f"{name}() format '{chosen}' is not supported; use "
                            "'base64' or 'hex'", fmt)
        result = call(_ENCODERS[chosen][index], value)
        return call("LOWER", result) if (chosen, index) == ("hex", 0) else result
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
    value, arrow = arity(node, ctx, "arrow_cast", 2, 2)
    wanted = string_literal(arrow, ctx, "arrow_cast()'s type")
    spark_type = _ARROW_TYPES.get(re.sub(r"\s+", " ", wanted.strip().lower()))
    if spark_type is None:
        known = ", ".join(sorted({k.split("(")[0] for k in _ARROW_TYPES}))
        raise ctx.error(f"arrow_cast() cannot cast to '{wanted}'; supported Arrow types: "
                        f"{known}", arrow)
    return exp.cast(value, exp.DataType.build(spark_type, dialect="spark"))



LIBRARY: tuple[Function, ...] = (
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
    Function("signum", "math", "sign(x)", rename("SIGN")),
    Function("log", "math", "log10(x) / log(base, x)", _log, "one argument: base 10"),
    Function("log2", "math", "log2(x)"),
    Function("cbrt", "math", "cbrt(x)"),
    Function("trunc", "math", "toward zero: x < 0 ? ceil(x, d) : floor(x, d)", _trunc,
             "optional number of decimals"),
    Function("pi", "math", "pi()"),
    Function("degrees", "math", "degrees(x)"),
    Function("radians", "math", "radians(x)"),
    Function("sin", "math", "sin(x)"),
    Function("cos", "math", "cos(x)"),
    Function("tan", "math", "tan(x)"),
    Function("cot", "math", "cot(x)"),
    Function("asin", "math", "asin(x)"),
    Function("acos", "math", "acos(x)"),
    Function("atan", "math", "atan(x)"),
    Function("atan2", "math", "atan2(y, x)"),
    Function("sinh", "math", "sinh(x)"),
    Function("cosh", "math", "cosh(x)"),
    Function("tanh", "math", "tanh(x)"),
    Function("asinh", "math", "asinh(x)"),
    Function("acosh", "math", "acosh(x)"),
    Function("atanh", "math", "atanh(x)"),
    Function("factorial", "math", "factorial(n)", note="0 to 20; NULL beyond"),
    Function("isnan", "math", "isnan(x)"),
    Function("nanvl", "math", "nanvl(x, y)"),
    Function("random", "math", "rand()", rename("RAND"),
             note="a new value per row and per run (not replayed alike)"),
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
    Function("character_length", "string", "length(s)", rename("LENGTH")),
    Function("octet_length", "string", "octet_length(s)"),
    Function("bit_length", "string", "bit_length(s)"),
    Function("ascii", "string", "ascii(s)"),
    Function("chr", "string", "chr(n)"),
    Function("to_hex", "string", "lower(hex(n))", _to_hex),
    Function("translate", "string", "translate(s, from, to)"),
    Function("instr", "string", "instr(s, sub)"),
    Function("ends_with", "string", "endswith(s, suffix)", rename("ENDSWITH")),
    Function("contains", "string", "contains(s, sub)"),
    Function("levenshtein", "string", "levenshtein(a, b)"),
    Function("find_in_set", "string", "find_in_set(s, list)"),
    Function("substr_index", "string", "substring_index(s, delimiter, n)",
             rename("SUBSTRING_INDEX")),
    Function("substring_index", "string", "substring_index(s, delimiter, n)"),
    Function("uuid", "string", "uuid()", note="a new value per row and per run"),
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
    Function("nvl2", "conditional", "nvl2(a, if_not_null, if_null)"),
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
    Function("to_unixtime", "time", "unix_seconds(ts)", rename("UNIX_SECONDS"),
             "whole seconds since the epoch"),
    Function("to_timestamp_seconds", "time", "timestamp_seconds(x)",
             _from_epoch("TIMESTAMP_SECONDS", "to_timestamp_seconds")),
    Function("to_timestamp_millis", "time", "timestamp_millis(x)",
             _from_epoch("TIMESTAMP_MILLIS", "to_timestamp_millis")),
    Function("to_timestamp_micros", "time", "timestamp_micros(x)",
             _from_epoch("TIMESTAMP_MICROS", "to_timestamp_micros")),
    Function("datepart", "time", "extract(field FROM ts)", rename("DATE_PART")),
    Function("datetrunc", "time", "date_trunc(unit, ts)", rename("DATE_TRUNC")),
    Function("current_date", "time", "CAST('<pipeline start>' AS DATE)", _current_date,
             "the date of now()"),
    Function("today", "time", "CAST('<pipeline start>' AS DATE)", _current_date,
             "same as current_date()"),
    Function("to_date", "time", "to_date(s)"),
    Function("make_date", "time", "make_date(y, m, d)"),
    # array
    Function("make_array", "array", "array(a, ...)", rename("ARRAY")),
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
    Function("make_list", "array", "array(a, ...)", rename("ARRAY")),
    Function("array_cat", "array", "concat(a, b)", rename("CONCAT")),
    Function("array_push_back", "array", "array_append(arr, x)", rename("ARRAY_APPEND")),
    Function("array_push_front", "array", "array_prepend(arr, x)", rename("ARRAY_PREPEND")),
    Function("array_element", "array", "element_at(arr, i)", rename("ELEMENT_AT"), "1-based"),
    Function("array_extract", "array", "element_at(arr, i)", rename("ELEMENT_AT"), "1-based"),
    Function("array_indexof", "array", "array_position(arr, x)", rename("ARRAY_POSITION")),
    Function("array_has_any", "array", "arrays_overlap(a, b)", rename("ARRAYS_OVERLAP")),
    Function("array_has_all", "array", "array_size(array_except(b, a)) = 0", _array_has_all),
    Function("array_join", "array", "array_join(arr, delimiter)"),
    Function("array_to_string", "array", "array_join(arr, delimiter)", rename("ARRAY_JOIN")),
    Function("array_max", "array", "array_max(arr)"),
    Function("array_min", "array", "array_min(arr)"),
    Function("array_sort", "array", "array_sort(arr)", note="ascending, NULLs last"),
    Function("array_reverse", "array", "reverse(arr)", rename("REVERSE")),
    Function("array_union", "array", "array_union(a, b)", note="without duplicates"),
    Function("array_intersect", "array", "array_intersect(a, b)"),
    Function("array_except", "array", "array_except(a, b)"),
    Function("array_repeat", "array", "array_repeat(x, n)"),
    Function("array_slice", "array", "slice(arr, begin, end - begin + 1)", _array_slice,
             "1-based, end included"),
    Function("array_empty", "array", "array_size(arr) = 0", _array_empty),
    Function("empty", "array", "array_size(arr) = 0", _array_empty),
    Function("flatten", "array", "flatten(arr)"),
    Function("range", "array", "sequence(start, stop - direction, step)", _range(False),
             "stop excluded"),
    Function("generate_series", "array", "sequence(start, stop, step)", _range(True),
             "stop included"),
    Function("string_to_array", "array", "split(s, <quoted delimiter>)", _string_to_array,
             "the delimiter is a literal, not a pattern"),
    Function("list_append", "array", "array_append(arr, x)", rename("ARRAY_APPEND")),
    Function("list_prepend", "array", "array_prepend(arr, x)", rename("ARRAY_PREPEND")),
    Function("list_concat", "array", "concat(a, b)", rename("CONCAT")),
    Function("list_has", "array", "array_contains(arr, x)", rename("ARRAY_CONTAINS")),
    Function("list_length", "array", "array_size(arr)", _array_size),
    Function("list_distinct", "array", "array_distinct(arr)", rename("ARRAY_DISTINCT")),
    Function("list_position", "array", "array_position(arr, x)", rename("ARRAY_POSITION")),
    # struct
    Function("struct", "struct", "struct(a, ...)"),
    Function("named_struct", "struct", "named_struct('name', value, ...)"),
    Function("row", "struct", "struct(a, ...)", rename("STRUCT")),
    Function("get_field", "struct", "s.`name`", _get_field, "field name must be a literal"),
    # hash
    Function("md5", "hash", "md5(x)", note="hex text"),
    Function("sha1", "hash", "sha(x)", note="hex text"),
    Function("sha224", "hash", "sha2(x, 224)", _sha(224), "hex text"),
    Function("sha256", "hash", "sha2(x, 256)", note="hex text"),
    Function("sha384", "hash", "sha2(x, 384)", note="hex text"),
    Function("sha512", "hash", "sha2(x, 512)", note="hex text"),
    Function("digest", "hash", "md5(x) / sha(x) / sha2(x, bits)", _digest,
             "algorithm as a literal: md5, sha1, sha224, sha256, sha384, sha512; hex text"),
    # encode / decode
    Function("encode", "encode", "base64(x) / lower(hex(x))", _codec(0),
             "format 'base64' or 'hex' (a literal)"),
    Function("decode", "encode", "unbase64(s) / unhex(s)", _codec(1),
             "format 'base64' or 'hex' (a literal); returns BYTEA"),
    # cast
    Function("arrow_cast", "cast", "CAST(x AS <Spark type>)", _arrow_cast,
             "Arrow type as a literal: " + ", ".join(sorted(_ARROW_TYPES))),
)
