"""The JSON functions and operators: JSON is text, paths are built at planning.

They follow the dialect's JSON functions (docs/sql/functions.md#json):

- ``json_get`` and ``->`` give the value as JSON text (a string quoted); a JSON
  null, a path that leads nowhere or a document that is not JSON give the text
  ``null``, as the dialect's JSON value does when written out; ``json_get_json``
  gives SQL NULL for a path that leads nowhere;
- ``json_get_str``, ``json_get_int``, ``json_get_float`` and ``json_get_bool``
  give a value of their type only where the JSON value is of it (a string, an
  integer, any number, a boolean), NULL otherwise: ``"7"`` is no integer;
- ``json_as_text`` and ``->>`` give the value as text (a string unquoted), NULL
  for a JSON null;
- a path reads through the result of ``json_get`` or ``->``: ``j -> 'a' -> 0``
  is ``json_get(j, 'a', 0)``, read in one pass, and ``CAST(j -> 'a' AS BIGINT)``
  (or ``::TEXT``, ``DOUBLE``, ``BOOLEAN``) is the typed getter of that path.

Typed values come from Spark's variant type, which knows a JSON value's type;
text from ``get_json_object``.  Keys are string or integer literals, so every
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
#: ``meta`` key of a translated ``json_get``/``->``: its (document, keys), so a JSON
#: function, operator or cast applied to it reads the whole path from the document
_PATH_META = "spate_json_path"
#: The typed getters: the variant types (``schema_of_variant``) each takes, its Spark type
_TYPED = {
    "json_get_str": ("^STRING$", "string"),
    "json_get_int": ("^BIGINT$", "bigint"),
    "json_get_float": ("^(BIGINT|DECIMAL|DOUBLE)", "double"),
    "json_get_bool": ("^BOOLEAN$", "boolean"),
}
#: Casts of a ``json_get`` that read its path as a typed getter instead
_CAST_GETTERS = {
    exp.DataType.Type.BOOLEAN: "json_get_bool", exp.DataType.Type.DOUBLE: "json_get_float",
    exp.DataType.Type.FLOAT: "json_get_float", exp.DataType.Type.BIGINT: "json_get_int",
    exp.DataType.Type.INT: "json_get_int", exp.DataType.Type.TEXT: "json_get_str",
    exp.DataType.Type.VARCHAR: "json_get_str", exp.DataType.Type.CHAR: "json_get_str",
}


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


def _document_and_path(document: exp.Expr, keys: list[exp.Expr], ctx: Translation,
                       name: str) -> tuple[exp.Expr, list[exp.Expr], str]:
    """The document a path reads and its keys: through a ``json_get`` it reads, from
    that call's document (the keys joined), and the keys' JSONPath."""
    inner = _json_get_of(document)
    if inner is not None:
        document, before = inner
        keys = [*before, *keys]
    return document.copy(), keys, _json_path(keys, ctx, name)


def _json_get_of(node: exp.Expr) -> tuple[exp.Expr, list[exp.Expr]] | None:
    """The (document, keys) of a translated ``json_get``/``->`` (in parentheses or not)."""
    while isinstance(node, exp.Paren):
        node = node.this
    path: tuple[exp.Expr, list[exp.Expr]] | None = node.meta.get(_PATH_META)
    return path


def _variant_at(document: exp.Expr, path: str) -> exp.Expr:
    """The JSON value at ``path`` as a variant (SQL NULL where there is none)."""
    return call("TRY_VARIANT_GET", call("TRY_PARSE_JSON", document),
                exp.Literal.string(path), exp.Literal.string("variant"))


def _json_text(document: exp.Expr, path: str) -> exp.Expr:
    """The value at ``path`` as JSON text, SQL NULL where there is none: a JSON null is
    ``null``, a string keeps its quotes (the variant knows it is one), anything else is
    as ``get_json_object`` writes it (an object's fields in their order, which the
    variant would sort)."""
    value = _variant_at(document, path)
    is_string = exp.EQ(this=call("SCHEMA_OF_VARIANT", value),
                       expression=exp.Literal.string("STRING"))
    return exp.Case(ifs=[
        exp.If(this=call("IS_VARIANT_NULL", value.copy()), true=exp.Literal.string("null")),
        exp.If(this=is_string, true=call("TO_JSON", value.copy())),
    ], default=call("GET_JSON_OBJECT", document.copy(), exp.Literal.string(path)))


def _json_value(document: exp.Expr, keys: list[exp.Expr], ctx: Translation,
                name: str) -> exp.Expr:
    """``json_get``: the value as JSON text, ``null`` where there is none."""
    document, keys, path = _document_and_path(document, keys, ctx, name)
    value = exp.Coalesce(this=_json_text(document, path),
                         expressions=[exp.Literal.string("null")])
    value.meta[_PATH_META] = (document, keys)
    return value


def _typed(document: exp.Expr, keys: list[exp.Expr], ctx: Translation,
           name: str) -> exp.Expr:
    """A typed getter: the value where the JSON value has the getter's type, else NULL."""
    document, _, path = _document_and_path(document, keys, ctx, name)
    kinds, spark_type = _TYPED[name]
    value = _variant_at(document, path)
    matches = exp.RegexpLike(this=call("SCHEMA_OF_VARIANT", value),
                             expression=exp.Literal.string(kinds))
    return exp.If(this=matches, true=call("TRY_VARIANT_GET", value.copy(),
                                          exp.Literal.string("$"),
                                          exp.Literal.string(spark_type)),
                  false=exp.null())


def _text(document: exp.Expr, keys: list[exp.Expr], ctx: Translation,
          name: str) -> exp.Expr:
    """``json_as_text``: the value as text, a string unquoted, NULL for a JSON null."""
    document, _, path = _document_and_path(document, keys, ctx, name)
    return call("GET_JSON_OBJECT", document, exp.Literal.string(path))


