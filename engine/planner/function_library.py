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
from spate.engine.planner.time_formats import TimeFormatError, spark_pattern
from spate.engine.planner.window import IntervalError, interval_micros

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
    if isinstance(node, exp.Anonymous):  # strftime formats, tried in order
        return _parse_time(node, ctx, "to_timestamp")
    return node


def _parse_time(node: exp.Func, ctx: Translation, name: str) -> exp.Expr:
    """``f(text, format, ...)``: the first format that reads the text (else NULL)."""
    value, *formats = arity(node, ctx, name, 2, 16)
    attempts = [call("TRY_TO_TIMESTAMP", value.copy(),
                     exp.Literal.string(_pattern(f, ctx, name, parsing=True)))
                for f in formats]
    return attempts[0] if len(attempts) == 1 else exp.Coalesce(this=attempts[0],
                                                               expressions=attempts[1:])


def _pattern(node: exp.Expr, ctx: Translation, name: str, *, parsing: bool) -> str:
    text = string_literal(node, ctx, f"{name}()'s format")
    try:
        return spark_pattern(text, parsing=parsing)
    except TimeFormatError as error:
        raise ctx.error(f"{name}(): {error}", node) from error


def _to_char(node: exp.Func, ctx: Translation) -> exp.Expr:
    """``to_char(ts, '%d-%m-%Y')`` (``date_format``); a PostgreSQL format is sqlglot's."""
    if isinstance(node, exp.TimeToStr):
        return node
    value, fmt = arity(node, ctx, "to_char", 2, 2)
    return call("DATE_FORMAT", value, exp.Literal.string(_pattern(fmt, ctx, "to_char",
                                                                  parsing=False)))


def _date_part(node: exp.Func, ctx: Translation) -> exp.Expr:
    """``extract(field FROM ts)`` / ``date_part('field', ts)``, with PostgreSQL's fields:
    ``dow`` counts from Sunday = 0, ``epoch`` and the sub-second fields are numbers of
    seconds, milli-, micro- or nanoseconds (with the seconds' fraction)."""
    if not isinstance(node, exp.Extract):  # datepart('field', ts)
        field, value = arity(node, ctx, "datepart", 2, 2)
        name = string_literal(field, ctx, "datepart()'s field")
        node = exp.Extract(this=exp.var(name.upper()), expression=value)
    field_name = node.this.name.lower() if isinstance(node.this, exp.Expr) else ""
    value = node.expression
    seconds = exp.Extract(this=exp.var("SECOND"), expression=value.copy())
    scaled = {"millisecond": 1_000, "milliseconds": 1_000, "microsecond": 1_000_000,
              "microseconds": 1_000_000, "nanosecond": 1_000_000_000,
              "nanoseconds": 1_000_000_000}
    if field_name == "dow":  # Spark counts from Sunday = 1
        return exp.Sub(this=node.copy(), expression=exp.Literal.number(1))
    if field_name == "epoch":
        return exp.Div(this=exp.cast(call("UNIX_MICROS", value), exp.DataType.build("double")),
                       expression=exp.Literal.number(1_000_000))
    if field_name in scaled:
        return exp.cast(exp.Mul(this=seconds, expression=exp.Literal.number(scaled[field_name])),
                        exp.DataType.build("double"))
    return node


def _from_unixtime(node: exp.Func, ctx: Translation) -> exp.Expr:
    (seconds,) = arity(node, ctx, "from_unixtime", 1, 1)
    return call("TIMESTAMP_SECONDS", seconds)


def _date_bin(node: exp.Func, ctx: Translation) -> exp.Expr:
    """The start of the bin of ``width`` holding the time; bins start at ``origin``
    (default 1970-01-01T00:00:00) and every ``width`` from it."""
    try:
        width_us = interval_micros(node.this)
    except IntervalError as error:
        raise ctx.error(f"date_bin(): {error}", node.this) from error
    micros = call("UNIX_MICROS", node.expression)
    origin = node.args.get("unit")  # sqlglot's name for the third argument
    if isinstance(origin, exp.Expr):
        micros = exp.Sub(this=micros, expression=call("UNIX_MICROS", origin.copy()))
    # pmod keeps the arithmetic exact in integers and floors times before the origin too.
    offset = call("PMOD", micros.copy(), exp.Literal.number(width_us))
    start = exp.Sub(this=call("UNIX_MICROS", node.expression.copy()), expression=offset)
    return call("TIMESTAMP_MICROS", start)


