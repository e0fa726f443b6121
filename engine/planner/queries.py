"""Plans one query (INSERT INTO or bare SELECT): resolves names, finds the
windowed aggregate, and splits the query into native Spark SQL around it."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from engine.planner.catalog import Table
from engine.planner.errors import PlanningError
from engine.planner.functions import translate_functions
from engine.planner.plan import (
    EVENT_TIME,
    WINDOW_COLUMN,
    AggregateCall,
    QueryPlan,
    WindowAggregate,
)
from engine.planner.positions import SourceText
from engine.planner.scopes import NameScope, inline_names, view_scope
from engine.planner.unnest import check_unnest_placement, rewrite_unnest
from engine.planner.windows import WINDOW_FUNCTIONS, window_spec

_AGGREGATES: dict[type[exp.Expr], str] = {
    exp.Sum: "sum",
    exp.Min: "min",
    exp.Max: "max",
    exp.Avg: "avg",
}
_CLAUSE_WORDS = ("JOIN", "LEFT", "RIGHT", "FULL", "INNER", "OUTER", "CROSS", "NATURAL",
                 "ORDER", "GROUP", "BY", "LIMIT")
_UNION_WORDS = ("UNION", "DISTINCT", "SELECT")
_UNSUPPORTED = {
    exp.Join: "joins are not supported yet",
    exp.Except: "EXCEPT is not supported",
    exp.Intersect: "INTERSECT is not supported",
    exp.Unnest: "UNNEST is only allowed in the SELECT list",
    exp.Window: "window functions (OVER) are not supported yet",
    exp.Exists: "subquery expressions (EXISTS) are not supported",
    exp.Order: "ORDER BY is not supported in a streaming query",
    exp.Limit: "LIMIT is not supported in a streaming query",
    exp.Lateral: "LATERAL is not supported",
}


@dataclass
class _Context:
    text: SourceText
    fallback: int
    tables: dict[str, Table]
    names: NameScope
    query_index: int
    sources: list[str] = field(default_factory=list)

    def error(self, message: str, node: exp.Expr | None) -> PlanningError:
        return self.text.error(message, node, self.fallback)

    def error_at_keyword(self, message: str, node: exp.Expr,
                         words: tuple[str, ...]) -> PlanningError:
        """An error at the run of ``words`` keywords just before ``node``."""
        offset = self.text.offset_of(node, self.fallback)
        return self.text.error_at(message, self.text.keyword_before(offset, words, offset))

    def clause_error(self, message: str, node: exp.Expr) -> PlanningError:
        """An error at the keywords opening ``node`` (JOIN, ORDER BY, GROUP BY ...)."""
        offset = self.text.offset_of(node, self.fallback)
        return self.text.error_at(message, self.text.keyword_before(offset, _CLAUSE_WORDS,
                                                                    offset))


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
) -> QueryPlan:
    """Plan ``query`` writing into ``sink``; raises located PlanningErrors.

    ``memory`` holds the written memory tables (their writing queries),
    ``unwritten`` the declared memory tables no INSERT INTO has written yet.
    """
    ctx = _Context(text, fallback, tables, view_scope(views, memory or {}, unwritten), index)
    query = inline_names(query.copy(), ctx.names, text, fallback)
    _reject_unsupported(query, ctx)
    translate_functions(query, text, fallback)
    output_columns = _resolve_query(query, ctx, top=True)
    # Innermost first: rewriting a SELECT copies the FROM subqueries below it.
    for select in reversed(list(query.find_all(exp.Select))):
        _unnest(select, ctx)
    aggregate_select = _find_aggregate(query, ctx)
    aggregate = None
    if aggregate_select is not None:
        aggregate, rewritten = _plan_aggregate(aggregate_select, ctx)
        if aggregate_select is query:  # a root is not replaced in place: it has no parent
            query = rewritten
    output_sql = query.sql(dialect="spark", identify=True)
    return QueryPlan(
        index=index, sink=sink, sources=tuple(ctx.sources), aggregate=aggregate,
        output_sql=output_sql, output_columns=tuple(output_columns),
    )


def _reject_unsupported(query: exp.Expr, ctx: _Context) -> None:
    for node in query.walk():
        if isinstance(node, exp.Union) and node.args.get("distinct"):
            raise ctx.error_at_keyword("UNION (DISTINCT) is not supported in a streaming "
                                       "query; use UNION ALL", node.expression, _UNION_WORDS)
        if isinstance(node, exp.Select):
            check_unnest_placement(node, ctx.text, ctx.fallback)
        for kind, message in _UNSUPPORTED.items():
            if isinstance(node, kind):
                raise ctx.clause_error(message, node)
        if isinstance(node, exp.Distinct) and isinstance(node.parent, exp.Select):
            raise ctx.error("SELECT DISTINCT (an updating query) is not supported yet",
                            node.parent)
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            raise ctx.error("subquery expressions (IN (SELECT ...)) are not supported", node)
        if isinstance(node, exp.Subquery) and not isinstance(node.parent, exp.From):
            raise ctx.error("scalar subqueries are not supported", node)


# -- name resolution ----------------------------------------------------------------


def _resolve_query(query: exp.Expr, ctx: _Context, top: bool = False) -> list[str]:
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


def _unnest(select: exp.Select, ctx: _Context) -> None:
    from_ = select.args.get("from_")
    scope_name = (from_.this.alias_or_name or "").lower() if isinstance(from_, exp.From) else ""
    rewrite_unnest(select, scope_name, ctx.text, ctx.fallback)


def _carry_event_time_up(query: exp.Expr) -> None:
    """Every un-aggregated SELECT of a FROM subquery (each UNION ALL branch) passes
    the row's event time up to its reader."""
    if isinstance(query, exp.Select):
        if not _has_group_by(query):
            _carry_event_time(query)
    elif isinstance(query, exp.Union | exp.Subquery):
        _carry_event_time_up(query.this)
        if isinstance(query, exp.Union):
            _carry_event_time_up(query.expression)


