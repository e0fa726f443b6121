"""Planning of updating (non-windowed) joins, docs/sql/joins.md.

``a [INNER | LEFT | RIGHT | FULL] JOIN b ON a.k = b.k [AND ...]`` over two
append-only inputs becomes an :class:`UpdatingJoin` operator.  Each side's
rows are read natively with their join key (the ON clause's equalities
between the sides) and its key group; the operator keeps every row in state
under its key until ``updating_ttl`` after the key was last seen, and matches
new rows against stored ones with the full ON clause, natively in Spark.

The SELECT is rewritten to read the operator's output, which has one struct
column per side named like the side (so ``a.x`` keeps meaning the same) plus
the change columns (LEFT, RIGHT and FULL joins are updating).
"""

from __future__ import annotations

from sqlglot import exp

from spate.engine.planner.aggregates import is_aggregating
from spate.engine.planner.context import QueryContext, Scope
from spate.engine.planner.plan import EVENT_TIME, RETRACT, ROW_KEY, UpdatingJoin
from spate.engine.planner.plan import JOIN_KEY as KEY

JOIN_TYPES = ("inner", "left", "right", "full")


def plan_updating_join(select: exp.Select, scopes: list[Scope], ctx: QueryContext) -> None:
    """Add the join of ``select`` to ``ctx`` and make ``select`` read its output."""
    (join,) = _one_join(select, ctx)
    left, right = scopes
    on = join.args["on"]
    keys = _equalities(on, left, right)
    if not keys:
        raise ctx.clause_error(
            f"an updating join needs at least one equality between its sides "
            f"({left.name}.<column> = {right.name}.<column>) in ON", join.this)
    side = (join.args.get("side") or "").lower()
    operator_id = ctx.operator_id("join")
    output_view = f"__spate_{operator_id}"
    items = [_item(join_item, scope) for join_item, scope in
             zip([select.args["from_"].this, join.this], scopes, strict=True)]
    ctx.operators.append(UpdatingJoin(
        operator_id=operator_id, output_view=output_view,
        join_type=side if side in JOIN_TYPES else "inner",
        left=left.name, right=right.name,
        left_sql=_side_sql(items[0], left, [k for k, _ in keys]),
        right_sql=_side_sql(items[1], right, [k for _, k in keys]),
        left_columns=left.columns, right_columns=right.columns,
        condition_sql=on.sql(dialect="spark", identify=True),
    ))
    _qualify_columns(select, scopes)
    select.set("joins", None)
    select.set("from_", exp.From(this=exp.to_table(output_view)))
    if side in ("left", "right", "full") and not is_aggregating(select):
        names = {e.alias_or_name for e in select.expressions}
        for column in (RETRACT, ROW_KEY):  # outer joins retract NULL-padded rows
            if column not in names:
                select.append("expressions", exp.column(column))


def _one_join(select: exp.Select, ctx: QueryContext) -> list[exp.Join]:
    joins = list(select.args.get("joins") or [])
    if len(joins) > 1:
        raise ctx.clause_error("one updating join per SELECT: join two inputs in a subquery, "
                               "then join its result", joins[1].this)
    return joins


def _equalities(on: exp.Expr, left: Scope, right: Scope) -> list[tuple[exp.Expr, exp.Expr]]:
    """(left expression, right expression) of each top-level ``=`` between the sides."""
    terms = list(on.flatten()) if isinstance(on, exp.And) else [on]
    pairs = []
    for term in terms:
        if not isinstance(term, exp.EQ):
            continue
        a, b = term.this, term.expression
        sides_a, sides_b = _sides(a, left, right), _sides(b, left, right)
        if sides_a == {left.name} and sides_b == {right.name}:
            pairs.append((a, b))
        elif sides_a == {right.name} and sides_b == {left.name}:
            pairs.append((b, a))
    return pairs


def _sides(node: exp.Expr, left: Scope, right: Scope) -> set[str]:
    """Which sides' columns ``node`` reads."""
    found = set()
    for column in node.find_all(exp.Column):
        qualifier = column.table.lower() if column.table else ""
        if qualifier in (left.name, right.name):
            found.add(qualifier)
        elif column.name.lower() in left.columns:
            found.add(left.name)
        elif column.name.lower() in right.columns:
            found.add(right.name)
    return found


def _item(node: exp.Expr, scope: Scope) -> exp.Expr:
    """A FROM/JOIN item named by its scope name."""
    copied = node.copy()
    if isinstance(copied, exp.Table):
        copied.set("alias", exp.TableAlias(this=exp.to_identifier(scope.name)))
    return copied


def _side_sql(item: exp.Expr, scope: Scope, keys: list[exp.Expr]) -> str:
    """One side's rows: its columns, event time and join key (a string; NULL when a key
    column is NULL, as such a row matches nothing)."""
    columns = [exp.column(c, table=scope.name) for c in scope.columns]
    parts = [exp.cast(_qualified(k, scope), exp.DataType.build("string")) for k in keys]
    key = exp.func("to_json", exp.func("array", *parts))
    any_null = exp.or_(*(exp.Is(this=p.copy(), expression=exp.Null()) for p in parts))
    key = exp.Case(ifs=[exp.If(this=any_null, true=exp.Null())], default=key)
    select = exp.select(*columns, exp.column(EVENT_TIME, table=scope.name),
                        exp.alias_(key, KEY)).from_(item)
    return select.sql(dialect="spark", identify=True)


def _qualified(node: exp.Expr, scope: Scope) -> exp.Expr:
    def qualify(n: exp.Expr) -> exp.Expr:
        if isinstance(n, exp.Column) and not n.table:
            return exp.column(n.name.lower(), table=scope.name)
        return n
    return node.transform(qualify, copy=True)


def _qualify_columns(select: exp.Select, scopes: list[Scope]) -> None:
    """Unqualified column names of ``select`` get their side's name (``x`` -> ``a.x``),
    so they read the side's struct column of the join's output."""
    for column in list(select.find_all(exp.Column)):
        if column.table or isinstance(column.this, exp.Star):
            continue
        owner = next((s for s in scopes if column.name.lower() in s.columns), None)
        if owner is not None and _own(column, select):
            column.set("table", exp.to_identifier(owner.name))


def _own(node: exp.Expr, select: exp.Select) -> bool:
    """Whether ``node`` belongs to ``select`` itself rather than a subquery in it."""
    parent = node.parent
    while parent is not None and parent is not select:
        if isinstance(parent, exp.Select):
            return False
        parent = parent.parent
    return parent is select
