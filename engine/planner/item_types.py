"""The type of a SELECT item where it is evident without running the query.

A passed-on column (or a path into one: ``bid.price``, ``xs[1]``) has the
type the planner knows for it; a cast, a literal, a window call, an array or
struct constructor and ``array_agg`` show theirs. The planner records these
types for each SELECT's output columns, so a field of a subquery's, a view's
or a CTE's column is checked like a source column's (:mod:`.fields`), and a
value written to a sink column of another kind is an error at planning
(:mod:`.sink_columns`). Anything else (a computed value) has no known type
(None) and is left to Spark.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import types as T
from sqlglot import exp

from spate.engine.planner.fields import ColumnResolver
from spate.engine.planner.types import UnsupportedTypeError, spark_type
from spate.engine.planner.window import WINDOW_FUNCTIONS

#: The type of a window column (TUMBLE, HOP, SESSION): its start and end.
WINDOW_TYPE = T.StructType([T.StructField("start", T.TimestampType(), False),
                            T.StructField("end", T.TimestampType(), False)])
#: Spark's largest decimal precision: a longer number literal is a double.
_MAX_PRECISION = 38

Typer = Callable[[exp.Expr, ColumnResolver], T.DataType | None]


def item_type(item: exp.Expr, resolve: ColumnResolver) -> T.DataType | None:
    """The type of a SELECT item (or any expression) when it is evident; None otherwise."""
    body = item.this if isinstance(item, exp.Alias) else item
    if isinstance(body, exp.Column | exp.Dot | exp.Bracket | exp.Paren):
        return resolve.path_type(body)
    typer = _TYPERS.get(type(body))
    return typer(body, resolve) if typer is not None else None


def _cast(node: exp.Expr, _: ColumnResolver) -> T.DataType | None:
    to = node.args.get("to")
    if not isinstance(to, exp.DataType):
        return None
    try:
        return spark_type(to)
    except UnsupportedTypeError:
        return None


def _literal(node: exp.Expr, _: ColumnResolver) -> T.DataType | None:
    """Spark's type for a literal: text, or a number as Spark reads it (an integer,
    a decimal with the digits written, a double with an exponent)."""
    assert isinstance(node, exp.Literal)
    if node.is_string:
        return T.StringType()
    digits = str(node.name).lstrip("+-")
    if "e" in digits.lower():
        return T.DoubleType()
    whole, dot, fraction = digits.partition(".")
    if not (whole + fraction).isdigit():
        return None
    if not dot:
        return T.IntegerType() if int(whole) < 2**31 else T.LongType()
    precision = max(len(whole.lstrip("0")) + len(fraction), len(fraction), 1)
    if precision > _MAX_PRECISION:
        return T.DoubleType()
    return T.DecimalType(precision, len(fraction))


def _array(node: exp.Expr, resolve: ColumnResolver) -> T.DataType:
    """``ARRAY[a, b]`` / ``make_array(a, b)``: its element type when its first element's
    shows (NULL, Spark's type for an unknown element, otherwise)."""
    elements = node.expressions
    first = item_type(elements[0], resolve) if elements else None
    return T.ArrayType(first or T.NullType())


def _struct(node: exp.Expr, resolve: ColumnResolver) -> T.DataType | None:
    """``named_struct('a', x, 'b', y)`` (what ``struct(...)`` and ``row(...)`` become):
    its fields, NULL-typed where a value's type is not evident."""
    arguments = node.expressions
    names, values = arguments[0::2], arguments[1::2]
    if len(names) != len(values) or not all(isinstance(n, exp.Literal) for n in names):
        return None
    return T.StructType([T.StructField(str(n.name), item_type(v, resolve) or T.NullType())
                         for n, v in zip(names, values, strict=True)])


def _anonymous(node: exp.Expr, resolve: ColumnResolver) -> T.DataType | None:
    """Calls the function table leaves by name: windows and constructors."""
    name = str(node.name).upper()
    if name in WINDOW_FUNCTIONS:
        return WINDOW_TYPE
    if name == "ARRAY":
        return _array(node, resolve)
    if name == "NAMED_STRUCT":
        return _struct(node, resolve)
    return None


def _array_agg(node: exp.Expr, resolve: ColumnResolver) -> T.DataType:
    """``array_agg([DISTINCT] x)``: an array of ``x``'s type."""
    value = node.this
    if isinstance(value, exp.Distinct):
        value = value.expressions[0] if value.expressions else None
    element = item_type(value, resolve) if isinstance(value, exp.Expr) else None
    return T.ArrayType(element or T.NullType())


def _struct_constructor(node: exp.Expr, resolve: ColumnResolver) -> T.DataType:
    """``STRUCT(...)`` where the parser kept it: as many fields as values."""
    fields = []
    for position, value in enumerate(node.expressions):
        name = value.alias if isinstance(value, exp.Alias) else f"c{position}"
        fields.append(T.StructField(name, item_type(value, resolve) or T.NullType()))
    return T.StructType(fields)


_TYPERS: dict[type[exp.Expr], Typer] = {
    exp.Cast: _cast,
    exp.TryCast: _cast,
    exp.Literal: _literal,
    exp.Boolean: lambda _node, _resolve: T.BooleanType(),
    exp.Null: lambda _node, _resolve: T.NullType(),
    exp.Count: lambda _node, _resolve: T.LongType(),
    exp.Array: _array,
    exp.Struct: _struct_constructor,
    exp.Anonymous: _anonymous,
    exp.ArrayAgg: _array_agg,
}