def _current_date(node: exp.Func, ctx: Translation) -> exp.Expr:
    # The pipeline's start date, as now() is its start: an epoch and its replay agree.
    return exp.cast(_now(node, ctx), exp.DataType.build("date"))


def _from_epoch(spark_name: str, name: str, unit: str) -> Translator:
    """``to_timestamp_seconds(x)`` and kin: a number since the epoch as a timestamp; text
    (a literal, or with strftime formats) is parsed, then truncated to ``unit``."""
    def translate(node: exp.Func, ctx: Translation) -> exp.Expr:
        args = arity(node, ctx, name, 1, 16)
        value = args[0]
        if len(args) > 1:
            parsed = _parse_time(node, ctx, name)
        elif isinstance(value, exp.Literal) and value.is_string:
            parsed = exp.cast(value, exp.DataType.build("timestamp"))
        elif spark_name == "TIMESTAMP_NANOS":  # Spark keeps microseconds: floor the rest
            micros = exp.IntDiv(this=exp.Paren(this=exp.Sub(this=value, expression=call(
                "PMOD", value.copy(), exp.Literal.number(1000)))),
                expression=exp.Literal.number(1000))
            return call("TIMESTAMP_MICROS", micros)
        else:
            return call(spark_name, value)
        return call("DATE_TRUNC", exp.Literal.string(unit), parsed)
    return translate


def _current_time(node: exp.Func, ctx: Translation) -> exp.Expr:
    # TIME is text in Spate: the time of day of now().
    return call("DATE_FORMAT", _now(node, ctx), exp.Literal.string("HH:mm:ss.SSSSSS"))


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


#: Flags of the regex functions -> Java's inline flags.
_REGEX_FLAGS = {"i": "i", "m": "m", "s": "s"}


def _flagged(pattern: exp.Expr, flags: exp.Expr | None, ctx: Translation, name: str,
             allowed: str = "") -> exp.Expr:
    """``pattern`` with ``flags`` (a literal such as 'i') as an inline ``(?i)`` prefix;
    letters in ``allowed`` are accepted and handled by the caller. A literal pattern's
    named groups ``(?P<name>...)`` are written as Java's ``(?<name>...)``."""
    if isinstance(pattern, exp.Literal) and pattern.is_string:
        pattern = exp.Literal.string(str(pattern.name).replace("(?P<", "(?<"))
    if flags is None:
        return pattern
    letters = string_literal(flags, ctx, f"{name}()'s flags")
    unknown = sorted(set(letters) - set(_REGEX_FLAGS) - set(allowed))
    if unknown:
        raise ctx.error(f"{name}(): flag '{unknown[0]}' is not supported yet (supported: "
                        f"{', '.join(sorted({*_REGEX_FLAGS, *allowed}))})", flags)
    inline = "".join(sorted({_REGEX_FLAGS[f] for f in letters if f in _REGEX_FLAGS}))
    if not inline:
        return pattern
    prefix = exp.Literal.string(f"(?{inline})")
    if isinstance(pattern, exp.Literal) and pattern.is_string:
        return exp.Literal.string(prefix.name + str(pattern.name))
    return call("CONCAT", prefix, pattern)


def _regexp_like(node: exp.Func, ctx: Translation) -> exp.Expr:
    subject, pattern, *flags = arity(node, ctx, "regexp_like", 2, 3)
    return exp.RegexpLike(this=subject, expression=_flagged(
        pattern, flags[0] if flags else None, ctx, "regexp_like"))


def _java_replacement(text: str, shift: int = 0) -> str:
    """A replacement in the dialect's syntax (``\\1`` or ``$1``/``${1}`` for a group, other
    text literal) in Java's (``$1``; backslash and a literal ``$`` escaped), each group
    number raised by ``shift`` (for a pattern wrapped in groups of its own)."""
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        following = text[index + 1] if index + 1 < len(text) else ""
        braced = re.match(r"\$\{(\d+)\}", text[index:]) if char == "$" else None
        if char in "\\$" and following.isdigit():
            out.append(f"${int(following) + shift}")
            index += 2
        elif braced:
            out.append(f"${{{int(braced.group(1)) + shift}}}")
            index += braced.end()
        elif char == "\\":
            out.append("\\\\")
            index += 1
        elif char == "$" and following == "$":
            out.append("\\$")
            index += 2
        else:
            out.append(char)
            index += 1
    return "".join(out)


