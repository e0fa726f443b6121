"""Lookup joins (docs/sql/joins.md): the rules of a JOIN against a lookup table, and
its operator.

A lookup table (``CREATE TEMPORARY TABLE``) is the right side of an INNER or
LEFT join, named directly; its ON clause is an AND of equalities, each between
one of its PRIMARY KEY columns and an expression of the left side, and it gives
every PRIMARY KEY column once. Nothing else may filter it there.

Planning turns ``FROM l JOIN c ON c.id = <expr>`` into a :class:`LookupJoin`
operator reading ``SELECT l.*, TRY_CAST(<expr> AS <id's type>) FROM l`` natively
and appending the looked-up columns (on executors, see
:mod:`spate.engine.runtime.lookup`); the SELECT then reads the operator's output view
under the left side's name, its references to the lookup table's columns
renamed. Several lookup joins in one SELECT chain one operator after another.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from spate.engine.connectors import TableConfig
from spate.engine.planner.context import QueryContext, Scope, own_nodes
from spate.engine.planner.errors import PlanningError
from spate.engine.planner.join import joins_of
from spate.engine.planner.plan import LookupJoin


@dataclass
class _Renames:
    """Where the lookup tables' columns went: (lookup alias, column) -> output column."""

    left: str
    columns: dict[tuple[str, str], str]
    scopes: list[Scope]

    def owner(self, column: exp.Column) -> tuple[str, str, bool] | None:
        """(lookup alias, lookup column, is a struct field access) for a reference to a
        renamed lookup column, else None."""
        qualifiers = _qualifiers(column)
        name = column.name.lower()
        if len(qualifiers) == 2:  # alias.column.field
            found = (qualifiers[0], qualifiers[1])
            return (*found, True) if found in self.columns else None
        if len(qualifiers) == 1 and (qualifiers[0], name) in self.columns:
            return qualifiers[0], name, False  # alias.column
        if len(qualifiers) == 1 and qualifiers[0] not in {s.name for s in self.scopes}:
            owners = [a for a, c in self.columns if c == qualifiers[0]]  # column.field
            return (owners[0], qualifiers[0], True) if len(owners) == 1 else None
        if not qualifiers:
            owners = [s.name for s in self.scopes if name in s.columns]
            if len(owners) == 1 and (owners[0], name) in self.columns:
                return owners[0], name, False
        return None

    def rewrite(self, node: exp.Expr) -> exp.Expr:
        if not isinstance(node, exp.Column):
            return node
        owner = self.owner(node)
        if owner is None:
            return node
        renamed = self.columns[(owner[0], owner[1])]
        if owner[2]:  # keep the field access: left.renamed.field
            return exp.Column(this=node.this.copy(), table=exp.to_identifier(renamed),
                              db=exp.to_identifier(self.left))
        return exp.column(renamed, table=self.left)


def plan_lookup_joins(select: exp.Select, scopes: list[Scope], ctx: QueryContext) -> None:
    """Check the lookup joins of ``select`` and replace them (in place) by operators."""
    joins = joins_of(select)
    for join, scope in zip(joins, scopes[1:], strict=True):
        if not scope.lookup:
            raise ctx.clause_error(
                "a SELECT with a lookup join cannot join anything else; join the streams "
                "in a subquery and look up from its rows", join.this)
    left = scopes[0]
    if left.stream.updating:
        raise ctx.clause_error(f"a lookup join cannot read updating rows ('{left.name}' is "
                               "updating)", joins[0].this)
    from_ = select.args.get("from_") or select.args["from"]
    relation: exp.Expr = from_.this.copy()
    renames = _Renames(left.name, {}, scopes)
    for join, scope in zip(joins, scopes[1:], strict=True):
        keep_unmatched = _join_kind(join, ctx)
        table = ctx.tables[join.this.name.lower()].config
        keys = _key_expressions(join, scope, table, ctx)
        operator_id = ctx.operator_id("lookup")
        prefix = f"__spate_{operator_id}_"
        key_inputs = tuple(f"{prefix}key{i}" for i in range(len(keys)))
        items: list[exp.Expr] = [exp.Column(this=exp.Star(), table=exp.to_identifier(left.name))]
        for column_name, expression, key_input in zip(table.primary_key, keys, key_inputs,
                                                      strict=True):
            column = next(c for c in table.columns if c.name == column_name)
            key_type = exp.DataType.build(column.spark_type.simpleString(), dialect="spark")
            value = expression.transform(renames.rewrite, copy=True)
            items.append(exp.alias_(exp.TryCast(this=value, to=key_type, safe=True), key_input))
        input_select = exp.select(*items).from_(relation)
        outputs = tuple(f"{prefix}{c.name}" for c in table.columns)
        renames.columns.update({(scope.name, c.name): o
                                for c, o in zip(table.columns, outputs, strict=True)})
        output_view = f"__spate_{operator_id}"
        ctx.operators.append(LookupJoin(
            operator_id=operator_id, output_view=output_view,
            input_sql=input_select.sql(dialect="spark", identify=True), table=table,
            key_inputs=key_inputs, outputs=outputs, keep_unmatched=keep_unmatched))
        relation = exp.Table(this=exp.to_identifier(output_view),
                             alias=exp.TableAlias(this=exp.to_identifier(left.name)))
    _read_operator_output(select, relation, renames)


