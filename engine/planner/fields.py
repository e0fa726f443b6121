"""Struct fields, checked at planning: ``bid.prize`` is an error before Spark starts.

A column reference is a path: ``bid.price`` is the field ``price`` of the
column ``bid``, ``n.bid.price`` the same through the FROM item ``n``; a path
may also index an array or a map (``xs[1].q``, ``tags['k']``) or name a
struct's field in brackets (``info['c']``). The planner knows the types of
source columns, and follows them through subqueries, views and CTEs where a
column is passed on as it is (a plain reference, an alias of one, a cast, a
window's ``start``/``end`` struct, see :mod:`.item_types`), so every field of
such a path is checked against its struct, with a did-you-mean, and every
index against an array or a map. Where a type is not known (a computed
value) the path is left to Spark.
"""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import types as T
from sqlglot import exp

from spate.engine.planner.catalog import Table
from spate.engine.planner.dialect import Spate
from spate.engine.planner.errors import PlanningError, did_you_mean
from spate.engine.planner.positions import SourceText

#: ``select.meta`` key: the known types of a SELECT's output columns, by name.
TYPES_META = "spate_types"
ColumnTypes = Mapping[str, T.DataType]


def table_types(table: Table) -> dict[str, T.DataType]:
    """The types of a source table's physical columns, by name."""
    return {column.name: column.spark_type for column in table.columns}


def column_path(node: exp.Column) -> list[str]:
    """The parts of a column reference, outermost first, lower case."""
    return [str(p.name).lower() for p in column_parts(node)]


def column_parts(node: exp.Column) -> list[exp.Identifier]:
    """The identifiers of a column reference, outermost first: each keeps its
    position, so an error about one part points at that part."""
    parts = [node.args.get(key) for key in ("catalog", "db", "table")] + [node.this]
    return [p for p in parts if isinstance(p, exp.Identifier)]


def field_type(column_type: T.DataType | None, column: str, fields: list[str],
               node: exp.Expr, text: SourceText, fallback: int) -> T.DataType | None:
    """The type at ``column.field.field…``; a field its struct lacks is a located error
    with a did-you-mean. An unknown column type lets any path through (None)."""
    current = column_type
    walked = column
    for name in fields:
        current = _field(current, walked, name, node, text, fallback)
        walked = f"{walked}.{name}"
    return current


def _field(struct: T.DataType | None, walked: str, name: str, node: exp.Expr,
           text: SourceText, fallback: int) -> T.DataType | None:
    """The type of the field ``name`` of ``walked`` (of type ``struct``)."""
    if struct is None or isinstance(struct, T.NullType):
        return None
    if not isinstance(struct, T.StructType):
        raise _at_field(f"'{walked}' is {struct.simpleString()}, not a struct: it has no "
                        f"field '{name}'", node, name, text, fallback)
    match = next((f for f in struct.fields if f.name.lower() == name), None)
    if match is None:
        known = [f.name for f in struct.fields]
        raise _at_field(f"no field '{name}' in '{walked}'{did_you_mean(name, known)}; its fields: "
                        f"{', '.join(known)}", node, name, text, fallback)
    return match.dataType


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

    def path_type(self, node: exp.Expr) -> T.DataType | None:
        """The type of a path over a column (``a.xs[1].q``, ``info['c']``, ``(s).f``), each
        step checked where the type before it is known; None for anything else."""
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star):
            return self(node)
        if isinstance(node, exp.Paren):
            return self.path_type(node.this)
        if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
            name = str(node.expression.name).lower()
            return _field(self.path_type(node.this), _written(node.this), name, node,
                          self.text, self.fallback)
        if isinstance(node, exp.Bracket) and len(node.expressions) == 1:
            return self._element(node, node.expressions[0])
        return None

    def _element(self, node: exp.Bracket, key: exp.Expr) -> T.DataType | None:
        """The type of ``base[key]``: an array's element, a map's value, a struct's field."""
        base = self.path_type(node.this)
        walked = _written(node.this)
        if isinstance(base, T.ArrayType):
            return base.elementType
        if isinstance(base, T.MapType):
            return base.valueType
        if isinstance(base, T.StructType):
            if not (isinstance(key, exp.Literal) and key.is_string):
                first = base.fields[0].name if base.fields else "field"
                raise self.text.error(
                    f"'{walked}' is a struct: name its field ({walked}.{first} or "
                    f"{walked}['{first}']), not a position", node, self.fallback)
            name = str(key.name).lower()
            return _field(base, walked, name, key, self.text, self.fallback)
        if base is None or isinstance(base, T.NullType):
            return None
        # An index the dialect turned 0-based is a new literal, without a position.
        where = key if self.text.offset_of(key, -1) >= 0 else node
        raise self.text.error(
            f"'{walked}' is {base.simpleString()}: only an array, a map or a struct can be "
            "indexed with [...]", where, self.fallback)


def _written(node: exp.Expr) -> str:
    """A path as the query wrote it (``a.xs[1]``), for messages."""
    return node.sql(dialect=Spate)


def _at_field(message: str, node: exp.Expr, name: str, text: SourceText,
              fallback: int) -> PlanningError:
    for identifier in node.find_all(exp.Identifier):
        if str(identifier.name).lower() == name and "start" in identifier.meta:
            return text.error(message, identifier, fallback)
    return text.error(message, node, fallback)