#: Wraps a pattern so that only its first match is replaced: the text before it
#: is group 1, put back by the replacement.
_FIRST_MATCH = "^([\\s\\S]*?)(?:{pattern})"


def _regexp_replace(node: exp.Func, ctx: Translation) -> exp.Expr:
    """The first match is replaced; with flag 'g', every match."""
    subject, pattern, replacement, *flags = arity(node, ctx, "regexp_replace", 3, 4)
    every = bool(flags) and "g" in string_literal(flags[0], ctx, "regexp_replace()'s flags")
    pattern = _flagged(pattern, flags[0] if flags else None, ctx, "regexp_replace",
                       allowed="g")
    if every:
        if isinstance(replacement, exp.Literal) and replacement.is_string:
            replacement = exp.Literal.string(_java_replacement(str(replacement.name)))
        return call("REGEXP_REPLACE", subject, pattern, replacement)
    regex = string_literal(pattern, ctx, "regexp_replace()'s pattern")
    text = string_literal(replacement, ctx, "regexp_replace()'s replacement (without flag 'g')")
    return call("REGEXP_REPLACE", subject,
                exp.Literal.string(_FIRST_MATCH.format(pattern=regex)),
                exp.Literal.string("$1" + _java_replacement(text, shift=1)))


def _regexp_match(node: exp.Func, ctx: Translation) -> exp.Expr:
    subject, pattern, *flags = arity(node, ctx, "regexp_match", 2, 3)
    regex = string_literal(pattern, ctx, "regexp_match()'s pattern")
    try:
        groups = re.compile(regex).groups
    except re.error as error:
        raise ctx.error(f"regexp_match(): invalid pattern: {error}", pattern) from error
    pattern = _flagged(pattern, flags[0] if flags else None, ctx, "regexp_match")
    parts = [call("REGEXP_EXTRACT", subject.copy(), pattern.copy(), exp.Literal.number(i))
             for i in range(1, groups + 1) or [0]]
    matched = exp.RegexpLike(this=subject.copy(), expression=pattern.copy())
    return exp.Case(ifs=[exp.If(this=matched, true=call("ARRAY", *parts))])


# -- arrays, structs, hashes, encodings, casts ---------------------------------------------------


def _array_size(node: exp.Func, ctx: Translation) -> exp.Expr:
    # ARRAY_SIZE, not SIZE: SIZE(NULL) is -1 outside ANSI mode.
    (array,) = arity(node, ctx, "array_length", 1, 1)
    return call("ARRAY_SIZE", array)


def _struct(node: exp.Func, ctx: Translation) -> exp.Expr:
    """``struct(a, b AS name)``: fields named c0, c1, ... unless named with AS."""
    values = node.expressions if isinstance(node, exp.Struct | exp.Anonymous) else []
    pairs: list[exp.Expr] = []
    for index, value in enumerate(values):
        name = f"c{index}"
        if isinstance(value, exp.PropertyEQ | exp.Alias):
            name = value.alias if isinstance(value, exp.Alias) else value.this.name
            value = value.this if isinstance(value, exp.Alias) else value.expression
        pairs.extend([exp.Literal.string(name), value])
    return call("NAMED_STRUCT", *pairs)


def _iszero(node: exp.Func, ctx: Translation) -> exp.Expr:
    (value,) = arity(node, ctx, "iszero", 1, 1)
    return exp.EQ(this=value, expression=exp.Literal.number(0))


def _element(node: exp.Func, ctx: Translation) -> exp.Expr:
    """The element at a 1-based index (negative: from the end); index 0 is NULL."""
    array, index = arity(node, ctx, "array_element", 2, 2)
    zero = exp.EQ(this=index.copy(), expression=exp.Literal.number(0))
    return exp.Case(ifs=[exp.If(this=zero, true=exp.null())],
                    default=call("ELEMENT_AT", array, index))


def _get_field(node: exp.Func, ctx: Translation) -> exp.Expr:
    struct, key = arity(node, ctx, "get_field", 2, 2)
    name = string_literal(key, ctx, "get_field()'s field name")
    return exp.Dot(this=struct, expression=exp.to_identifier(name, quoted=True))


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