def _join_kind(join: exp.Join, ctx: QueryContext) -> bool:
    """Whether the lookup join keeps unmatched rows (LEFT); only INNER and LEFT exist."""
    side = (join.args.get("side") or "").upper()
    if side not in ("", "LEFT"):
        raise ctx.clause_error(f"a lookup join is INNER or LEFT, not {side}: the lookup table "
                               f"'{join.this.name.lower()}' must be its right side", join.this)
    return side == "LEFT"


def _key_expressions(join: exp.Join, scope: Scope, table: TableConfig,
                     ctx: QueryContext) -> list[exp.Expr]:
    """The left-side expression given for each PRIMARY KEY column, in key order."""
    given: dict[str, exp.Expr] = {}
    for term in _conjuncts(join.args["on"]):
        column, other = _key_term(term, join, scope, table, ctx)
        if column in given:
            raise ctx.error(f"PRIMARY KEY column '{column}' of lookup table '{scope.name}' "
                            "is given twice in the ON clause", term)
        given[column] = other
    missing = [c for c in table.primary_key if c not in given]
    if missing:
        raise ctx.error(f"the ON clause must give every PRIMARY KEY column of lookup table "
                        f"'{scope.name}'; missing: {', '.join(missing)}", join.args["on"])
    return [given[c] for c in table.primary_key]


def _conjuncts(condition: exp.Expr) -> list[exp.Expr]:
    while isinstance(condition, exp.Paren):
        condition = condition.this
    if isinstance(condition, exp.And):
        return _conjuncts(condition.this) + _conjuncts(condition.expression)
    return [condition]


def _key_term(term: exp.Expr, join: exp.Join, scope: Scope, table: TableConfig,
              ctx: QueryContext) -> tuple[str, exp.Expr]:
    """(PRIMARY KEY column, left expression) of one ``c.key = <left expression>`` term."""
    rule = (f"a lookup join's ON clause may only equate PRIMARY KEY columns of "
            f"'{scope.name}' ({', '.join(table.primary_key)}) with expressions of the left "
            "side, joined by AND")
    if not isinstance(term, exp.EQ):
        raise _error(ctx, f"{rule}; move other conditions to WHERE", term, join)
    sides = [term.this, term.expression]
    mine = [_lookup_column(s, scope) for s in sides]
    if mine[0] is None and mine[1] is None:
        raise _error(ctx, f"{rule}; this term names no column of '{scope.name}'", term,
                     join)
    position = 0 if mine[0] is not None else 1
    column, other = mine[position], sides[1 - position]
    assert column is not None
    if any(_lookup_column(c, scope) is not None or _names_lookup(c, scope)
           for c in other.find_all(exp.Column)):
        raise ctx.error(f"{rule}; the other side of '=' must not use '{scope.name}'", term)
    if column not in table.primary_key:
        raise ctx.error(f"column '{column}' of lookup table '{scope.name}' is not part of its "
                        f"PRIMARY KEY ({', '.join(table.primary_key)}): a lookup fetches rows "
                        "by key only; move this condition to WHERE", sides[position])
    return column, other


def _error(ctx: QueryContext, message: str, node: exp.Expr, join: exp.Join) -> PlanningError:
    """An error at ``node``, or at the JOIN when ``node`` has no position (a literal)."""
    if ctx.text.offset_of(node, -1) < 0:
        return ctx.clause_error(message, join.this)
    return ctx.error(message, node)


def _lookup_column(node: exp.Expr, scope: Scope) -> str | None:
    """The lookup table's column ``node`` names, if it is a plain reference to one."""
    if not isinstance(node, exp.Column) or node.args.get("db") is not None:
        return None
    name = node.name.lower()
    qualifier = node.table.lower() if node.table else ""
    if qualifier == scope.name or (not qualifier and name in scope.columns):
        return name if name in scope.columns else None
    return None


def _names_lookup(column: exp.Column, scope: Scope) -> bool:
    """Whether ``column`` reaches into the lookup table (e.g. a struct field of it)."""
    qualifiers = _qualifiers(column)
    return bool(qualifiers) and (qualifiers[0] == scope.name or qualifiers[0] in scope.columns)


def _qualifiers(column: exp.Column) -> list[str]:
    """The names before a column's own: ``[db, table]`` of ``a.b.c``, ``[table]`` of ``b.c``."""
    return [p.name.lower() for p in (column.args.get("db"), column.args.get("table"))
            if isinstance(p, exp.Identifier)]


def _read_operator_output(select: exp.Select, relation: exp.Expr, renames: _Renames) -> None:
    """Make ``select`` read the last operator's view instead of its FROM and JOINs."""
    items = []
    for item in select.expressions:
        if isinstance(item, exp.Column) and renames.owner(item) is not None:
            item = exp.alias_(item.transform(renames.rewrite), item.alias_or_name)
        items.append(item)
    select.set("expressions", items)
    select.set("joins", None)
    for node in own_nodes(select):
        if isinstance(node, exp.Column) and renames.owner(node) is not None:
            node.replace(renames.rewrite(node))
    key = "from_" if "from_" in select.args else "from"
    select.set(key, exp.From(this=relation))
