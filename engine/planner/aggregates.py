"""Planning of a windowed aggregate: a SELECT with TUMBLE/HOP/SESSION in its
GROUP BY becomes a :class:`WindowAggregate` operator (native pre-aggregation
of its input, Spate's state merge) and a SELECT over the operator's output.

A SELECT that aggregates without a window is an *updating* aggregate; its
stream is classified here and its planning is :mod:`spate.engine.planner.updating`'s.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from spate.engine.planner.context import STREAM_META, QueryContext, is_nested, own_nodes
from spate.engine.planner.dialect import written_name
from spate.engine.planner.functions import UdafRows, written_call_name
from spate.engine.planner.plan import (
    EVENT_TIME,
    WINDOW_COLUMN,
    AggregateCall,
    Stream,
    WindowAggregate,
    WindowSpec,
)
from spate.engine.planner.window import WINDOW_FUNCTIONS, window_spec

_AGGREGATES: dict[type[exp.Expr], str] = {
    exp.Sum: "sum",
    exp.Min: "min",
    exp.Max: "max",
    exp.Avg: "avg",
    exp.Stddev: "stddev_samp",
    exp.StddevSamp: "stddev_samp",
    exp.StddevPop: "stddev_pop",
    exp.Variance: "var_samp",
    exp.VariancePop: "var_pop",
    exp.BitwiseXorAgg: "bit_xor",
    exp.BitwiseAndAgg: "bit_and",
    exp.BitwiseOrAgg: "bit_or",
    # on booleans false < true: bool_and is min, bool_or is max
    exp.LogicalAnd: "min",
    exp.LogicalOr: "max",
    exp.ArrayAgg: "array_agg",
    exp.Median: "median",
    # the value of the group's earliest (latest) row by event time
    exp.FirstValue: "first_value",
    exp.LastValue: "last_value",
    # approx_* are exact (as docs/sql/functions.md says)
    exp.ApproxDistinct: "count_distinct",
}
#: Aggregates of (y, x) pairs, kept as co-moments
_PAIRED: tuple[type[exp.Func], ...] = (
    exp.Corr, exp.CovarSamp, exp.CovarPop, exp.RegrSlope, exp.RegrIntercept, exp.RegrCount,
    exp.RegrR2, exp.RegrAvgx, exp.RegrAvgy, exp.RegrSxx, exp.RegrSyy, exp.RegrSxy)
#: Aggregates sqlglot reads as anonymous calls: name -> function
_ANONYMOUS = {"MEAN": "avg", "APPROX_MEDIAN": "median"}
#: Written WITHIN GROUP (ORDER BY x) or as a call: approx_percentile_cont(x, p[, centroids])
_PERCENTILE = "APPROX_PERCENTILE_CONT"
#: ... and weighted: approx_percentile_cont_with_weight(x, weight, p[, centroids]), or
#: approx_percentile_cont_with_weight(weight, p[, centroids]) WITHIN GROUP (ORDER BY x)
_WEIGHTED = "APPROX_PERCENTILE_CONT_WITH_WEIGHT"
#: Planner function names of the percentiles, which take a fraction p
_PERCENTILES = {_PERCENTILE: "percentile_cont", _WEIGHTED: "percentile_cont_weighted"}
#: Named in the error for an aggregate not supported yet.
_SUPPORTED = ("count, count(DISTINCT ...), sum, avg, min, max, stddev, stddev_samp, "
              "stddev_pop, var, var_samp, var_pop, bit_and, bit_or, bit_xor, bool_and, "
              "bool_or, array_agg, median, approx_median, approx_distinct, "
              "approx_percentile_cont(p) WITHIN GROUP (ORDER BY x) or (x, p), "
              "approx_percentile_cont_with_weight(w, p) WITHIN GROUP (ORDER BY x) or (x, w, p), "
              "first_value, "
              "last_value, corr, covar, covar_samp, covar_pop, regr_slope, regr_intercept, "
              "regr_count, regr_r2, regr_avgx, regr_avgy, regr_sxx, regr_syy, regr_sxy)")


def is_aggregating(select: exp.Select) -> bool:
    """A SELECT with GROUP BY or an aggregate function of its own."""
    return select.args.get("group") is not None or any(
        is_aggregate_call(n) for n in own_nodes(select))


def is_window_call(node: exp.Expr) -> bool:
    return isinstance(node, exp.Anonymous) and node.name.upper() in WINDOW_FUNCTIONS


def is_aggregate_call(node: exp.Expr) -> bool:
    """An aggregate function call (not one computed OVER a window of rows)."""
    if isinstance(node.parent, exp.Window) and node.arg_key == "this":
        return False
    return isinstance(node, exp.AggFunc | exp.WithinGroup) or (
        isinstance(node, exp.Anonymous) and (node.name.upper() in _ANONYMOUS or (
            node.name.upper() in _PERCENTILES and not isinstance(node.parent, exp.WithinGroup))))


def check_window_calls(select: exp.Select, ctx: QueryContext) -> None:
    """TUMBLE/HOP/SESSION may only appear in GROUP BY (or the SELECT list it names)."""
    if is_aggregating(select):
        return
    node = next((n for n in own_nodes(select) if is_window_call(n)), None)
    if node is not None:
        raise ctx.error(f"{node.name.upper()} may only appear in GROUP BY", node)


def aggregate_stream(select: exp.Select, source: Stream, ctx: QueryContext) -> Stream:
    """The stream an aggregating SELECT over ``source`` produces (names already checked)."""
    group = select.args.get("group")
    window_node, window_alias, _ = group_items(select, group.expressions if group else [],
                                                source, ctx)
    if window_node is None:
        if source.window is not None:
            raise ctx.error("re-aggregating windowed output needs its window: GROUP BY the "
                            "window column passed up, or the same TUMBLE", group or select)
        return Stream(updating=True)
    if source.updating:
        raise ctx.error("a windowed aggregate cannot read updating rows (a non-windowed "
                        "aggregate or a debezium_json source)", window_node)
    spec = _spec(window_node, source, ctx)
    if source.window is not None and source.window.kind != "tumble":
        raise ctx.error(f"re-aggregating the output of a {source.window.kind.upper()} window is "
                        "not supported yet; re-aggregate TUMBLE output, or aggregate the "
                        "source rows in the window directly", window_node)
    if source.window is not None and source.window != spec:
        raise ctx.error("re-aggregating windowed output must use the same TUMBLE window "
                        f"as its input ({source.window.describe()})", window_node)
    names = {item.alias_or_name.lower() for item in select.expressions
             if _is_window_item(item, window_node, window_alias)}
    return Stream(window=spec, window_columns=frozenset(names))


def _is_window_item(item: exp.Expr, window_node: exp.Expr, alias: str | None) -> bool:
    body = item.this if isinstance(item, exp.Alias) else item
    return body == window_node or (isinstance(body, exp.Column) and not body.table
                                   and body.name.lower() == alias)


def _spec(window_node: exp.Expr, source: Stream, ctx: QueryContext) -> WindowSpec:
    if isinstance(window_node, exp.Column):  # the passed-up window column of the input
        assert source.window is not None
        return source.window
    assert isinstance(window_node, exp.Anonymous)  # what is_window_call matched
    return window_spec(window_node, ctx.text, ctx.fallback)


def plan_window_aggregate(select: exp.Select, source: Stream,
                          ctx: QueryContext) -> exp.Select:
    """Add the window operator of ``select`` to ``ctx``; return the SELECT over its
    output that replaces ``select``."""
    operator_id = ctx.operator_id("window")
    group = select.args.get("group")
    assert group is not None  # aggregate_stream classified it windowed
    window_node, window_alias, keys = group_items(select, group.expressions, source, ctx)
    assert window_node is not None
    spec = _spec(window_node, source, ctx)
    output_view = f"__spate_{operator_id}"
    # the reader of a nested aggregate may window or join its rows
    passed = (EVENT_TIME,) if is_nested(select) else ()
    split = split_aggregate(select, keys, (window_node, window_alias), output_view, ctx,
                            output_extra=passed)
    ctx.operators.append(WindowAggregate(
        operator_id=operator_id, output_view=output_view,
        input_sql=split.input_select.sql(dialect="spark", identify=True),
        key_columns=split.key_names, window=spec, aggregates=split.aggregates,
    ))
    return split.output


@dataclass(frozen=True)
class SplitAggregate:
    """An aggregating SELECT taken apart around a Spate operator."""

    #: the operator's input: keys ``k<i>``, aggregate arguments ``a<i>``, event time
    #: (and the extra input columns asked for), over the SELECT's FROM and WHERE
    input_select: exp.Select
    key_names: tuple[str, ...]
    aggregates: tuple[AggregateCall, ...]
    #: the SELECT over the operator's output view that replaces the original one
    #: (its list over ``k<i>``, ``agg<i>`` and the window, HAVING as its WHERE)
    output: exp.Select


def split_aggregate(
    select: exp.Select,
    keys: list[exp.Expr],
    window: tuple[exp.Expr | None, str | None],
    output_view: str,
    ctx: QueryContext,
    *,
    input_extra: tuple[str, ...] = (),
    output_extra: tuple[str, ...] = (),
) -> SplitAggregate:
    """Split ``select`` (grouped by ``keys`` and the ``(window call, its alias)``, if
    any) into the operator's input and the SELECT over its output; ``input_extra``
    and ``output_extra`` name hidden columns passed through."""
    window_node, window_alias = window
    key_names = tuple(f"k{i}" for i in range(len(keys)))
    aggregates: list[AggregateCall] = []
    arguments: list[exp.Expr] = []
    kind = "windowed" if window_node is not None else "updating"

    def rewrite(node: exp.Expr) -> exp.Expr:
        for i, key in enumerate(keys):
            if node == key:
                return exp.column(key_names[i])
        if window_node is not None and (node == window_node or (
                isinstance(node, exp.Column) and not node.table
                and node.name.lower() == window_alias)):
            return exp.column(WINDOW_COLUMN)
        if isinstance(node, exp.Column) and window_alias and node.table.lower() == window_alias:
            return exp.column(node.name.lower(), table=WINDOW_COLUMN)
        if is_aggregate_call(node):
            return exp.column(_aggregate_call(node, aggregates, arguments, ctx, kind).output)
        return node

    def produced() -> set[str]:
        window_names = {WINDOW_COLUMN} if window_node is not None else set()
        return {*key_names, *window_names, *(a.output for a in aggregates)}

    items: list[exp.Expr] = []
    for item in select.expressions:
        name = item.alias_or_name
        body = item.this if isinstance(item, exp.Alias) else item
        new = body.transform(rewrite, copy=True)
        _check_grouped(new, produced(), ctx, item)
        items.append(exp.alias_(new, name or written_name(body), quoted=True))
    items.extend(exp.column(name) for name in output_extra)
    having = select.args.get("having")
    input_select = select.copy()
    input_select.set("group", None)
    input_select.set("having", None)
    input_select.set("expressions", [
        *(exp.alias_(k.copy(), key_names[i]) for i, k in enumerate(keys)),
        *(exp.alias_(a.copy(), f"a{i}") for i, a in enumerate(arguments)),
        exp.column(EVENT_TIME), *(exp.column(name) for name in input_extra),
    ])
    rewritten: exp.Select = exp.select(*items).from_(output_view)
    if having is not None:
        condition = having.this.transform(rewrite, copy=True)
        _check_grouped(condition, produced(), ctx, having)
        rewritten = rewritten.where(condition)
    rewritten.meta[STREAM_META] = select.meta.get(STREAM_META)
    return SplitAggregate(input_select, key_names, tuple(aggregates), rewritten)


def group_items(
    select: exp.Select, items: list[exp.Expr], source: Stream, ctx: QueryContext
) -> tuple[exp.Expr | None, str | None, list[exp.Expr]]:
    """The window of a GROUP BY (a window call, or the input's window column), the
    SELECT alias it has, and the grouping keys."""
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
        elif isinstance(item, exp.Column) and not item.table and item.name.lower() in aliased \
                and item.name.lower() not in source.window_columns:
            resolved = aliased[item.name.lower()]
        passed_up = isinstance(resolved, exp.Column) and \
            resolved.name.lower() in source.window_columns
        if is_window_call(resolved) or passed_up:
            if window_node is not None:
                raise ctx.error("at most one window may appear in GROUP BY", item)
            window_node = resolved
            window_alias = next((e.alias.lower() for e in select.expressions
                                 if isinstance(e, exp.Alias) and e.this == resolved), None)
            if passed_up and window_alias is None:
                window_alias = resolved.name.lower()
        else:
            keys.append(resolved)
    return window_node, window_alias, keys


def _aggregate_call(
    node: exp.Expr,
    calls: list[AggregateCall],
    arguments: list[exp.Expr],
    ctx: QueryContext,
    kind: str,
) -> AggregateCall:
    function, argument = _aggregate_kind(node, ctx, kind)
    fraction = _fraction(node, ctx) if function in _PERCENTILES.values() else None
    argument_name = None
    if argument is not None:
        if argument in arguments:
            argument_name = f"a{arguments.index(argument)}"
        else:
            arguments.append(argument)
            argument_name = f"a{len(arguments) - 1}"
    for call in calls:
        if (call.function, call.argument, call.fraction) == (function, argument_name,
                                                              fraction):
            return call
    call = AggregateCall(function, argument_name, f"agg{len(calls)}", fraction)
    calls.append(call)
    return call


def _aggregate_kind(node: exp.Expr, ctx: QueryContext,
                    operator: str) -> tuple[str, exp.Expr | None]:
    if isinstance(node, UdafRows):  # an aggregate UDF's argument rows
        if operator != "windowed":
            call = node.parent if isinstance(node.parent, exp.Anonymous) else node
            raise ctx.error(f"aggregate UDF {call.name}() is not supported yet in {operator} "
                            "aggregates; use it in a windowed one (GROUP BY TUMBLE, HOP or "
                            "SESSION)", call)
        return "udaf_rows", node.this
    if isinstance(node, exp.Anonymous) and node.name.upper() == _PERCENTILE:
        if not 2 <= len(node.expressions) <= 3:
            raise ctx.error("approx_percentile_cont(x, p[, centroids]) takes 2 or 3 arguments",
                            node)
        return "percentile_cont", node.expressions[0]
    if isinstance(node, exp.Anonymous) and node.name.upper() == _WEIGHTED:
        if not 3 <= len(node.expressions) <= 4:
            raise ctx.error("approx_percentile_cont_with_weight(x, weight, p[, centroids]) "
                            "takes 3 or 4 arguments", node)
        return "percentile_cont_weighted", _weighted(*node.expressions[:2])
    if isinstance(node, exp.Anonymous):  # MEAN, APPROX_MEDIAN
        if len(node.expressions) != 1:
            raise ctx.error(f"{node.name.upper()} takes one argument", node)
        return _ANONYMOUS[node.name.upper()], node.expressions[0]
    if isinstance(node, exp.WithinGroup):
        argument = _ordered_argument(node, ctx)
        if node.this.name.upper() == _WEIGHTED and node.this.expressions:
            return "percentile_cont_weighted", _weighted(argument, node.this.expressions[0])
        return "percentile_cont", argument
    if isinstance(node, _PAIRED):
        return node.sql_name().lower(), _pair(node.this, node.expression)
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
            if isinstance(node, exp.Func) and isinstance(node.this, exp.Distinct):
                name = written_call_name(node, ctx.text) or node.sql_name().lower()
                raise ctx.error(f"{name}(DISTINCT ...) is not supported "
                                "yet; of the aggregates only count takes DISTINCT", node)
            if isinstance(node, exp.LogicalAnd | exp.LogicalOr):
                return name, exp.cast(node.this.copy(), exp.DataType.Type.BOOLEAN)
            return name, node.this
    name = node.sql_name() if isinstance(node, exp.Func) else node.key.upper()
    raise ctx.error(f"aggregate {name} is not supported yet in {operator} aggregates "
                    f"(supported: {_SUPPORTED})", node)


def _pair(y: exp.Expr, x: exp.Expr) -> exp.Expr:
    """``[y, x]`` as doubles, NULL unless both are set (such pairs are ignored)."""
    either_null = exp.or_(exp.Is(this=y.copy(), expression=exp.null()),
                          exp.Is(this=x.copy(), expression=exp.null()))
    pair = exp.Array(expressions=[exp.cast(y.copy(), exp.DataType.Type.DOUBLE),
                                  exp.cast(x.copy(), exp.DataType.Type.DOUBLE)])
    return exp.If(this=either_null, true=exp.null(), false=pair)


def _weighted(x: exp.Expr, weight: exp.Expr) -> exp.Expr:
    """``[x, weight]`` as doubles, NULL when either is NULL or the weight is not positive
    (such a row carries nothing to a weighted percentile)."""
    ignored = exp.or_(exp.Is(this=x.copy(), expression=exp.null()),
                      exp.Is(this=weight.copy(), expression=exp.null()),
                      exp.LTE(this=weight.copy(), expression=exp.Literal.number(0)))
    pair = exp.Array(expressions=[exp.cast(x.copy(), exp.DataType.Type.DOUBLE),
                                  exp.cast(weight.copy(), exp.DataType.Type.DOUBLE)])
    return exp.If(this=ignored, true=exp.null(), false=pair)


def _ordered_argument(node: exp.WithinGroup, ctx: QueryContext) -> exp.Expr:
    """The x of ``approx_percentile_cont(p) WITHIN GROUP (ORDER BY x)`` (or of the
    weighted one)."""
    call = node.this
    order = node.expression
    if not (isinstance(call, exp.Anonymous) and call.name.upper() in _PERCENTILES):
        raise ctx.error("WITHIN GROUP is supported only for approx_percentile_cont and "
                        "approx_percentile_cont_with_weight", node)
    if not isinstance(order, exp.Order) or len(order.expressions) != 1 or \
            order.expressions[0].args.get("desc"):
        raise ctx.error(f"{call.name.lower()} takes WITHIN GROUP (ORDER BY x) of one "
                        "ascending x", node)
    argument: exp.Expr = order.expressions[0].this
    return argument


def _fraction(node: exp.Expr, ctx: QueryContext) -> float:
    """The p of ``approx_percentile_cont(p[, centroids]) WITHIN GROUP (...)`` or of
    ``approx_percentile_cont(x, p[, centroids])`` (after the weight, for the weighted
    one): a literal from 0 to 1. (The result is exact, so the number of centroids, a
    bound on the error, needs no use.)"""
    call = node.this if isinstance(node, exp.WithinGroup) else node
    assert isinstance(call, exp.Anonymous)  # as _aggregate_kind found it
    name = call.name.lower()
    before = int(not isinstance(node, exp.WithinGroup)) + int(name.upper() == _WEIGHTED)
    arguments, centroids = call.expressions[before:before + 1], call.expressions[before + 1:]
    if len(centroids) > 1 or centroids and not (isinstance(centroids[0], exp.Literal)
                                                and centroids[0].name.isdigit()):
        raise ctx.error(f"{name}(): centroids must be a positive integer", centroids[0])
    literal = arguments[0] if arguments else None
    if not isinstance(literal, exp.Literal) or literal.is_string or \
            not 0 <= float(literal.name) <= 1:
        raise ctx.error(f"{name}(): the percentile p must be one number from 0 to 1", node)
    return float(literal.name)


def _check_grouped(
    node: exp.Expr, produced: set[str], ctx: QueryContext, where: exp.Expr
) -> None:
    for column in node.find_all(exp.Column):
        if column.name in produced or column.table == WINDOW_COLUMN:
            continue
        raise ctx.error(f"column '{column.sql()}' must appear in GROUP BY or inside an "
                        "aggregate", column if column.meta or column.find(exp.Identifier)
                        else where)