def _resolve(select: exp.Select, ctx: _Context, top: bool = False) -> list[str]:
    """Check every name of ``select``; expand ``*``; return its output column names."""
    from_ = select.args.get("from_") or select.args.get("from")
    if from_ is None:
        raise ctx.error("a query needs a FROM clause", select)
    source = from_.this
    scope_name = (source.alias_or_name or "").lower()
    if isinstance(source, exp.Table):
        columns = _source_columns(source, ctx)
    elif isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select | exp.Union):
        _reject_unsupported(source.this, ctx)
        columns = _resolve_query(source.this, ctx)
        _carry_event_time_up(source.this)
    else:
        raise ctx.error("unsupported FROM clause", source)
    _expand_star(select, columns, ctx)
    aliases = {e.alias.lower() for e in select.expressions if isinstance(e, exp.Alias)}
    _check_columns(select, columns, scope_name, aliases, ctx)
    return _output_names(select, ctx, top)


def _source_columns(table: exp.Table, ctx: _Context) -> list[str]:
    name = table.name.lower()
    entry = ctx.tables.get(name)
    if entry is None:
        raise ctx.error(f"unknown table '{name}'", table)
    if entry.role != "source":
        raise ctx.error(f"table '{name}' is a sink and cannot be read", table)
    if name not in ctx.sources:
        ctx.sources.append(name)
    table.set("this", exp.to_identifier(name))
    return entry.visible_columns


def _has_group_by(select: exp.Select) -> bool:
    return select.args.get("group") is not None


def _carry_event_time(select: exp.Select) -> None:
    """Make a FROM subquery pass the row's event time up to its reader."""
    names = {e.alias_or_name for e in select.expressions}
    if EVENT_TIME not in names:
        select.append("expressions", exp.column(EVENT_TIME))


def _expand_star(select: exp.Select, columns: list[str], ctx: _Context) -> None:
    expanded: list[exp.Expr] = []
    for item in select.expressions:
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column)
                                          and isinstance(item.this, exp.Star)):
            expanded.extend(exp.column(c) for c in columns if c != EVENT_TIME)
        else:
            expanded.append(item)
    select.set("expressions", expanded)


def _check_columns(
    select: exp.Select, columns: list[str], scope_name: str, aliases: set[str], ctx: _Context
) -> None:
    known = set(columns)
    for node in _own_nodes(select):
        if not isinstance(node, exp.Column) or isinstance(node.this, exp.Star):
            continue
        name = node.name.lower()
        qualifier = node.table.lower() if node.table else ""
        if qualifier and qualifier == scope_name and name in known:
            continue
        if qualifier and qualifier in known:
            continue  # struct field access: col.field
        if not qualifier and (name in known or name in aliases):
            continue
        if not qualifier and name == EVENT_TIME:
            continue
        shown = f"{qualifier}.{name}" if qualifier else name
        raise ctx.error(f"unknown column '{shown}'; available: {', '.join(columns)}", node)


