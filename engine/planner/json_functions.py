"""The JSON functions and operators: JSON is text, paths are built at planning.

``json_get``, ``json_get_json`` and ``->`` return JSON text (a string quoted,
a JSON null as ``null``), through Spark's variant type; ``json_as_text``,
``json_get_str`` and ``->>`` return the value as text (a string unquoted),
through ``get_json_object``. Keys are string or integer literals, so every
path is fixed when the query is planned.
"""

from __future__ import annotations

import re

from sqlglot import exp

from spate.engine.planner.function_base import (
    Function,
    Translation,
    Translator,
    arity,
    call,
    string_literal,
)

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
    args = arity(node, ctx, name, 1, 64)
    if len(args) == 1:
        return args[0]
    return call("GET_JSON_OBJECT", args[0], exp.Literal.string(_json_path(args[1:], ctx, name)))


def _as_json(document: exp.Expr, path: str) -> exp.Expr:
    """The value at ``path`` as JSON text: a string comes back quoted, a JSON null as
    ``null``, a missing key or a document that is not JSON as SQL NULL (``->``)."""
    parsed = call("TRY_PARSE_JSON", document)
    value = call("TRY_VARIANT_GET", parsed, exp.Literal.string(path),
                  exp.Literal.string("variant"))
    return call("TO_JSON", value)


def _json_value(name: str) -> Translator:
    """``json_get``/``json_get_json``: the value at the keys as JSON text."""
    def translate(node: exp.Func, ctx: Translation) -> exp.Expr:
        args = arity(node, ctx, name, 1, 64)
        if len(args) == 1:
            return args[0]
        return _as_json(args[0], _json_path(args[1:], ctx, name))
    return translate


def _json_arrow(node: exp.Func, ctx: Translation) -> exp.Expr:
    """``j -> 'k'`` (and ``j -> 0``): the value as JSON text, as ``json_get``."""
    steps = node.expression.expressions if isinstance(node.expression, exp.JSONPath) else []
    keys: list[exp.Expr] = []
    for step in steps:
        if isinstance(step, exp.JSONPathKey):
            keys.append(exp.Literal.string(str(step.this)))
        elif isinstance(step, exp.JSONPathSubscript):
            keys.append(exp.Literal.number(str(step.this)))
        elif not isinstance(step, exp.JSONPathRoot):
            raise ctx.error("->: the key must be a string or integer literal", node)
    return _as_json(node.this, _json_path(keys, ctx, "->"))


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
        args = arity(node, ctx, "json_contains", 2, 64)
    parent = args[0] if len(args) == 2 else call(
        "GET_JSON_OBJECT", args[0], exp.Literal.string(_json_path(args[1:-1], ctx,
                                                                  "json_contains")))
    last = args[-1]
    _json_path([last], ctx, "json_contains")  # validates the key
    if isinstance(last, exp.Literal) and last.is_string:
        test: exp.Expr = exp.ArrayContains(this=call("JSON_OBJECT_KEYS", parent),
                                           expression=last.copy())
    else:
        test = exp.GT(this=call("JSON_ARRAY_LENGTH", parent), expression=last.copy())
    return exp.Coalesce(this=test, expressions=[exp.false()])


def _json_length(node: exp.Func, ctx: Translation) -> exp.Expr:
    value = _json_at(node, ctx, "json_length")
    return exp.Coalesce(this=call("JSON_ARRAY_LENGTH", value),
                        expressions=[call("ARRAY_SIZE", call("JSON_OBJECT_KEYS",
                                                               value.copy()))])


def _json_path_call(name: str, as_array: bool) -> Translator:
    def translate(node: exp.Func, ctx: Translation) -> exp.Expr:
        document, path = arity(node, ctx, name, 2, 2)
        text = string_literal(path, ctx, f"{name}()'s JSONPath")
        if not text.startswith("$") or "*" in text or ".." in text:
            raise ctx.error(f"{name}(): JSONPath '{text}' is not supported yet; use a path "
                            "from '$' of .field and [index] steps, without wildcards", path)
        value = call("GET_JSON_OBJECT", document, path.copy())
        if not as_array:
            return value
        found = exp.Not(this=exp.Is(this=value.copy(), expression=exp.null()))
        return exp.Case(ifs=[exp.If(this=found, true=call("ARRAY", value))],
                        default=call("ARRAY"))
    return translate




JSON_FUNCTIONS: tuple[Function, ...] = (
    Function("json_get", "json", "to_json(try_variant_get(try_parse_json(j), '$.k...', "
             "'variant'))", _json_value("json_get"),
             "keys are string or integer literals; the value as JSON text (a string quoted, "
             "a JSON null as null)"),
    Function("->", "json", "to_json(try_variant_get(try_parse_json(j), '$.k', 'variant'))",
             _json_arrow, "operator: j -> 'k' or j -> 0; the value as JSON text, as json_get"),
    Function("json_get_str", "json", "get_json_object(j, '$.k...')",
             _json_get("json_get_str")),
    Function("json_get_int", "json", "CAST(get_json_object(j, '$.k...') AS BIGINT)",
             _json_get("json_get_int", "BIGINT")),
    Function("json_get_float", "json", "CAST(get_json_object(j, '$.k...') AS DOUBLE)",
             _json_get("json_get_float", "DOUBLE")),
    Function("json_get_bool", "json", "CAST(get_json_object(j, '$.k...') AS BOOLEAN)",
             _json_get("json_get_bool", "BOOLEAN")),
    Function("json_get_json", "json", "to_json(try_variant_get(try_parse_json(j), '$.k...', "
             "'variant'))", _json_value("json_get_json"), "the value as JSON text"),
    Function("json_as_text", "json", "get_json_object(j, '$.k...')",
             _json_get("json_as_text")),
    Function("->>", "json", "get_json_object(j, '$.k')",
             note="operator: j ->> 'k'; the value as text (a string unquoted), as json_as_text"),
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
)
