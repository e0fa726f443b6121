"""Planning of updating (non-windowed) aggregates, docs/sql/updating.md.

A SELECT that aggregates without a window in its GROUP BY becomes an
:class:`UpdatingAggregate` operator, over append-only or updating input:

* its input (keys ``k<i>``, aggregate arguments ``a<i>``, event time, and for
  updating input the retraction flag) is native Spark SQL over the SELECT's
  FROM and WHERE, pre-aggregated natively per key and epoch into signed
  partials (``spate.engine.runtime.updating``);
* the operator keeps each key's accumulators in statestore and, once per flush
  interval, emits the changes of its keys as updating rows: the old output
  withdrawn (``_spate_retract``), the new one added, keyed (``_spate_key``) by
  the group key;
* the SELECT is rewritten to read the operator's output; HAVING becomes its
  WHERE, which filters a withdrawal like the row it withdraws, so a group that
  stops matching HAVING leaves a lone withdrawal: a delete.

``SELECT DISTINCT`` is planned as a GROUP BY of every selected column, and
``a UNION b`` as ``SELECT DISTINCT * FROM (a UNION ALL b)`` (docs/sql/queries.md).
"""

from __future__ import annotations

from sqlglot import exp

from spate.engine.planner.aggregates import group_items, is_aggregate_call, split_aggregate
from spate.engine.planner.context import QueryContext, is_nested, own_nodes
from spate.engine.planner.plan import (
    EVENT_TIME,
    RETRACT,
    ROW_KEY,
    Stream,
    UpdatingAggregate,
)


def plan_updating_aggregate(select: exp.Select, source: Stream,
                            ctx: QueryContext) -> exp.Select:
    """Add the updating aggregate of ``select`` to ``ctx``; return the SELECT over its
    output that replaces ``select``."""
    operator_id = ctx.operator_id("aggregate")
    group = select.args.get("group")
    _, _, keys = group_items(select, group.expressions if group else [], source, ctx)
    output_view = f"__spate_{operator_id}"
    # in the order plain SELECTs pass them (UNION ALL branches must agree)
    passed = (*((EVENT_TIME,) if is_nested(select) else ()), RETRACT, ROW_KEY)
    split = split_aggregate(select, keys, (None, None), output_view, ctx,
                            input_extra=(RETRACT,) if source.updating else (),
                            output_extra=passed)
    ctx.operators.append(UpdatingAggregate(
        operator_id=operator_id, output_view=output_view,
        input_sql=split.input_select.sql(dialect="spark", identify=True),
        key_columns=split.key_names, aggregates=split.aggregates,
        updating_input=source.updating,
    ))
    return split.output


def check_distinct(select: exp.Select, ctx: QueryContext) -> None:
    """SELECT DISTINCT is planned as GROUP BY (:func:`distinct_as_group_by`), alone."""
    distinct = select.args["distinct"]
    first = select.expressions[0] if select.expressions else select
    if distinct.args.get("on") is not None:
        raise ctx.error("SELECT DISTINCT ON (...) is not supported; use GROUP BY",
                        distinct.args["on"])
    if select.args.get("group") is not None or any(
            is_aggregate_call(n) for n in own_nodes(select)):
        raise ctx.error_at_keyword("SELECT DISTINCT cannot be combined with GROUP BY or "
                                   "aggregates; select from a subquery that aggregates",
                                   first, ("DISTINCT",))


def distinct_as_group_by(select: exp.Select) -> None:
    """``SELECT DISTINCT a, b + 1 AS c ...`` -> ``SELECT a, b + 1 AS c ... GROUP BY 1, 2``."""
    select.set("distinct", None)
    positions = [exp.Literal.number(i + 1) for i in range(len(select.expressions))]
    select.set("group", exp.Group(expressions=positions))


def union_as_distinct(query: exp.Query) -> exp.Query:
    """Every ``a UNION b`` of ``query`` as ``SELECT DISTINCT * FROM (a UNION ALL b)``,
    innermost first; returns the (new) root."""
    unions = [u for u in query.find_all(exp.Union) if u.args.get("distinct")]
    for union in unions:  # (a UNION b) UNION c: the outer DISTINCT covers the inner
        for branch in (union.this, union.expression):
            while isinstance(branch, exp.Union):
                branch.set("distinct", False)
                branch = branch.this
    unions = [u for u in unions if u.args.get("distinct")]
    for union in reversed(unions):  # pre-order: an inner union comes after its parent
        union_all = union.copy()
        union_all.set("distinct", False)
        alias = exp.TableAlias(this=exp.to_identifier("__union"))
        distinct = exp.select("*").from_(exp.Subquery(this=union_all, alias=alias)).distinct()
        if union is query:
            return distinct
        union.replace(distinct)
    return query
