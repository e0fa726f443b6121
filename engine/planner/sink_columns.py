"""``INSERT INTO`` a sink with declared columns: the query's columns become the sink's.

SQL maps a query onto a table's columns by position (docs/sql/queries.md): the first
SELECT item fills the first declared column, and so on, whatever the items
are called, each value cast to its column's declared type (a TEXT column
given a number writes a string). So ``INSERT INTO out SELECT count(*) …``
into ``out (drivers BIGINT)`` writes ``drivers``, not ``COUNT(*)``. A sink
declared without columns takes the query's own names. The number of columns
must agree, and a value that no cast can turn into its column's type (a
struct into a number, a number into an array, a struct of other fields) is a
located planning error, in every UNION ALL branch, wherever the planner knows
the value's type (:mod:`.item_types`); so is a text literal that would cast to
NULL (``'abc'`` into a BIGINT column).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pyspark.sql import types as T
from sqlglot import exp

from spate.engine.connectors.core.base import ColumnDef
from spate.engine.planner.casts import castable, literal_reading
from spate.engine.planner.catalog import Table
from spate.engine.planner.context import branches
from spate.engine.planner.dialect import written_name
from spate.engine.planner.errors import PlanningError
from spate.engine.planner.fields import TYPES_META
from spate.engine.planner.plan import RETRACT, ROW_KEY, QueryPlan
from spate.engine.planner.positions import SourceText

#: The subquery alias the cast SELECT reads the query's rows through.
_INSERTED = "_spate_inserted"
#: The longest type a message spells out (a longer one is "a struct", "an array").
_SHORT_TYPE = 40


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


def check_sink_types(query: exp.Query, sink: str, declared: Sequence[ColumnDef],
                     text: SourceText, fallback: int) -> None:
    """Each item of each SELECT (UNION ALL branch) of the resolved ``query`` must cast to
    its sink column; a count that differs is left to :func:`conform_to_sink`."""
    for branch in branches(query):
        if len(branch.expressions) != len(declared):
            return
        types = branch.meta.get(TYPES_META) or {}
        for position, (item, column) in enumerate(zip(branch.expressions, declared,
                                                      strict=True)):
            message = _misfit(item, types.get(item.alias_or_name.lower()), column)
            if message is not None:
                raise text.error(f"INSERT INTO {sink}: column {position + 1} is {message}",
                                 item, fallback)


def _misfit(item: exp.Expr, given: T.DataType | None, column: ColumnDef) -> str | None:
    """Why ``item`` (of type ``given``, when known) cannot be written to ``column``."""
    target = column.spark_type
    into = f"{column.name} {target.simpleString()}"
    body = item.this if isinstance(item, exp.Alias) else item
    if isinstance(body, exp.Literal) and body.is_string:
        reading = literal_reading(str(body.name), target)
        if reading is not None:
            return (f"the text '{body.name}', which is not {reading}: written to {into} it "
                    f"would be NULL; write {reading} or NULL")
    if given is None or castable(given, target):
        return None
    if isinstance(given, T.StructType) and isinstance(target, T.StructType):
        return (f"{given.simpleString()}, which cannot be written to {into}: a struct is "
                "written field by field, in order, so it needs as many fields, each "
                "castable to the column's")
    hint = _hint(written_name(body), given, target)
    return f"{_kind(given)}, which cannot be written to {into}; {hint}"


def _hint(value: str, given: T.DataType, target: T.DataType) -> str:
    """What to write instead of ``value`` (of type ``given``) into a ``target`` column."""
    shapes = (_shape(given), _shape(target))
    written = given.simpleString()  # an element or field of unknown type shows as void
    shown = written if "void" not in written and len(written) <= _SHORT_TYPE else _kind(given)
    declare = f"or declare the column as {shown}"
    if shapes == ("struct", "scalar") and isinstance(given, T.StructType) and given.fields:
        return f"write one of its fields ({value}.{given.fields[0].name}) {declare}"
    if shapes == ("array", "scalar"):
        return f"write one element ({value}[1]), UNNEST({value}), {declare}"
    if shapes == ("map", "scalar"):
        return f"write one value ({value}['key']) {declare}"
    if shapes == ("scalar", "array"):
        return f"write an array (ARRAY[{value}]) {declare}"
    if shapes == ("scalar", "struct"):
        return f"write a struct (struct({value}, ...)) {declare}"
    return f"Spark has no cast from {given.simpleString()} to {target.simpleString()}; " \
        f"convert it yourself {declare}"


def _shape(data_type: T.DataType) -> str:
    for kind, name in ((T.StructType, "struct"), (T.ArrayType, "array"), (T.MapType, "map")):
        if isinstance(data_type, kind):
            return name
    return "scalar"


def _kind(given: T.DataType) -> str:
    if isinstance(given, T.ArrayType):
        return "an array"
    if isinstance(given, T.StructType):
        return "a struct"
    if isinstance(given, T.MapType):
        return "a map"
    return given.simpleString()


def _at_select(message: str, select: exp.Expr | None, text: SourceText,
               fallback: int) -> PlanningError:
    if select is None:
        return text.error(message, None, fallback)
    offset = text.offset_of(select, fallback)
    return text.error_at(message, text.keyword_before(offset, ("SELECT",), offset))
