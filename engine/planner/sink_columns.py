"""``INSERT INTO`` a sink with declared columns: the query's columns become the sink's.

SQL maps a query onto a table's columns by position (docs/sql/queries.md): the first
SELECT item fills the first declared column, and so on, whatever the items
are called, each value cast to its column's declared type (a TEXT column
given a number writes a string). So ``INSERT INTO out SELECT count(*) …``
into ``out (drivers BIGINT)`` writes ``drivers``, not ``COUNT(*)``. A sink
declared without columns takes the query's own names. The number of columns
must agree, and a value that no cast can turn into its column's type (a
struct into a number, a number into an array) is a located planning error.
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import types as T
from sqlglot import exp

from spate.engine.connectors.base import ColumnDef
from spate.engine.planner.catalog import Table
from spate.engine.planner.errors import PlanningError
from spate.engine.planner.plan import RETRACT, ROW_KEY, QueryPlan
from spate.engine.planner.positions import SourceText

#: The subquery alias the cast SELECT reads the query's rows through.
_INSERTED = "_spate_inserted"
_NESTED = (T.StructType, T.ArrayType, T.MapType)


def conform_to_sink(query: QueryPlan, table: Table, statement: exp.Insert,
                    text: SourceText, fallback: int) -> QueryPlan:
    """``query`` writing the sink's declared columns, in order, cast to their types."""
    declared = table.columns
    if not declared:
        return query
    select = statement.expression
    if len(query.output_columns) != len(declared):
        raise _at_select(
            f"INSERT INTO {table.name}: the query gives {len(query.output_columns)} column(s) "
            f"({', '.join(query.output_columns)}) but {table.name} declares {len(declared)} "
            f"({', '.join(c.name for c in declared)}); SELECT one value per declared column, "
            "in their order", select, text, fallback)
    items = select.selects if isinstance(select, exp.Query) else []
    for position, column in enumerate(declared):
        given = _evident_type(items[position]) if position < len(items) else None
        if given is not None and not _castable(given, column.spark_type):
            node = items[position]
            raise text.error(
                f"INSERT INTO {table.name}: column {position + 1} is {_kind(given)}, which "
                f"cannot be written to {column.name} {column.spark_type.simpleString()}",
                node, fallback)
    casts = [_cast(source, column) for source, column in zip(query.output_columns, declared,
                                                              strict=True)]
    if query.updating:
        casts += [_quoted(RETRACT), _quoted(ROW_KEY)]
    sql = f"SELECT {', '.join(casts)} FROM ({query.output_sql}) AS {_quoted(_INSERTED)}"
    return replace(query, output_sql=sql,
                   output_columns=tuple(column.name for column in declared))


def _cast(source: str, column: ColumnDef) -> str:
    return (f"CAST({_quoted(source)} AS {column.spark_type.simpleString()}) "
            f"AS {_quoted(column.name)}")


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _evident_type(node: exp.Expr) -> T.DataType | None:
    """The Spark type of a SELECT item where it shows without resolving columns."""
    body = node.this if isinstance(node, exp.Alias) else node
    if isinstance(body, exp.Array):
        return T.ArrayType(T.NullType())
    if isinstance(body, exp.Struct):
        return T.StructType()
    if isinstance(body, exp.Literal):
        return T.StringType() if body.is_string else T.DoubleType()
    return None


def _kind(given: T.DataType) -> str:
    if isinstance(given, T.ArrayType):
        return "an array"
    if isinstance(given, T.StructType):
        return "a struct"
    return given.simpleString()


def _castable(given: T.DataType, target: T.DataType) -> bool:
    """Whether Spark can cast ``given`` to ``target`` at all (a nested value only into a
    nested type of its own kind; anything into text)."""
    if isinstance(target, T.StringType):
        return True
    if isinstance(given, _NESTED) or isinstance(target, _NESTED):
        return type(given) is type(target)
    return True


def _at_select(message: str, select: exp.Expr | None, text: SourceText,
               fallback: int) -> PlanningError:
    if select is None:
        return text.error(message, None, fallback)
    offset = text.offset_of(select, fallback)
    return text.error_at(message, text.keyword_before(offset, ("SELECT",), offset))