def _own_nodes(select: exp.Select) -> list[exp.Expr]:
    """Nodes of ``select`` itself, not of subqueries in its FROM."""
    result: list[exp.Expr] = []
    for key in ("expressions", "where", "group", "having"):
        value = select.args.get(key)
        for part in value if isinstance(value, list) else [value]:
            if isinstance(part, exp.Expr):
                result.extend(n for n in part.walk() if isinstance(n, exp.Expr))
    return result


def _output_names(select: exp.Select, ctx: _Context, top: bool) -> list[str]:
    names: list[str] = []
    items = []
    for position, item in enumerate(select.expressions, start=1):
        name = item.alias_or_name if isinstance(item, exp.Alias | exp.Column) else ""
        if not name:
            name = item.sql(dialect="spark")
            if top:
                item = exp.alias_(item, name, quoted=True)
        name = name.lower() if not (isinstance(item, exp.Alias) and top) else name
        if name in names:
            raise ctx.error(f"output column name '{name}' appears twice; give each an alias",
                            item)
        if name == EVENT_TIME and top:
            continue
        names.append(name)
        items.append(item)
        del position
    if top:
        select.set("expressions", items)
    return names


# -- windowed aggregates --------------------------------------------------------------


def _find_aggregate(query: exp.Query, ctx: _Context) -> exp.Select | None:
    found: list[exp.Select] = []
    for select in query.find_all(exp.Select):
        has_aggs = any(_is_aggregate(n) for n in _own_nodes(select))
        if _has_group_by(select) or has_aggs:
            found.append(select)
        elif any(_window_call(n) for n in _own_nodes(select)):
            node = next(n for n in _own_nodes(select) if _window_call(n))
            raise ctx.error(f"{node.name.upper()} may only appear in GROUP BY", node)
    for select in found:
        if any(isinstance(p, exp.Union) for p in _ancestors(select)):
            raise ctx.error("UNION ALL of a windowed aggregate's output is not supported yet; "
                            "union the inputs and aggregate once", select)
    if len(found) > 1:
        raise ctx.error("re-aggregating windowed output is not supported yet", found[0])
    return found[0] if found else None


def _ancestors(node: exp.Expr) -> list[exp.Expr]:
    result = []
    parent = node.parent
    while parent is not None:
        result.append(parent)
        parent = parent.parent
    return result


