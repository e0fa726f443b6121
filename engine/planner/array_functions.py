"""Array functions whose meaning Spark's built-ins do not have as such: written as
native Spark SQL over them (``slice``, ``transform``, ``filter`` with lambdas), so
they still run without Python per row.

Positions are 1-based. An element matches a value when they are equal (a NULL
element matches nothing).
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot import exp

from spate.engine.planner.function_base import (
    Function,
    Translation,
    arity,
    call,
    string_literal,
)

#: Lambda variables: names no query column is expected to have.
_ELEMENT, _INDEX, _OTHER = "_spate_v", "_spate_i", "_spate_w"


def _spark(template: str, **values: exp.Expr) -> exp.Expr:
    """``template`` (Spark SQL; ``v``, ``i``, ``w`` are lambda variables) with its
    upper-case placeholders replaced by copies of ``values``."""
    names = {"v": _ELEMENT, "i": _INDEX, "w": _OTHER}
    sql = re.sub(r"\b[viw]\b", lambda match: names[match.group(0)], template)
    parsed = sqlglot.parse_one(sql, read="spark")

    def substitute(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.name in values:
            return values[node.name].copy()
        if isinstance(node, exp.ArraySize):  # as ARRAY_SIZE: Spark's SIZE(NULL) is -1
            return call("ARRAY_SIZE", node.this.transform(substitute))
        return node
    return parsed.transform(substitute)


_SIZE = "ARRAY_SIZE(A)"
#: 0-based index of the first element equal to X (-1: none)
_FIRST = "ARRAY_POSITION(A, X) - 1"
#: how many elements equal to X there are up to and including index i (0-based)
_SEEN = "ARRAY_SIZE(FILTER(SLICE(A, 1, i + 1), w -> w = X))"


def _remove_first(node: exp.Func, ctx: Translation) -> exp.Expr:
    array, value = arity(node, ctx, "array_remove", 2, 2)
    return _spark(f"FILTER(A, (v, i) -> NOT (COALESCE(v = X, FALSE) AND i = {_FIRST}))",
                  A=array, X=value)


def _remove_n(node: exp.Func, ctx: Translation) -> exp.Expr:
    array, value, count = arity(node, ctx, "array_remove_n", 3, 3)
    return _spark(f"FILTER(A, (v, i) -> NOT (COALESCE(v = X, FALSE) AND {_SEEN} <= N))",
                  A=array, X=value, N=count)


def _remove_all(node: exp.Func, ctx: Translation) -> exp.Expr:
    array, value = arity(node, ctx, "array_remove_all", 2, 2)
    return _spark("FILTER(A, v -> NOT COALESCE(v = X, FALSE))", A=array, X=value)


def _replace_first(node: exp.Func, ctx: Translation) -> exp.Expr:
    array, old, new = arity(node, ctx, "array_replace", 3, 3)
    return _spark(f"TRANSFORM(A, (v, i) -> IF(COALESCE(v = X, FALSE) AND i = {_FIRST}, Y, v))",
                  A=array, X=old, Y=new)


def _replace_n(node: exp.Func, ctx: Translation) -> exp.Expr:
    array, old, new, count = arity(node, ctx, "array_replace_n", 4, 4)
    return _spark(f"TRANSFORM(A, (v, i) -> IF(COALESCE(v = X, FALSE) AND {_SEEN} <= N, Y, v))",
                  A=array, X=old, Y=new, N=count)


def _replace_all(node: exp.Func, ctx: Translation) -> exp.Expr:
    array, old, new = arity(node, ctx, "array_replace_all", 3, 3)
    return _spark("TRANSFORM(A, v -> IF(COALESCE(v = X, FALSE), Y, v))", A=array, X=old,
                  Y=new)


def _positions(node: exp.Func, ctx: Translation) -> exp.Expr:
    array, value = arity(node, ctx, "array_positions", 2, 2)
    return _spark("FILTER(TRANSFORM(A, (v, i) -> IF(COALESCE(v = X, FALSE), "
                  "CAST(i + 1 AS BIGINT), NULL)), w -> w IS NOT NULL)", A=array, X=value)


def _position(node: exp.Func, ctx: Translation) -> exp.Expr:
    """The first position of X at or after ``start`` (default 1); NULL when absent."""
    array, value, *start = arity(node, ctx, "array_position", 2, 3)
    if not start:
        return _spark("NULLIF(ARRAY_POSITION(A, X), 0)", A=array, X=value)
    return _spark(f"NULLIF(ARRAY_POSITION(SLICE(A, S, GREATEST({_SIZE} - S + 1, 0)), X), 0)"
                  " + S - 1", A=array, X=value, S=start[0])


def _slice(node: exp.Func, ctx: Translation) -> exp.Expr:
    array, begin, end = arity(node, ctx, "array_slice", 3, 3)
    return array_slice(array, begin, end)


def array_slice(array: exp.Expr, begin: exp.Expr, end: exp.Expr) -> exp.Expr:
    """Elements ``begin`` to ``end`` (``array_slice``, ``arr[begin:end]``), both included;
    a negative bound counts from the end (-1 is the last element)."""
    first = f"GREATEST(IF(B < 0, {_SIZE} + B + 1, B), 1)"
    last = f"IF(E < 0, {_SIZE} + E + 1, E)"
    return _spark(f"SLICE(A, {first}, GREATEST({last} - {first} + 1, 0))", A=array, B=begin,
                  E=end)


def _pop_front(node: exp.Func, ctx: Translation) -> exp.Expr:
    (array,) = arity(node, ctx, "array_pop_front", 1, 1)
    return _spark(f"SLICE(A, 2, GREATEST({_SIZE} - 1, 0))", A=array)


def _pop_back(node: exp.Func, ctx: Translation) -> exp.Expr:
    (array,) = arity(node, ctx, "array_pop_back", 1, 1)
    return _spark(f"SLICE(A, 1, GREATEST({_SIZE} - 1, 0))", A=array)


def _trim_array(node: exp.Func, ctx: Translation) -> exp.Expr:
    array, count = arity(node, ctx, "trim_array", 2, 2)
    return _spark(f"SLICE(A, 1, GREATEST({_SIZE} - N, 0))", A=array, N=count)


def _resize(node: exp.Func, ctx: Translation) -> exp.Expr:
    """The first ``size`` elements, padded with ``value`` (default NULL) up to ``size``."""
    array, size, *value = arity(node, ctx, "array_resize", 2, 3)
    padding = value[0] if value else exp.null()
    return _spark(f"IF({_SIZE} >= N, SLICE(A, 1, N), "
                  f"CONCAT(A, ARRAY_REPEAT(X, N - {_SIZE})))", A=array, N=size, X=padding)


def _length(node: exp.Func, ctx: Translation) -> exp.Expr:
    # ARRAY_SIZE, not SIZE: SIZE(NULL) is -1 outside ANSI mode.
    array, *dimension = arity(node, ctx, "array_length", 1, 2)
    if dimension and not (isinstance(dimension[0], exp.Literal) and dimension[0].name == "1"):
        raise ctx.error("array_length(): dimensions other than 1 are not supported yet",
                        dimension[0])
    return call("ARRAY_SIZE", array)


#: array_sort's order: (descending, NULLs first) -> Spark
_SORTS = {(False, True): "SORT_ARRAY(A, TRUE)", (False, False): "ARRAY_SORT(A)",
          (True, False): "SORT_ARRAY(A, FALSE)", (True, True): "REVERSE(ARRAY_SORT(A))"}


def _sort(node: exp.Func, ctx: Translation) -> exp.Expr:
    """``array_sort(a[, 'ASC'|'DESC'[, 'NULLS FIRST'|'NULLS LAST']])``: ascending, NULLs
    first, unless told otherwise."""
    array, *order = arity(node, ctx, "array_sort", 1, 3)
    words = [" ".join(string_literal(o, ctx, "array_sort()'s order").upper().split())
             for o in order]
    if words and words[0] not in ("ASC", "DESC"):
        raise ctx.error("array_sort(): the order is 'ASC' or 'DESC'", order[0])
    if len(words) > 1 and words[1] not in ("NULLS FIRST", "NULLS LAST"):
        raise ctx.error("array_sort(): NULLs go 'NULLS FIRST' or 'NULLS LAST'", order[1])
    descending = bool(words) and words[0] == "DESC"
    nulls_first = len(words) < 2 or words[1] == "NULLS FIRST"
    return _spark(_SORTS[descending, nulls_first], A=array)


def _string_to_array(node: exp.Func, ctx: Translation) -> exp.Expr:
    """``string_to_array(s, delimiter[, null_text])``: split at a literal delimiter (not a
    regex); parts equal to ``null_text`` become NULL."""
    value, delimiter, *null_text = arity(node, ctx, "string_to_array", 2, 3)
    text = string_literal(delimiter, ctx, "string_to_array()'s delimiter")
    parts = call("SPLIT", value, exp.Literal.string(_quote_regex(text)))
    if not null_text:
        return parts
    return _spark("TRANSFORM(P, v -> IF(v = X, NULL, v))", P=parts, X=null_text[0])


def _quote_regex(text: str) -> str:
    """``text`` as a Java regex matching it literally."""
    return "\\Q" + text.replace("\\E", "\\E\\\\E\\Q") + "\\E"


ARRAY_FUNCTIONS: tuple[Function, ...] = (
    Function("array_remove", "array", "filter(arr, (v, i) -> not (v = x and i = first))",
             _remove_first, "removes the first element equal to x"),
    Function("array_remove_n", "array", "filter(arr, ...)", _remove_n,
             "removes the first n elements equal to x"),
    Function("array_remove_all", "array", "filter(arr, v -> not v = x)", _remove_all,
             "removes every element equal to x"),
    Function("array_replace", "array", "transform(arr, (v, i) -> ...)", _replace_first,
             "replaces the first element equal to x"),
    Function("array_replace_n", "array", "transform(arr, (v, i) -> ...)", _replace_n,
             "replaces the first n elements equal to x"),
    Function("array_replace_all", "array", "transform(arr, v -> if(v = x, y, v))",
             _replace_all, "replaces every element equal to x"),
    Function("array_positions", "array", "filter(transform(arr, (v, i) -> ...), ...)",
             _positions, "every 1-based position of x"),
    Function("array_position", "array", "nullif(array_position(arr, x), 0)", _position,
             "1-based; NULL when absent; an optional third argument is where to start"),
    Function("array_slice", "array", "slice(arr, begin, end - begin + 1)", _slice,
             "1-based, end included; negative bounds count from the end"),
    Function("array_pop_front", "array", "slice(arr, 2, size - 1)", _pop_front),
    Function("array_pop_back", "array", "slice(arr, 1, size - 1)", _pop_back),
    Function("trim_array", "array", "slice(arr, 1, size - n)", _trim_array,
             "drops the last n elements"),
    Function("array_resize", "array", "slice(arr, 1, n) or concat(arr, array_repeat(x, ...))",
             _resize, "pads with the third argument, or NULL"),
    Function("array_length", "array", "array_size(arr)", _length,
             "an optional dimension must be 1"),
    Function("array_sort", "array", "sort_array(arr, asc) / array_sort(arr)", _sort,
             "'ASC' (default) or 'DESC', then 'NULLS FIRST' (default) or 'NULLS LAST'"),
    Function("string_to_array", "array", "split(s, <quoted delimiter>)", _string_to_array,
             "the delimiter is a literal, not a pattern; parts equal to an optional third "
             "argument become NULL"),
    *(Function(alias, "array", spark, translate, f"same as {name}")
      for alias, name, spark, translate in (
          ("list_remove", "array_remove", "filter(...)", _remove_first),
          ("list_remove_n", "array_remove_n", "filter(...)", _remove_n),
          ("list_remove_all", "array_remove_all", "filter(...)", _remove_all),
          ("list_replace", "array_replace", "transform(...)", _replace_first),
          ("list_replace_n", "array_replace_n", "transform(...)", _replace_n),
          ("list_replace_all", "array_replace_all", "transform(...)", _replace_all),
          ("list_positions", "array_positions", "filter(transform(...))", _positions),
          ("list_position", "array_position", "nullif(array_position(arr, x), 0)", _position),
          ("list_indexof", "array_position", "nullif(array_position(arr, x), 0)", _position),
          ("array_indexof", "array_position", "nullif(array_position(arr, x), 0)", _position),
          ("list_slice", "array_slice", "slice(...)", _slice),
          ("list_pop_front", "array_pop_front", "slice(arr, 2, size - 1)", _pop_front),
          ("list_pop_back", "array_pop_back", "slice(arr, 1, size - 1)", _pop_back),
          ("list_resize", "array_resize", "slice(...) or concat(...)", _resize),
          ("list_length", "array_length", "array_size(arr)", _length),
          ("list_sort", "array_sort", "sort_array(arr, asc) / array_sort(arr)", _sort),
          ("string_to_list", "string_to_array", "split(s, <quoted delimiter>)",
           _string_to_array),
      )),
)
