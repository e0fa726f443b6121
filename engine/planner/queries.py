"""Plans one query (INSERT INTO or bare SELECT).

1. Names are resolved: views, CTEs and memory tables are inlined, every
   column is checked against the FROM and JOIN items that can provide it, and
   each SELECT is classified by the rows it produces (:class:`Stream`:
   append-only, windowed, updating), which decides what its joins, aggregates
   and window functions may do.
2. SELECTs are then planned innermost first.  A stateful one (a windowed
   aggregate, an updating aggregate or join, a lookup join) becomes a Spate
   operator reading native Spark SQL, and is replaced by a SELECT over the
   operator's output view; everything else stays native Spark SQL.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from spate.engine.connectors.core.base import ColumnDef
from spate.engine.planner.aggregates import (
    aggregate_stream,
    check_window_calls,
    is_aggregating,
    plan_window_aggregate,
)
from spate.engine.planner.catalog import Table
from spate.engine.planner.context import (
    SCOPES_META,
    STREAM_META,
    QueryContext,
    Scope,
    branches,
    own_nodes,
    scopes_of,
    stream_of,
)
from spate.engine.planner.errors import did_you_mean
from spate.engine.planner.fields import (
    TYPES_META,
    ColumnResolver,
    column_parts,
    column_path,
    table_types,
    types_of,
)
from spate.engine.planner.functions import translate_functions, written_call_name
from spate.engine.planner.item_types import item_type
from spate.engine.planner.join import (
    check_join_shapes,
    join_stream,
    joined_event_time,
    joins_of,
    plan_windowed_join,
)
from spate.engine.planner.lookup import plan_lookup_joins
from spate.engine.planner.output_names import output_names
from spate.engine.planner.over import check_over
from spate.engine.planner.plan import EVENT_TIME, RETRACT, ROW_KEY, QueryPlan, Stream
from spate.engine.planner.positions import SourceText
from spate.engine.planner.scopes import NAMES_META, inline_names, view_scope
from spate.engine.planner.sink_columns import check_sink_types
from spate.engine.planner.unnest import check_unnest_placement, rewrite_unnest
from spate.engine.planner.updating import (
    check_distinct,
    distinct_as_group_by,
    plan_updating_aggregate,
    union_as_distinct,
)
from spate.engine.planner.updating_join import plan_updating_join
from spate.engine.planner.window import WINDOW_FUNCTIONS
from spate.engine.udf import UdfRegistry

_UNSUPPORTED = {
    exp.Except: "EXCEPT is not supported",
    exp.Intersect: "INTERSECT is not supported",
    exp.Unnest: "UNNEST is only allowed in the SELECT list",
    exp.Limit: "LIMIT is not supported in a streaming query",
    exp.Lateral: "LATERAL is not supported",
}
#: Why a scalar subquery (``WHERE x > (SELECT …)``, one in the SELECT list) is refused.
_SCALAR_SUBQUERY = (
    "scalar subqueries are not supported yet: in a streaming query the subquery's value "
    "changes as its input arrives, which makes it a join with an updating aggregate, and "
    "joins of updating rows are not supported yet either; compare within a window instead: "
    "aggregate both sides over the same TUMBLE or HOP window and join them on the window "
    "(... JOIN (SELECT TUMBLE(INTERVAL '10' SECOND) AS w, max(x) AS top FROM t GROUP BY 1) "
    "AS s ON s.w = ...)")
#: Why ``x IN (SELECT …)`` and ``EXISTS (SELECT …)`` are refused.
_IN_SUBQUERY = (
    "IN (SELECT ...) is not supported yet: in a streaming query the subquery's rows keep "
    "changing as its input arrives, so it is a join; join the subquery's rows on the value "
    "instead (... JOIN (SELECT k FROM t WHERE ...) AS s ON s.k = x: a row then repeats once "
    "per match), or list the values: x IN ('a', 'b')")
_EXISTS = (
    "EXISTS (SELECT ...) is not supported yet: in a streaming query the subquery's rows keep "
    "changing as its input arrives, so it is a join; join the subquery's table on its "
    "condition instead (... JOIN t AS s ON s.k = x.k: a row then repeats once per match)")
#: Keywords that end a clause (an empty GROUP BY is followed by one of them).
_CLAUSE_ENDERS = ("HAVING", "WINDOW", "ORDER", "LIMIT", "UNION", ")")
#: ``select.meta`` key: the stream a SELECT reads (its FROM item, or its joined items).
_INPUT_META = "spate_input"
#: Hidden columns a query may name without declaring them.
_HIDDEN = (EVENT_TIME, RETRACT, ROW_KEY)


def plan_query(
    query: exp.Query,
    sink: str,
    index: int,
    tables: dict[str, Table],
    views: dict[str, exp.Query],
    text: SourceText,
    fallback: int,
    *,
    memory: dict[str, exp.Query] | None = None,
    unwritten: frozenset[str] = frozenset(),
    udfs: UdfRegistry | None = None,
    declared: Sequence[ColumnDef] = (),
) -> QueryPlan:
    """Plan ``query`` writing into ``sink``; raises located PlanningErrors.

    ``memory`` holds the written memory tables (their writing queries),
    ``unwritten`` the declared memory tables no INSERT INTO has written yet,
    ``udfs`` the pipeline's Python UDFs, ``declared`` the sink's declared columns
    (each value of the query must cast to its column's type).
    """
    ctx = QueryContext(text, fallback, tables, view_scope(views, memory or {}, unwritten),
                       index)
    query = union_as_distinct(inline_names(query.copy(), ctx.names, text, fallback))
    _reject_unsupported(query, ctx)
    translate_functions(query, text, fallback, udfs)
    output_columns = _resolve_query(query, ctx, top=True)
    if declared:
        check_sink_types(query, sink, declared, text, fallback)
    stream = stream_of(query)
    if stream.updating:
        _keep_change_columns(query)
    # Innermost first: rewriting a SELECT copies the FROM subqueries below it.
    for select in reversed(list(query.find_all(exp.Select))):
        _unnest(select, ctx)
    query = _plan_operators(query, ctx)
    return QueryPlan(
        index=index, sink=sink, sources=tuple(ctx.sources), operators=tuple(ctx.operators),
        output_sql=query.sql(dialect="spark", identify=True),
        output_columns=tuple(output_columns), stream=stream,
    )


def _reject_unsupported(query: exp.Expr, ctx: QueryContext) -> None:
    for node in query.walk():
        if isinstance(node, exp.Select):
            check_unnest_placement(node, ctx.text, ctx.fallback)
        for kind, message in _UNSUPPORTED.items():
            if isinstance(node, kind):
                raise ctx.clause_error(message, node)
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Func):
            _reject_table_function(node.this, ctx)
        if isinstance(node, exp.Order) and isinstance(node.parent, exp.AggFunc):
            name = written_call_name(node.parent, ctx.text) or node.parent.sql_name().lower()
            raise ctx.error(f"ordering inside an aggregate ({name}(x ORDER BY y)) is not "
                            "supported yet", node.parent)
        if isinstance(node, exp.Filter):
            raise ctx.error_at_keyword("an aggregate's FILTER (WHERE ...) is not supported "
                                       "yet; use CASE WHEN inside the aggregate",
                                       node.expression, ("FILTER", "(", "WHERE"))
        if isinstance(node, exp.Order) and not isinstance(node.parent,
                                                          exp.Window | exp.WithinGroup):
            raise ctx.clause_error("ORDER BY is not supported in a streaming query", node)
        if isinstance(node, exp.Distinct) and isinstance(node.parent, exp.Select):
            check_distinct(node.parent, ctx)
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            raise ctx.error(_IN_SUBQUERY, node)
        if isinstance(node, exp.Exists):
            offset = ctx.text.offset_of(node, ctx.fallback)
            raise ctx.text.error_at(_EXISTS, ctx.text.word_before(offset, "EXISTS", offset))
        if isinstance(node, exp.Subquery) and not isinstance(node.parent, exp.From | exp.Join):
            raise ctx.error_at_keyword(_SCALAR_SUBQUERY, node, ("SELECT",))
        if isinstance(node, exp.Group):
            _check_group_by_syntax(node, ctx)


def _check_group_by_syntax(group: exp.Group, ctx: QueryContext) -> None:
    """What sqlglot reads past: an empty ``GROUP BY;`` and a trailing ``GROUP BY zone,;``."""
    if not group.expressions:
        start = ctx.text.offset_of(group.parent, ctx.fallback)
        at = ctx.text.empty_clause(start, "GROUP", _CLAUSE_ENDERS)
        raise ctx.text.error_at("syntax error: GROUP BY needs at least one expression "
                                "(a column, an ordinal or a window call)",
                                at if at is not None else start)
    comma = ctx.text.trailing_comma(ctx.text.offset_of(group, ctx.fallback), "GROUP",
                                    _CLAUSE_ENDERS)
    if comma is not None:
        raise ctx.text.error_at("syntax error: GROUP BY ends with a comma; remove it or add "
                                "the expression that should follow", comma)


# -- planning the operators ------------------------------------------------------------


def _plan_operators(query: exp.Query, ctx: QueryContext) -> exp.Query:
    """Plan every stateful SELECT, innermost first; returns the (new) root query."""
    for select in reversed(list(query.find_all(exp.Select))):
        if SCOPES_META not in select.meta:
            continue  # a SELECT the planner wrote itself (UNNEST's explode)
        scopes = scopes_of(select)
        source: Stream = select.meta[_INPUT_META]
        if joins_of(select):
            _plan_join(select, scopes, source, ctx)
        if not is_aggregating(select):
            continue
        if stream_of(select).window is None:
            rewritten = plan_updating_aggregate(select, source, ctx)
        else:
            rewritten = plan_window_aggregate(select, source, ctx)
        if select is query:  # a root is not replaced in place: it has no parent
            query = rewritten
        else:
            select.replace(rewritten)
    return query


def _plan_join(select: exp.Select, scopes: list[Scope], source: Stream,
               ctx: QueryContext) -> None:
    if any(s.lookup for s in scopes):
        plan_lookup_joins(select, scopes, ctx)
        return
    if source.window is not None:
        plan_windowed_join(select, scopes)
        return
    plan_updating_join(select, scopes, ctx)


# -- name resolution ----------------------------------------------------------------


def _resolve_query(query: exp.Expr, ctx: QueryContext, top: bool = False) -> list[str]:
    """Output column names of a SELECT or a UNION ALL of them (names checked)."""
    if isinstance(query, exp.Select):
        return _resolve(query, ctx, top)
    if isinstance(query, exp.Subquery) and not query.alias:  # (SELECT ...) UNION ALL ...
        return _resolve_query(query.this, ctx, top)
    if not isinstance(query, exp.Union):
        raise ctx.error("only SELECT queries and UNION ALL of them are supported", query)
    left = _resolve_query(query.this, ctx, top)
    right = _resolve_query(query.expression, ctx, top)
    if len(left) != len(right):
        raise ctx.error_at_keyword(
            f"UNION ALL needs identical schemas: the first query gives {len(left)} columns "
            f"({', '.join(left)}), this one {len(right)} ({', '.join(right)})",
            query.expression, ("SELECT",))
    return left


def _unnest(select: exp.Select, ctx: QueryContext) -> None:
    from_ = select.args.get("from_")
    scope_name = (from_.this.alias_or_name or "").lower() if isinstance(from_, exp.From) else ""
    rewrite_unnest(select, scope_name, ctx.text, ctx.fallback)


def _resolve(select: exp.Select, ctx: QueryContext, top: bool = False) -> list[str]:
    """Check every name of ``select``; expand ``*``; classify its stream; return its
    output column names."""
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        raise ctx.error("a query needs a FROM clause", select)
    items = [from_.this, *(j.this for j in joins_of(select))]
    scopes = [_scope(item, ctx, joined=position > 0) for position, item in enumerate(items)]
    names = [s.name for s in scopes]
    if len(scopes) > 1 and "" in names:
        raise ctx.error("a subquery in a JOIN needs an alias: (SELECT ...) AS name",
                        items[names.index("")])
    for position, name in enumerate(names):
        if name and name in names[:position]:
            raise ctx.error(f"'{name}' appears twice in FROM/JOIN; give each an alias",
                            items[position])
    if len(scopes) > 1:  # a join's shape before its columns (USING names them unqualified)
        check_join_shapes(select, ctx)
    if len(scopes) > 1:  # its own UNNEST: one in a joined subquery or view is fine
        unnest = next((n for n in own_nodes(select) if isinstance(n, exp.Explode)), None)
        if unnest is not None:
            raise ctx.error("UNNEST cannot be used in a SELECT with a JOIN; unnest in a "
                            "subquery or a view, and join that", unnest)
    _expand_star(select, scopes, ctx)
    if select.args.get("distinct"):
        distinct_as_group_by(select)
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    _check_columns(select, scopes, aliases, ctx)
    resolve = ColumnResolver({s.name: s.types for s in scopes}, ctx.text, ctx.fallback)
    _check_fields(select, resolve)
    source = join_stream(select, scopes, ctx) if len(scopes) > 1 else scopes[0].stream
    check_window_calls(select, ctx)
    check_over(select, scopes, source, ctx)
    if is_aggregating(select):
        stream = aggregate_stream(select, source, ctx)
    else:
        stream = Stream(updating=source.updating, window=source.window,
                        window_columns=_passed_window_columns(select, scopes))
    select.meta[SCOPES_META] = tuple(scopes)
    select.meta[_INPUT_META] = source
    select.meta[STREAM_META] = stream
    names = output_names(select, ctx, top, _HIDDEN)
    select.meta[TYPES_META] = {
        item.alias_or_name.lower(): kind for item in select.expressions
        if isinstance(item, exp.Alias | exp.Column)
        and (kind := item_type(item, resolve)) is not None}
    return names


def _scope(item: exp.Expr, ctx: QueryContext, joined: bool) -> Scope:
    """The names a FROM or JOIN item provides."""
    if isinstance(item, exp.Table):
        table = _source_table(item, ctx, joined)
        return Scope((item.alias_or_name or "").lower(), tuple(table.visible_columns),
                     Stream(updating=table.updating), lookup=table.role == "lookup",
                     types=table_types(table))
    if isinstance(item, exp.Subquery) and isinstance(item.this, exp.Select | exp.Union):
        _reject_unsupported(item.this, ctx)
        columns = _resolve_query(item.this, ctx)
        _carry_hidden_columns_up(item.this)
        return Scope((item.alias or "").lower(), tuple(columns), stream_of(item.this),
                     types=types_of(item.this))
    raise ctx.error("unsupported FROM clause", item)


def _reject_table_function(call: exp.Func, ctx: QueryContext) -> None:
    """A function call as a FROM item: a window's table-valued form, or any other."""
    name = call.name.upper() if isinstance(call, exp.Anonymous) else ""
    if name in WINDOW_FUNCTIONS:
        raise ctx.error(f"the table-valued form of {name} (FROM {name}(table, column, ...)) "
                        f"is not supported yet; window in GROUP BY instead: SELECT ... FROM "
                        f"table GROUP BY {name}(...)", call)
    raise ctx.error_at_keyword("table functions in FROM are not supported yet; read a table, "
                               "a view or a subquery", call, ("FROM", "JOIN"))


def _source_table(table: exp.Table, ctx: QueryContext, joined: bool) -> Table:
    name = table.name.lower()
    entry = ctx.tables.get(name)
    if entry is None:
        known = [n for n, t in ctx.tables.items() if t.role != "sink"]
        known += table.meta.get(NAMES_META) or ctx.names.names
        raise ctx.error(f"unknown table '{name}'{did_you_mean(name, known)}", table)
    if entry.role == "sink":
        raise ctx.error(f"table '{name}' is a sink and cannot be read", table)
    if entry.role == "lookup" and not joined:
        raise ctx.error(f"lookup table '{name}' can only be the right side of a JOIN, named "
                        "directly (not in a subquery or view)", table)
    if entry.role == "source" and name not in ctx.sources:
        ctx.sources.append(name)
    identifier = exp.to_identifier(name)
    identifier.meta.update(table.this.meta)  # keep its position for located errors
    table.set("this", identifier)
    return entry


def _carry_hidden_columns_up(query: exp.Expr) -> None:
    """Every un-aggregated SELECT of a FROM subquery (each UNION ALL branch) passes its
    rows' event time, and the change columns of updating rows, up to its reader.
    (An aggregating SELECT is replaced by its operator's output, which carries them.)"""
    updating = stream_of(query).updating
    for select in branches(query):
        if not is_aggregating(select):
            _carry_hidden_columns(select, updating)


def _carry_hidden_columns(select: exp.Select, updating: bool) -> None:
    names = {e.alias_or_name for e in select.expressions}
    scopes = scopes_of(select)
    if EVENT_TIME not in names:
        event_time = joined_event_time(scopes) if len(scopes) > 1 else exp.column(EVENT_TIME)
        select.append("expressions", exp.alias_(event_time, EVENT_TIME)
                      if len(scopes) > 1 else event_time)
    if updating and len(scopes) == 1:
        _append_change_columns(select)


def _keep_change_columns(query: exp.Expr) -> None:
    """An updating query's own SELECTs hand the change columns to the sink."""
    for select in branches(query):
        if not is_aggregating(select) and len(scopes_of(select)) == 1:
            _append_change_columns(select)


def _append_change_columns(select: exp.Select) -> None:
    """RETRACT and ROW_KEY at the end of ``select``'s list: its input's, or for an
    append-only branch of an updating UNION ALL, an insert without a key."""
    names = {e.alias_or_name for e in select.expressions}
    passed = select.meta[_INPUT_META].updating
    added = {RETRACT: exp.false(), ROW_KEY: exp.cast(exp.null(), exp.DataType.Type.TEXT)}
    for column, value in added.items():
        if column not in names:
            select.append("expressions",
                          exp.column(column) if passed else exp.alias_(value, column))


def _expand_star(select: exp.Select, scopes: list[Scope], ctx: QueryContext) -> None:
    by_name = {s.name: s for s in scopes}
    expanded: list[exp.Expr] = []
    for item in select.expressions:
        star = isinstance(item, exp.Star) or (isinstance(item, exp.Column)
                                              and isinstance(item.this, exp.Star))
        if not star:
            expanded.append(item)
            continue
        qualifier = item.table.lower() if isinstance(item, exp.Column) and item.table else ""
        if qualifier and qualifier not in by_name:
            raise ctx.error(f"unknown table '{qualifier}' in {qualifier}.*"
                            f"{did_you_mean(qualifier, by_name)}", item)
        chosen = [by_name[qualifier]] if qualifier else scopes
        for scope in chosen:
            table = scope.name if len(scopes) > 1 else None
            expanded.extend(exp.column(c, table=table) for c in scope.columns
                            if c not in _HIDDEN)
    select.set("expressions", expanded)


def _check_columns(select: exp.Select, scopes: list[Scope], aliases: set[str],
                   ctx: QueryContext) -> None:
    by_name = {s.name: s for s in scopes}
    all_columns = {c for s in scopes for c in s.columns}
    for node in own_nodes(select):
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            continue
        name = node.name.lower()
        parts = column_path(node)
        if len(parts) > 1:
            qualifier = parts[0]
            scope = by_name.get(qualifier)
            if scope is not None and (parts[1] in scope.columns or parts[1] in _HIDDEN):
                continue  # item.column[.field…]: fields are checked with the types
            if scope is None and (qualifier in all_columns or qualifier in aliases):
                continue  # struct field access: col.field[.field…]
            if scope is not None:  # the column is the bad name, else the qualifier
                available, bad = scope.columns, 1
                hint = did_you_mean(parts[1], available, f"{qualifier}.{{}}")
            else:
                available, bad = tuple(sorted(all_columns)), 0
                hint = did_you_mean(qualifier, by_name, f"{{}}.{parts[1]}")
            raise ctx.error(f"unknown column '{qualifier}.{parts[1]}'{hint}; available: "
                            f"{', '.join(available)}", column_parts(node)[bad])
        owners = [s.name for s in scopes if name in s.columns]
        if len(owners) > 1 and name not in aliases:
            raise ctx.error(f"column '{name}' is ambiguous: qualify it "
                            f"({' or '.join(f'{o}.{name}' for o in owners)})", node)
        if owners or name in aliases or name in _HIDDEN:
            continue
        raise ctx.error(f"unknown column '{name}'{did_you_mean(name, all_columns | aliases)}; "
                        f"available: {', '.join(c for s in scopes for c in s.columns)}", node)


def _check_fields(select: exp.Select, resolve: ColumnResolver) -> None:
    """Every struct field a path of ``select`` names must exist, and every ``[...]``
    index an array, a map or a struct (where the column's type is known)."""
    for node in own_nodes(select):
        if isinstance(node, exp.Column) and not isinstance(node.this, exp.Star) \
                and len(column_path(node)) > 1:
            resolve(node)
        elif isinstance(node, exp.Dot | exp.Bracket):
            resolve.path_type(node)


def _passed_window_columns(select: exp.Select, scopes: list[Scope]) -> frozenset[str]:
    """Output columns of a plain SELECT that pass an input's window column on."""
    by_name = {s.name: s for s in scopes}
    passed = set()
    for item in select.expressions:
        body = item.this if isinstance(item, exp.Alias) else item
        if not isinstance(body, exp.Column):
            continue
        name = body.name.lower()
        qualifier = body.table.lower() if body.table else ""
        owners = [by_name[qualifier]] if qualifier in by_name else \
            [s for s in scopes if name in s.columns]
        if any(name in s.stream.window_columns for s in owners):
            passed.add(item.alias_or_name.lower())
    return frozenset(passed)
