"""Struct fields, checked at planning: ``bid.prize`` is an error before Spark starts.

A column reference is a path: ``bid.price`` is the field ``price`` of the
column ``bid``, ``n.bid.price`` the same through the FROM item ``n``. The
planner knows the types of source columns, and follows them through
subqueries, views and CTEs where a column is passed on as it is (a plain
reference, an alias of one, a cast, a window's ``start``/``end`` struct), so
every field of such a path is checked against its struct, with a did-you-mean.
Where a type is not known (a computed value) the path is left to Spark.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from pyspark.sql import types as T
from sqlglot import exp

from spate.engine.planner.catalog import Table
from spate.engine.planner.errors import PlanningError
from spate.engine.planner.positions import SourceText
from spate.engine.planner.types import UnsupportedTypeError, spark_type
from spate.engine.planner.windows import WINDOW_FUNCTIONS

#: ``select.meta`` key: the known types of a SELECT's output columns, by name.
TYPES_META = "spate_types"
#: The type of a window column (TUMBLE, HOP, SESSION): its start and end.
WINDOW_TYPE = T.StructType([T.StructField("start", T.TimestampType(), False),
                            T.StructField("end", T.TimestampType(), False)])

ColumnTypes = Mapping[str, T.DataType]


def table_types(table: Table) -> dict[str, T.DataType]:
    """The types of a source table's physical columns, by name."""
    return {column.name: column.spark_type for column in table.columns}


def column_path(node: exp.Column) -> list[str]:
    """The parts of a column reference, outermost first, lower case."""
    parts = [node.args.get(key) for key in ("catalog", "db", "table")] + [node.this]
    return [str(p.name).lower() for p in parts if isinstance(p, exp.Identifier)]


def field_type(column_type: T.DataType | None, column: str, fields: list[str],
               node: exp.Expr, text: SourceText, fallback: int) -> T.DataType | None:
    """The type at ``column.field.field…``; a field its struct lacks is a located error
    with a did-you-mean. An unknown column type lets any path through (None)."""
    current = column_type
    walked = column
    for name in fields:
        if current is None:
            return None
        if not isinstance(current, T.StructType):
            raise _at_field(f"'{walked}' is {current.simpleString()}, not a struct: it has no "
                            f"field '{name}'", node, name, text, fallback)
        match = next((f for f in current.fields if f.name.lower() == name), None)
        if match is None:
            known = [f.name for f in current.fields]
            close = difflib.get_close_matches(name, [k.lower() for k in known], n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise _at_field(f"no field '{name}' in '{walked}'{hint}; its fields: "
                            f"{', '.join(known)}", node, name, text, fallback)
        current = match.dataType
        walked = f"{walked}.{name}"
    return current


def item_type(item: exp.Expr, resolve: ColumnResolver) -> T.DataType | None:
    """The type of a SELECT item when it is evident: a passed-on column (or a field of
    one), a cast, a window call; None for anything computed."""
    body = item.this if isinstance(item, exp.Alias) else item
    if isinstance(body, exp.Column) and not isinstance(body.this, exp.Star):
        return resolve(body)
    if isinstance(body, exp.Cast) and isinstance(body.to, exp.DataType):
        try:
            return spark_type(body.to)
        except UnsupportedTypeError:
            return None
    if isinstance(body, exp.Anonymous) and str(body.name).upper() in WINDOW_FUNCTIONS:
        return WINDOW_TYPE
    return None


def types_of(query: exp.Expr) -> dict[str, T.DataType]:
    """The known output column types a resolved SELECT (or UNION of them) recorded."""
    if isinstance(query, exp.Subquery):
        return types_of(query.this)
    if isinstance(query, exp.Union):
        return types_of(query.this)
    found = query.meta.get(TYPES_META) if isinstance(query, exp.Select) else None
    return dict(found) if isinstance(found, dict) else {}


class ColumnResolver:
    """Types of column paths within one SELECT's FROM and JOIN items."""

    def __init__(self, scopes: Mapping[str, ColumnTypes], text: SourceText,
                 fallback: int) -> None:
        #: FROM/JOIN item name -> its columns' known types
        self.scopes = scopes
        self.text = text
        self.fallback = fallback

    def __call__(self, node: exp.Column) -> T.DataType | None:
        parts = column_path(node)
        if len(parts) >= 2 and parts[0] in self.scopes and parts[1] in self.scopes[parts[0]]:
            owner, column, fields = self.scopes[parts[0]], parts[1], parts[2:]
        else:
            column, fields = parts[0], parts[1:]
            owners = [types for types in self.scopes.values() if column in types]
            if len(owners) != 1:
                return None  # unknown or ambiguous: the name checks report those
            owner = owners[0]
        return field_type(owner.get(column), column, fields, node, self.text, self.fallback)


def _at_field(message: str, node: exp.Expr, name: str, text: SourceText,
              fallback: int) -> PlanningError:
    for identifier in node.find_all(exp.Identifier):
        if str(identifier.name).lower() == name and "start" in identifier.meta:
            return text.error(message, identifier, fallback)
    return text.error(message, node, fallback)