def _window_call(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.upper() in WINDOW_FUNCTIONS


def _is_aggregate(node: exp.Expr) -> bool:
    return isinstance(node, exp.AggFunc) or (
        isinstance(node, exp.Anonymous) and node.name.upper() == "MEAN")


def _plan_aggregate(select: exp.Select, ctx: _Context) -> tuple[WindowAggregate, exp.Select]:
    """The window operator of ``select``, and the SELECT over its output that replaces it."""
    operator_id = f"q{ctx.query_index}_window"
    group = select.args.get("group")
    if group is None:
        raise ctx.error("an aggregate without GROUP BY <window> is an updating aggregate, "
                        "which is not supported yet", select)
    window_node, window_alias, keys = _group_items(select, group.expressions, ctx)
    if window_node is None:
        raise ctx.clause_error("updating (non-windowed) aggregates are not supported yet; "
                               "add TUMBLE, HOP or SESSION to GROUP BY", group)
    assert isinstance(window_node, exp.Anonymous)  # what _window_call matched
    spec = window_spec(window_node, ctx.text, ctx.fallback)
    key_names = tuple(f"k{i}" for i in range(len(keys)))
    aggregates: list[AggregateCall] = []
    arguments: list[exp.Expr] = []

    def rewrite(node: exp.Expr) -> exp.Expr:
        for i, key in enumerate(keys):
            if node == key:
                return exp.column(key_names[i])
        if node == window_node or (isinstance(node, exp.Column) and not node.table
                                   and node.name.lower() == window_alias):
            return exp.column(WINDOW_COLUMN)
        if isinstance(node, exp.Column) and window_alias and node.table.lower() == window_alias:
            return exp.column(node.name.lower(), table=WINDOW_COLUMN)
        if _is_aggregate(node):
            return exp.column(_aggregate_call(node, aggregates, arguments, ctx).output)
        return node

    def produced() -> set[str]:
        return {*key_names, WINDOW_COLUMN, *(a.output for a in aggregates)}

    items = []
    for item in select.expressions:
        name = item.alias_or_name
        body = item.this if isinstance(item, exp.Alias) else item
        new = body.transform(rewrite, copy=True)
        _check_grouped(new, produced(), ctx, item)
        items.append(exp.alias_(new, name or body.sql(dialect="spark"), quoted=True))
    having = select.args.get("having")
    input_select = select.copy()
    input_select.set("group", None)
    input_select.set("having", None)
    input_select.set("expressions", [
        *(exp.alias_(k.copy(), key_names[i]) for i, k in enumerate(keys)),
        *(exp.alias_(a.copy(), f"a{i}") for i, a in enumerate(arguments)),
        exp.column(EVENT_TIME),
    ])
    output_view = f"__spate_{operator_id}"
    rewritten: exp.Select = exp.select(*items).from_(output_view)
    if having is not None:
        condition = having.this.transform(rewrite, copy=True)
        _check_grouped(condition, produced(), ctx, having)
        rewritten = rewritten.where(condition)
    select.replace(rewritten)
    return WindowAggregate(
        operator_id=operator_id,
        input_sql=input_select.sql(dialect="spark", identify=True),
        key_columns=key_names, window=spec, aggregates=tuple(aggregates),
        output_view=output_view,
    ), rewritten


def _group_items(
    select: exp.Select, items: list[exp.Expr], ctx: _Context
) -> tuple[exp.Expr | None, str | None, list[exp.Expr]]:
    aliased = {e.alias.lower(): e.this for e in select.expressions if isinstance(e, exp.Alias)}
    window_node: exp.Expr | None = None
    window_alias: str | None = None
    keys: list[exp.Expr] = []
    for item in items:
        resolved = item
        if isinstance(item, exp.Literal) and not item.is_string:
            position = int(item.name)
            if not 1 <= position <= len(select.expressions):
                raise ctx.error(f"GROUP BY position {position} is out of range", item)
            resolved = select.expressions[position - 1]
            resolved = resolved.this if isinstance(resolved, exp.Alias) else resolved
        elif isinstance(item, exp.Column) and not item.table and item.name.lower() in aliased:
            resolved = aliased[item.name.lower()]
        if _window_call(resolved):
            if window_node is not None:
                raise ctx.error("at most one window may appear in GROUP BY", item)
            window_node = resolved
            window_alias = next((e.alias.lower() for e in select.expressions
                                 if isinstance(e, exp.Alias) and e.this == resolved), None)
        else:
            keys.append(resolved)
    return window_node, window_alias, keys


def _aggregate_call(
    node: exp.Expr,
    calls: list[AggregateCall],
    arguments: list[exp.Expr],
    ctx: _Context,
) -> AggregateCall:
    function, argument = _aggregate_kind(node, ctx)
    argument_name = None
    if argument is not None:
        if argument in arguments:
            argument_name = f"a{arguments.index(argument)}"
        else:
            arguments.append(argument)
            argument_name = f"a{len(arguments) - 1}"
    for call in calls:
        if call.function == function and call.argument == argument_name:
            return call
    call = AggregateCall(function, argument_name, f"agg{len(calls)}")
    calls.append(call)
    return call


def _aggregate_kind(node: exp.Expr, ctx: _Context) -> tuple[str, exp.Expr | None]:
    if isinstance(node, exp.Anonymous):  # MEAN
        return "avg", node.expressions[0]
    if isinstance(node, exp.Count):
        inner = node.this
        if isinstance(inner, exp.Star):
            return "count_star", None
        if isinstance(inner, exp.Distinct):
            if len(inner.expressions) != 1:
                raise ctx.error("COUNT(DISTINCT ...) takes one argument", node)
            return "count_distinct", inner.expressions[0]
        return "count", inner
    for kind, name in _AGGREGATES.items():
        if isinstance(node, kind):
            return name, node.this
    name = node.sql_name() if isinstance(node, exp.Func) else node.key.upper()
    raise ctx.error(f"aggregate {name} is not supported yet in windowed aggregates "
                    "(supported: count, count(DISTINCT ...), sum, avg, min, max)", node)


def _check_grouped(
    node: exp.Expr, produced: set[str], ctx: _Context, where: exp.Expr
) -> None:
    for column in node.find_all(exp.Column):
        if column.name in produced or column.table == WINDOW_COLUMN:
            continue
        raise ctx.error(f"column '{column.sql()}' must appear in GROUP BY or inside an "
                        "aggregate", column if column.meta or column.find(exp.Identifier)
                        else where)
