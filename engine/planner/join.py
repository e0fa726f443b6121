"""Joins (docs/sql/joins.md): which kind a JOIN is, and the planning of windowed ones.

* **Windowed**: both sides are windowed over the same TUMBLE or HOP.  Every
  window's rows reach the join in the epoch whose watermark closed it (the
  pipeline has one watermark, so both sides close it together), and rows match
  only within their window, so the join runs natively in Spark over that
  epoch's rows, with no state of its own.  Spate adds the window equality when
  the ON clause does not already hold it.
* **Lookup**: the right side is a lookup table (``CREATE TEMPORARY TABLE``).
* **Updating**: neither side is windowed; both are append-only.
"""

from __future__ import annotations

from sqlglot import exp

from spate.engine.planner.context import QueryContext, Scope
from spate.engine.planner.plan import EVENT_TIME, Stream

_OUTER_SIDES = ("LEFT", "RIGHT", "FULL")


def joins_of(select: exp.Select) -> list[exp.Join]:
    return list(select.args.get("joins") or [])


def check_join_shapes(select: exp.Select, ctx: QueryContext) -> None:
    """Only ``[INNER | LEFT | RIGHT | FULL] [OUTER] JOIN ... ON ...``."""
    for join in joins_of(select):
        kind = (join.args.get("kind") or "").upper()
        if kind == "CROSS" or join.args.get("method"):
            raise ctx.clause_error(f"{kind or join.args['method'].upper()} JOIN is not "
                                   "supported; write JOIN ... ON <condition>", join.this)
        if join.args.get("using"):
            raise ctx.clause_error("JOIN ... USING is not supported yet; write ON a.k = b.k",
                                   join.this)
        if join.args.get("on") is None:
            raise ctx.clause_error("a JOIN needs an ON condition", join.this)
        if isinstance(join.this, exp.Unnest | exp.Lateral):
            raise ctx.clause_error("joining UNNEST or LATERAL is not supported", join.this)


def join_stream(select: exp.Select, scopes: list[Scope], ctx: QueryContext) -> Stream:
    """The stream a joining SELECT produces, checking the rules of its join kind."""
    check_join_shapes(select, ctx)
    joins = joins_of(select)
    if any(s.lookup for s in scopes):
        return scopes[0].stream  # a lookup adds columns to each left row
    windowed = [s for s in scopes if s.stream.window is not None]
    if windowed and len(windowed) != len(scopes):
        plain = next(s for s in scopes if s.stream.window is None)
        raise ctx.clause_error(
            f"a windowed join needs both sides windowed over the same window, but "
            f"'{plain.name}' is not windowed; aggregate it over the same TUMBLE or HOP",
            joins[0].this)
    if windowed:
        return _windowed_join_stream(scopes, joins, ctx)
    for scope, join in zip(scopes, [joins[0], *joins], strict=True):
        if scope.stream.updating:
            raise ctx.clause_error(f"a join cannot read updating rows ('{scope.name}' is "
                                   "updating: a non-windowed aggregate or a debezium_json "
                                   "source)", join.this)
    outer = any((j.args.get("side") or "").upper() in _OUTER_SIDES for j in joins)
    return Stream(updating=outer)


def _windowed_join_stream(scopes: list[Scope], joins: list[exp.Join],
                          ctx: QueryContext) -> Stream:
    first = scopes[0].stream.window
    assert first is not None
    for scope, join in zip(scopes[1:], joins, strict=True):
        window = scope.stream.window
        if window != first:
            assert window is not None
            raise ctx.clause_error(
                f"the two sides of a windowed join must use the same window: "
                f"'{scopes[0].name}' has {first.describe()}, '{scope.name}' "
                f"{window.describe()}", join.this)
    if first.kind == "session":
        raise ctx.clause_error("SESSION windows cannot be joined (a windowed join of "
                               "SESSION windows is not supported yet); use TUMBLE or HOP",
                               joins[0].this)
    for scope, node in zip(scopes, [joins[0].this, *(j.this for j in joins)], strict=True):
        if not scope.stream.window_columns:
            raise ctx.clause_error(
                f"'{scope.name}' must select its window (e.g. TUMBLE(...) AS window) so "
                "rows are joined within the same window", node)
    return Stream(window=first)


def plan_windowed_join(select: exp.Select, scopes: list[Scope]) -> None:
    """Make every ON clause of ``select`` (in place) hold its sides' window equality."""
    left = scopes[0]
    for join, right in zip(joins_of(select), scopes[1:], strict=True):
        on = join.args["on"]
        if _equates_windows(on, left, right):
            continue
        equality = exp.EQ(this=exp.column(_window_column(left), table=left.name),
                          expression=exp.column(_window_column(right), table=right.name))
        join.set("on", exp.and_(equality, on.copy()))


def _window_column(scope: Scope) -> str:
    return sorted(scope.stream.window_columns)[0]


def _equates_windows(on: exp.Expr, left: Scope, right: Scope) -> bool:
    for eq in on.find_all(exp.EQ):
        sides = [eq.this, eq.expression]
        if all(isinstance(s, exp.Column) for s in sides):
            names = {(s.table.lower(), s.name.lower()) for s in sides}
            if any((left.name, c) in names for c in left.stream.window_columns) and any(
                    (right.name, c) in names for c in right.stream.window_columns):
                return True
    return False


def joined_event_time(scopes: list[Scope]) -> exp.Expr:
    """The event time of a joined row: the later of its sides' (a NULL side is skipped)."""
    times = [exp.column(EVENT_TIME, table=s.name) for s in scopes if not s.lookup]
    if len(times) == 1:
        return times[0]
    return exp.func("greatest", *times)