def _json_call(name: str) -> Translator:
    """``name(j, key, ...)``: the value at the keys, as the function gives it."""
    def translate(node: exp.Func, ctx: Translation) -> exp.Expr:
        document, *keys = arity(node, ctx, name, 1, 64)
        if name in _TYPED:
            return _typed(document, keys, ctx, name)
        if name == "json_get":
            return _json_value(document, keys, ctx, name)
        if name == "json_get_json":
            document, _, path = _document_and_path(document, keys, ctx, name)
            return _json_text(document, path)
        return _text(document, keys, ctx, name)
    return translate


def _operator_keys(node: exp.Func, ctx: Translation, name: str) -> list[exp.Expr]:
    """The keys of ``j -> 'k'`` / ``j ->> 0`` (sqlglot keeps them as a JSONPath)."""
    steps = node.expression.expressions if isinstance(node.expression, exp.JSONPath) else []
    keys: list[exp.Expr] = []
    for step in steps:
        if isinstance(step, exp.JSONPathKey):
            keys.append(exp.Literal.string(str(step.this)))
        elif isinstance(step, exp.JSONPathSubscript):
            keys.append(exp.Literal.number(str(step.this)))
        elif not isinstance(step, exp.JSONPathRoot):
            raise ctx.error(f"{name}: the key must be a string or integer literal", node)
    return keys


def _json_arrow(node: exp.Func, ctx: Translation) -> exp.Expr:
    """``j -> 'k'`` (and ``j -> 0``): the value as JSON text, as ``json_get``."""
    return _json_value(node.this, _operator_keys(node, ctx, "->"), ctx, "->")


def _json_arrow_text(node: exp.Func, ctx: Translation) -> exp.Expr:
    """``j ->> 'k'``: the value as text, as ``json_as_text``."""
    return _text(node.this, _operator_keys(node, ctx, "->>"), ctx, "->>")


def json_cast(cast: exp.Cast, ctx: Translation) -> exp.Expr | None:
    """``CAST(json_get(j, ...) AS t)`` (or ``->``) for a BIGINT, INT, DOUBLE, FLOAT,
    BOOLEAN or text ``t``: the typed getter of the path, cast to ``t``; None for any
    other cast."""
    inner = _json_get_of(cast.this)
    getter = _CAST_GETTERS.get(cast.to.this) if isinstance(cast.to, exp.DataType) else None
    if inner is None or getter is None:
        return None
    document, keys = inner
    typed = _typed(document, keys, ctx, getter)
    return exp.Cast(this=typed, to=cast.to.copy())


def _json_contains(node: exp.Func, ctx: Translation) -> exp.Expr:
    """Whether the path exists (its value may be a JSON null)."""
    if isinstance(node, exp.JSONBContainsTopKey):  # j ? 'k'
        args = [node.this, node.expression]
    else:
        args = arity(node, ctx, "json_contains", 2, 64)
    document, keys, _ = _document_and_path(args[0], args[1:], ctx, "json_contains")
    parent = call("GET_JSON_OBJECT", document,
                  exp.Literal.string(_json_path(keys[:-1], ctx, "json_contains")))
    last = keys[-1]
    _json_path([last], ctx, "json_contains")  # validates the key
    if isinstance(last, exp.Literal) and last.is_string:
        test: exp.Expr = exp.ArrayContains(this=call("JSON_OBJECT_KEYS", parent),
                                           expression=last.copy())
    else:
        test = exp.GT(this=call("JSON_ARRAY_LENGTH", parent), expression=last.copy())
    return exp.Coalesce(this=test, expressions=[exp.false()])


def _json_length(node: exp.Func, ctx: Translation) -> exp.Expr:
    document, *keys = arity(node, ctx, "json_length", 1, 64)
    value = _text(document, keys, ctx, "json_length")
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


#: The Spark text of a JSON value at a path: v is its variant, which knows its type
_TEXT = "if(v is a string, to_json(v), get_json_object(j, '$.k...'))"
_V = "v: try_variant_get(try_parse_json(j), '$.k...', 'variant')"

JSON_FUNCTIONS: tuple[Function, ...] = (
    Function("json_get", "json", f"coalesce({_TEXT}, 'null')", _json_call("json_get"),
             f"the value as JSON text (a string quoted, a JSON null or no value as null); {_V}"),
    Function("->", "json", f"coalesce({_TEXT}, 'null')", _json_arrow,
             "operator: j -> 'k' or j -> 0, as json_get; chains are one path"),
    Function("json_get_str", "json", "try_variant_get(v, '$', 'string') if v is a string",
             _json_call("json_get_str"), f"NULL unless the value is a JSON string; {_V}"),
    Function("json_get_int", "json", "try_variant_get(v, '$', 'bigint') if v is an integer",
             _json_call("json_get_int"), f"NULL unless the value is a JSON integer; {_V}"),
    Function("json_get_float", "json", "try_variant_get(v, '$', 'double') if v is a number",
             _json_call("json_get_float"), f"NULL unless the value is a JSON number; {_V}"),
    Function("json_get_bool", "json", "try_variant_get(v, '$', 'boolean') if v is a boolean",
             _json_call("json_get_bool"), f"NULL unless the value is true or false; {_V}"),
    Function("json_get_json", "json", _TEXT, _json_call("json_get_json"),
             f"the value as JSON text; NULL where there is none; {_V}"),
    Function("json_as_text", "json", "get_json_object(j, '$.k...')",
             _json_call("json_as_text")),
    Function("->>", "json", "get_json_object(j, '$.k')", _json_arrow_text,
             "operator: j ->> 'k'; the value as text (a string unquoted), as json_as_text"),
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
