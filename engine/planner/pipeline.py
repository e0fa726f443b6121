"""Planning a whole pipeline script (:func:`plan_pipeline`), statement by statement.

Planning never starts Spark: bad SQL is reported before any cluster work.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import replace

from sqlglot import exp
from sqlglot.errors import ParseError
from sqlglot.tokenizer_core import Token, TokenType

from spate.engine.connectors.core.boundary import UNCONFINED, Boundary
from spate.engine.connectors.core.dead_letter import dead_letter_target
from spate.engine.connectors.core.metadata import DEAD_LETTER_TABLE, FORMAT_OPTION
from spate.engine.planner.catalog import (
    DEBEZIUM_JSON,
    Table,
    check_table_input,
    generated_expression,
    is_memory_table,
    memory_table_from_create,
    table_from_create,
)
from spate.engine.planner.dialect import Spate
from spate.engine.planner.errors import PlanningError, did_you_mean
from spate.engine.planner.functions import translate_functions
from spate.engine.planner.memory import MemoryTables
from spate.engine.planner.plan import (
    DEFAULT_UPDATING_TTL_US,
    PipelinePlan,
    QueryPlan,
    UpdatingAggregate,
    UpdatingJoin,
)
from spate.engine.planner.positions import SourceText
from spate.engine.planner.queries import plan_query
from spate.engine.planner.sink_columns import conform_to_sink
from spate.engine.planner.syntax import parse_error, tokenize
from spate.engine.planner.window import IntervalError, interval_micros
from spate.engine.udf import UdfRegistry

PREVIEW_SINK = "preview"
_SET_VARIABLES = ("updating_ttl",)
#: A part of a bare dotted option key (``json.unstructured``).
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def plan_pipeline(sql: str, variables: Mapping[str, str] | None = None, *,
                  tables: Mapping[str, Table] | None = None,
                  udfs: UdfRegistry | None = None,
                  boundary: Boundary = UNCONFINED,
                  previews: bool = True,
                  check_inputs: bool = False, connect: bool = True) -> PipelinePlan:
    """Plan a whole pipeline script.

    ``{{ NAME }}`` references in table options are filled from ``variables``;
    None fills them from the process environment (what ``spate run`` does).
    A job passes its own variables so it never reads its host's environment.

    ``tables`` is an external catalog (see :mod:`.external`): tables the SQL
    may use without declaring them. A ``CREATE TABLE`` or ``CREATE VIEW`` of
    the same name in the script shadows a catalog table, so a pipeline keeps
    its meaning when a catalog table of that name appears later. The plan
    holds only the catalog tables the queries use.

    ``udfs`` are the pipeline's Python UDFs (:func:`spate.engine.udf.load_udfs`):
    their calls are type-checked, and the plan carries them for the runner.

    ``boundary`` is what the tenant's tables may touch (its storage root and
    egress policy); the default, for a trusted single user, is unconfined.
    Catalog ``tables`` were built with it already.

    ``previews`` False is for a pipeline that runs on its own: a bare SELECT,
    whose rows only a preview reads, is then a located error asking for a sink.
    ``check_inputs`` makes a missing input (a ``single_file`` source's file) a
    located error now rather than a failure after Spark started; ``connect`` False
    keeps those checks off the network (the API plans outside the tenant's compute
    unit: a remote input is then checked when the job starts, in the unit).
    """
    text = SourceText(sql)
    values: Mapping[str, str] = os.environ if variables is None else variables
    statements = _statements(sql, text)
    catalog = _unshadowed(tables or {}, statements)
    defined: dict[str, Table] = dict(catalog)
    views: dict[str, exp.Query] = {}
    memory = MemoryTables()
    queries: list[QueryPlan] = []
    updating_ttl_us = DEFAULT_UPDATING_TTL_US
    for offset, statement in statements:
        if isinstance(statement, exp.Create):
            _create(statement, text, offset, defined, views, values, memory, boundary, udfs)
        elif isinstance(statement, exp.Insert):
            planned = _insert(statement, text, offset, defined, views, len(queries), memory,
                              udfs)
            if planned is not None:
                queries.append(planned)
        elif isinstance(statement, exp.Query):
            if not previews:
                start = text.offset_of(statement, offset)
                raise text.error_at(
                    "this SELECT has no sink: a pipeline that runs writes its rows with "
                    "INSERT INTO <sink> SELECT ... (declare the sink with CREATE TABLE ... "
                    "WITH (connector = ...)); to look at rows without a sink, preview the "
                    "SQL instead", text.keyword_before(start, ("SELECT",), start))
            queries.append(plan_query(statement, PREVIEW_SINK, len(queries), defined, views,
                                      text, offset, memory=memory.written,
                                      unwritten=memory.unwritten, udfs=udfs))
        elif isinstance(statement, exp.Set):
            updating_ttl_us = _set(statement, text, offset)
        else:
            raise text.error(f"unsupported statement: {statement.key.upper()}", statement, offset)
    if not queries:
        raise PlanningError("the pipeline has no query: add INSERT INTO <sink> SELECT ... "
                            "or a SELECT", *text.line_col(max(len(sql) - 1, 0)))
    queries = [_with_ttl(q, updating_ttl_us) for q in queries]
    used = {q.sink for q in queries} | {name for q in queries for name in q.sources}
    used |= _check_dead_letters(defined, used, queries, text)
    if check_inputs:
        _check_inputs(statements, defined, used, text, values, connect)
    return PipelinePlan(udfs=udfs, tables={name: table for name, table in defined.items()
                                if name not in catalog or name in used},
                        queries=tuple(queries), updating_ttl_us=updating_ttl_us)


def _check_dead_letters(defined: Mapping[str, Table], used: set[str],
                        queries: list[QueryPlan], text: SourceText) -> set[str]:
    """Each source's ``dead_letter.table`` names a sink of the script that no query writes
    (its rows are dead letters only); returns those tables."""
    targets: set[str] = set()
    for name in sorted(used):
        table = defined.get(name)
        target = None if table is None else dead_letter_target(table.config.options)
        if table is None or target is None or table.config.role != "source":
            continue
        found = next((n for n in defined if n.lower() == target.lower()), None)
        where = text.sql.lower().find(DEAD_LETTER_TABLE.name)
        line, column = text.line_col(max(where, 0))
        if found is None or defined[found].config.role != "sink":
            raise PlanningError(
                f"option '{DEAD_LETTER_TABLE.name}' of source {name} must name a sink table "
                f"declared in the script (CREATE TABLE {target} WITH (connector = ..., "
                "type = 'sink', ...)); "
                + ("there is none of that name" if found is None else f"{found} is not a sink"),
                line, column)
        if any(q.sink == found for q in queries):
            raise PlanningError(f"table {found} is the dead-letter table of source {name}: "
                                "no INSERT may write it too", line, column)
        targets.add(found)
    return targets


def _with_ttl(query: QueryPlan, ttl_us: int) -> QueryPlan:
    """``query`` with the script's ``updating_ttl`` (the last SET wins) in its joins."""
    operators = tuple(replace(o, ttl_us=ttl_us)
                      if isinstance(o, UpdatingJoin | UpdatingAggregate) else o
                      for o in query.operators)
    return replace(query, operators=operators)


def _unshadowed(tables: Mapping[str, Table],
                statements: list[tuple[int, exp.Expr]]) -> dict[str, Table]:
    """The catalog tables whose names the script does not declare itself."""
    declared = {_created_name(s) for _, s in statements if isinstance(s, exp.Create)}
    return {name.lower(): table for name, table in tables.items()
            if name.lower() not in declared}


def _created_name(statement: exp.Create) -> str:
    target = statement.this.this if isinstance(statement.this, exp.Schema) else statement.this
    return str(target.name).lower()


def _statements(sql: str, text: SourceText) -> list[tuple[int, exp.Expr]]:
    dialect = Spate()
    tokens = tokenize(text)
    chunks: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            chunks.append([])
        else:
            chunks[-1].append(token)
    result = []
    for chunk in chunks:
        if not chunk:
            continue
        try:
            parsed = dialect.parser().parse(_quote_dotted_option_keys(chunk), sql)
        except ParseError as error:
            raise parse_error(error, text, chunk[0].start) from error
        for statement in parsed:
            if statement is not None:
                if isinstance(statement, exp.Command):
                    raise text.error(f"unsupported statement: {statement.name.upper()}",
                                     None, chunk[0].start)
                result.append((chunk[0].start, statement))
    return result


def _quote_dotted_option_keys(chunk: list[Token]) -> list[Token]:
    """``CREATE TABLE … WITH (json.unstructured = true)``: sqlglot reads a bare dotted
    option key as a path, or not at all when a part is a keyword (``key.prefix``), so
    each becomes the one string token of its quoted form (``'json.unstructured'``)."""
    if not chunk or chunk[0].token_type != TokenType.CREATE:
        return chunk
    result: list[Token] = []
    depth, in_options, index = 0, False, 0
    while index < len(chunk):
        token = chunk[index]
        if token.token_type == TokenType.L_PAREN:
            depth += 1
            in_options = in_options or (depth == 1 and result[-1].token_type == TokenType.WITH)
        elif token.token_type == TokenType.R_PAREN:
            in_options = in_options and depth != 1
            depth -= 1
        elif in_options and depth == 1 and result[-1].token_type in (TokenType.L_PAREN,
                                                                      TokenType.COMMA):
            end = _dotted_key_end(chunk, index)
            if end is not None:
                last = chunk[end - 1]
                result.append(Token(TokenType.STRING, "".join(t.text for t in chunk[index:end]),
                                    last.line, last.col, token.start, last.end))
                index = end
                continue
        result.append(token)
        index += 1
    return result


def _dotted_key_end(chunk: list[Token], start: int) -> int | None:
    """Index of the ``=`` after ``word.word[.word…]`` starting at ``start``, if there is one."""
    index, parts = start, 0
    while index < len(chunk) and _WORD.fullmatch(chunk[index].text) \
            and chunk[index].token_type != TokenType.STRING:
        parts += 1
        following = chunk[index + 1] if index + 1 < len(chunk) else None
        if following is not None and following.token_type == TokenType.EQ:
            return index + 1 if parts > 1 else None
        if following is None or following.token_type != TokenType.DOT:
            return None
        index += 2
    return None


def _create(statement: exp.Create, text: SourceText, offset: int,
            tables: dict[str, Table], views: dict[str, exp.Query],
            variables: Mapping[str, str], memory: MemoryTables, boundary: Boundary,
            udfs: UdfRegistry | None) -> None:
    kind = (statement.args.get("kind") or "").upper()
    target = statement.this.this if isinstance(statement.this, exp.Schema) else statement.this
    name = target.name.lower()
    if name in tables or name in views or name in memory.declared:
        raise text.error(f"'{name}' is already defined", target, offset)
    if kind == "TABLE" and is_memory_table(statement):
        memory.declared[name] = memory_table_from_create(statement, text, offset)
        return
    derived = kind == "TABLE" and statement.args.get("expression") is not None
    if kind == "VIEW" or derived:
        # CREATE TABLE t AS <query> is a view; either query may be parenthesized.
        query = statement.expression
        while isinstance(query, exp.Subquery) and not query.alias:
            query = query.this
        if not isinstance(query, exp.Query):
            raise text.error(f"CREATE {kind} needs AS <query>", statement, offset)
        if derived and (isinstance(statement.this, exp.Schema)
                        or statement.args.get("properties") is not None):
            raise text.error(f"CREATE TABLE {name} AS <query> takes its columns from the "
                             "query: remove the column list and WITH options", target, offset)
        views[name] = query
    elif kind == "TABLE":
        _translate_generated(statement, text, offset, udfs)
        tables[name] = table_from_create(statement, text, offset, variables, boundary)
    else:
        raise text.error(f"unsupported statement: CREATE {kind}", statement, offset)


def _translate_generated(statement: exp.Create, text: SourceText, offset: int,
                         udfs: UdfRegistry | None) -> None:
    """Generated columns call the same functions as queries: translate them (in place)
    into their Spark form, so an unknown function is a planning error here."""
    schema = statement.this
    for item in schema.expressions if isinstance(schema, exp.Schema) else ():
        computed = generated_expression(item) if isinstance(item, exp.ColumnDef) else None
        is_metadata = isinstance(computed, exp.Anonymous) and computed.name.lower() == "metadata"
        if computed is not None and not is_metadata:  # metadata('k') is METADATA FROM 'k'
            translate_functions(computed, text, offset, udfs)


def _check_inputs(statements: list[tuple[int, exp.Expr]], tables: Mapping[str, Table],
                  used: set[str], text: SourceText, variables: Mapping[str, str],
                  connect: bool) -> None:
    """Missing inputs of the sources the queries read, once the SQL itself
    planned (a mistake in the query is reported before a missing file)."""
    for offset, statement in statements:
        if isinstance(statement, exp.Create):
            table = tables.get(_created_name(statement))
            if table is not None and table.role == "source" and table.name in used:
                check_table_input(statement, table, text, offset, variables, connect)


def _insert(statement: exp.Insert, text: SourceText, offset: int, tables: dict[str, Table],
            views: dict[str, exp.Query], index: int,
            memory: MemoryTables, udfs: UdfRegistry | None) -> QueryPlan | None:
    """The plan of an INSERT INTO a sink; None for one into a memory table."""
    target = statement.this
    if isinstance(target, exp.Schema):
        raise text.error(
            "INSERT INTO with a column list is not supported yet: the query's columns go to "
            "the table's declared columns by position; drop the list and SELECT one value "
            "per declared column, in their order", target, offset)
    name = target.name.lower()
    if name in views:
        raise text.error(f"cannot INSERT INTO view '{name}'", target, offset)
    table = tables.get(name)
    if table is None and name not in memory.declared:
        known = [n for n, t in tables.items() if t.role == "sink"] + list(memory.declared)
        raise text.error(f"unknown table '{name}'{did_you_mean(name, known)}", target, offset)
    if table is not None and table.role != "sink":
        kind = "lookup table" if table.role == "lookup" else table.role
        raise text.error(f"cannot INSERT INTO '{name}': it is a {kind}", target, offset)
    query = statement.expression
    if not isinstance(query, exp.Query):
        raise text.error("INSERT INTO needs a SELECT", statement, offset)
    planned = plan_query(query, name, index, tables, views, text, offset,
                         memory=memory.written, unwritten=memory.unwritten, udfs=udfs,
                         declared=table.columns if table is not None else ())
    if table is not None:
        _check_updating_sink(planned, table, target, text, offset)
        return conform_to_sink(planned, table, statement, text, offset)
    memory.write(name, query, planned.output_columns, target, text, offset)
    return None


def _check_updating_sink(query: QueryPlan, table: Table, target: exp.Expr, text: SourceText,
                         offset: int) -> None:
    """docs/sql/updating.md: updating rows go to a debezium_json sink (or one without a format)."""
    sink_format = (table.config.options.get(FORMAT_OPTION.name) or "").strip().lower() or None
    if query.updating and sink_format not in (None, DEBEZIUM_JSON):
        raise text.error(
            f"the query writes updating rows (the changes of a non-windowed aggregate, a "
            f"debezium_json source or an outer join) but sink '{table.name}' has format "
            f"'{sink_format}', which can only append; use format = 'debezium_json'",
            target, offset)


def _set(statement: exp.Set, text: SourceText, offset: int) -> int:
    """The value of ``SET updating_ttl = INTERVAL '2' HOUR`` (or ``'2 hours'``), in µs."""
    ttl = None
    for item in statement.expressions:
        assignment = item.this
        name = assignment.this.name.lower() if isinstance(assignment, exp.EQ) else ""
        if name not in _SET_VARIABLES:
            raise text.error(f"unknown SET variable '{name}'; supported: updating_ttl",
                             item, offset)
        value = assignment.expression
        if isinstance(value, exp.Literal) and value.is_string:  # legacy '2 hours'
            value = exp.Interval(this=exp.Literal.string(value.name))
        try:
            ttl = interval_micros(value)
        except IntervalError as error:
            raise text.error(f"updating_ttl: {error}", value, offset) from error
    assert ttl is not None  # a SET statement has at least one item
    return ttl