def _prepend(node: exp.Func, ctx: Translation) -> exp.Expr:
    value, array = arity(node, ctx, "array_prepend", 2, 2)
    return call("ARRAY_PREPEND", array, value)


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
        raise ctx.error(f"digest() algorithm '{chosen}' is not supported yet; use one of "
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
        raise ctx.error(f"arrow_cast() cannot cast to '{wanted}': it is not supported yet; "
                        f"supported Arrow types: {known}", arrow)
    return exp.cast(value, exp.DataType.build(spark_type, dialect="spark"))



_DATE_PART_NOTE = ("dow counts from Sunday = 0; epoch, millisecond, microsecond and "
                   "nanosecond count seconds (with their fraction) in that unit")
_EPOCH_NOTE = "text is parsed (optionally with strftime formats), then truncated to the unit"

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
    Function("iszero", "math", "x = 0", _iszero),
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
    Function("position", "string", "locate(sub, s)", note="position(sub IN s)"),
    Function("overlay", "string", "overlay(s PLACING r FROM start [FOR count])"),
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
    Function("regexp_like", "regex", "s RLIKE '(?flags)' || pattern", _regexp_like,
             "Java regular expressions; flags i, m, s"),
    Function("regexp_match", "regex",
             "CASE WHEN s RLIKE p THEN array(regexp_extract(s, p, 1), ...) END",
             _regexp_match, "pattern must be a literal; the array holds the first match's "
             "groups (the whole match when it has none); flags i, m, s"),
    Function("regexp_replace", "regex", "regexp_replace(s, '(?flags)' || pattern, replacement)",
             _regexp_replace, "the first match is replaced, every match with flag 'g'; flags "
             "i, m, s; \\1 or $1 in the replacement is the first group; without 'g' the "
             "pattern and replacement must be literals"),
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
             "start at the optional origin, by default the epoch"),
    Function("extract", "time", "extract(field FROM ts)", _date_part, _DATE_PART_NOTE),
    Function("date_part", "time", "extract(field FROM ts)", _date_part, _DATE_PART_NOTE),
    Function("to_timestamp", "time", "CAST(x AS TIMESTAMP) / try_to_timestamp(s, pattern)",
             _to_timestamp, "one argument: ISO 8601 text or seconds since the epoch; more: "
             "text and strftime formats (%Y-%m-%d), tried in order (NULL if none reads "
             "it), or one PostgreSQL format (YYYY-MM-DD)"),
    Function("to_char", "time", "date_format(ts, pattern)", _to_char,
             "a strftime format (%d-%m-%Y) or a PostgreSQL one (DD-MM-YYYY)"),
    Function("date_format", "time", "date_format(ts, pattern)", _to_char,
             "a strftime format, as to_char"),
    Function("from_unixtime", "time", "timestamp_seconds(x)", _from_unixtime),
    Function("unix_seconds", "time", "unix_seconds(ts)", note="whole seconds since the epoch"),
    Function("unix_millis", "time", "unix_millis(ts)", note="milliseconds since the epoch"),
    Function("unix_micros", "time", "unix_micros(ts)", note="microseconds since the epoch"),
    Function("to_unixtime", "time", "unix_seconds(ts)", rename("UNIX_SECONDS"),
             "whole seconds since the epoch"),
    Function("to_timestamp_seconds", "time", "timestamp_seconds(x)",
             _from_epoch("TIMESTAMP_SECONDS", "to_timestamp_seconds", "SECOND"),
             _EPOCH_NOTE),
    Function("to_timestamp_millis", "time", "timestamp_millis(x)",
             _from_epoch("TIMESTAMP_MILLIS", "to_timestamp_millis", "MILLISECOND"),
             _EPOCH_NOTE),
    Function("to_timestamp_micros", "time", "timestamp_micros(x)",
             _from_epoch("TIMESTAMP_MICROS", "to_timestamp_micros", "MICROSECOND"),
             _EPOCH_NOTE),
    Function("to_timestamp_nanos", "time", "timestamp_micros((x - pmod(x, 1000)) div 1000)",
             _from_epoch("TIMESTAMP_NANOS", "to_timestamp_nanos", "MICROSECOND"),
             "timestamps keep microseconds: the nanoseconds below are dropped; "
             + _EPOCH_NOTE),
    Function("current_time", "time", "date_format(<pipeline start>, 'HH:mm:ss.SSSSSS')",
             _current_time, "the time of day of now(), as TIME text"),
    Function("datepart", "time", "extract(field FROM ts)", _date_part, "same as date_part"),
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
    Function("array_distinct", "array", "array_distinct(arr)"),
    Function("cardinality", "array", "array_size(arr)", _array_size),
    Function("make_list", "array", "array(a, ...)", rename("ARRAY")),
    Function("array_cat", "array", "concat(a, b)", rename("CONCAT")),
    Function("array_push_back", "array", "array_append(arr, x)", rename("ARRAY_APPEND")),
    Function("array_push_front", "array", "array_prepend(arr, x)", _prepend,
             "the element first, as array_prepend(x, arr)"),
    Function("array_element", "array", "element_at(arr, i)", _element,
             "1-based; negative counts from the end; 0 is NULL"),
    Function("array_extract", "array", "element_at(arr, i)", _element,
             "1-based; negative counts from the end; 0 is NULL"),
    Function("array_has_any", "array", "arrays_overlap(a, b)", rename("ARRAYS_OVERLAP")),
    Function("array_has_all", "array", "array_size(array_except(b, a)) = 0", _array_has_all),
    Function("array_join", "array", "array_join(arr, delimiter)"),
    Function("array_to_string", "array", "array_join(arr, delimiter)", rename("ARRAY_JOIN")),
    Function("array_max", "array", "array_max(arr)"),
    Function("array_min", "array", "array_min(arr)"),
    Function("array_reverse", "array", "reverse(arr)", rename("REVERSE")),
    Function("array_union", "array", "array_union(a, b)", note="without duplicates"),
    Function("array_intersect", "array", "array_intersect(a, b)"),
    Function("array_except", "array", "array_except(a, b)"),
    Function("array_repeat", "array", "array_repeat(x, n)"),
    Function("array_empty", "array", "array_size(arr) = 0", _array_empty),
    Function("empty", "array", "array_size(arr) = 0", _array_empty),
    Function("flatten", "array", "flatten(arr)"),
    Function("range", "array", "sequence(start, stop - direction, step)", _range(False),
             "stop excluded"),
    Function("generate_series", "array", "sequence(start, stop, step)", _range(True),
             "stop included"),
    Function("list_append", "array", "array_append(arr, x)", rename("ARRAY_APPEND")),
    Function("list_prepend", "array", "array_prepend(arr, x)", _prepend,
             "the element first, as array_prepend(x, arr)"),
    Function("list_push_front", "array", "array_prepend(arr, x)", _prepend,
             "the element first, as array_prepend(x, arr)"),
    Function("list_push_back", "array", "array_append(arr, x)", rename("ARRAY_APPEND")),
    Function("list_cat", "array", "concat(a, b)", rename("CONCAT")),
    Function("list_element", "array", "element_at(arr, i)", _element,
             "1-based; negative counts from the end; 0 is NULL"),
    Function("list_extract", "array", "element_at(arr, i)", _element,
             "1-based; negative counts from the end; 0 is NULL"),
    Function("list_empty", "array", "array_size(arr) = 0", _array_empty),
    Function("list_except", "array", "array_except(a, b)", rename("ARRAY_EXCEPT")),
    Function("list_has_all", "array", "array_size(array_except(b, a)) = 0", _array_has_all),
    Function("list_has_any", "array", "arrays_overlap(a, b)", rename("ARRAYS_OVERLAP")),
    Function("list_intersect", "array", "array_intersect(a, b)", rename("ARRAY_INTERSECT")),
    Function("list_join", "array", "array_join(arr, delimiter)", rename("ARRAY_JOIN")),
    Function("list_to_string", "array", "array_join(arr, delimiter)", rename("ARRAY_JOIN")),
    Function("list_repeat", "array", "array_repeat(x, n)", rename("ARRAY_REPEAT")),
    Function("list_reverse", "array", "reverse(arr)", rename("REVERSE")),
    Function("list_union", "array", "array_union(a, b)", rename("ARRAY_UNION"),
             "without duplicates"),
    Function("list_concat", "array", "concat(a, b)", rename("CONCAT")),
    Function("list_has", "array", "array_contains(arr, x)", rename("ARRAY_CONTAINS")),
    Function("list_distinct", "array", "array_distinct(arr)", rename("ARRAY_DISTINCT")),
    # struct
    Function("struct", "struct", "named_struct('c0', a, ...)", _struct,
             "fields c0, c1, ... unless named: struct(a AS name, ...)"),
    Function("named_struct", "struct", "named_struct('name', value, ...)"),
    Function("row", "struct", "named_struct('c0', a, ...)", _struct, "same as struct"),
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
