"""The plan of a pipeline in its author's terms: ``spate run --explain`` and the API's
``explain`` text.

The planner names what it adds in its own terms: grouping keys ``k0``, aggregate
inputs ``a0`` and results ``agg0``, the window column ``__window``, an operator's
output view ``__spate_q0_window``, hidden columns such as ``_spate_event_time``.
This module says the same the way the SQL was written: windows as ``TUMBLE 5 s``,
aggregates as ``count(*) AS bids`` or ``max(bid.price)``, keys by the names the query
gives them, an operator's output by its kind (``window``, ``join``). The native
Spark SQL lines stay SQL, with those renames and without the hidden columns.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import sqlglot
from sqlglot import exp

from spate.engine.connectors.core.base import HIDDEN_TIMESTAMP
from spate.engine.planner.catalog import Table
from spate.engine.planner.plan import (
    EVENT_TIME,
    JOIN_KEY,
    RETRACT,
    ROW_KEY,
    WATERMARK,
    WINDOW_COLUMN,
    AggregateCall,
    LookupJoin,
    Operator,
    PipelinePlan,
    QueryPlan,
    UpdatingAggregate,
    UpdatingJoin,
    WindowAggregate,
    WindowSpec,
)

#: Columns the runtime passes along beside the query's own: never shown.
HIDDEN_COLUMNS = frozenset({EVENT_TIME, WATERMARK, RETRACT, ROW_KEY, JOIN_KEY})
#: A prefix of the names the planner makes up (views, columns, subquery aliases).
_INTERNAL = ("_spate_", "__")
#: A grouping key's column in an aggregate's input, and an aggregate's argument.
_KEY = re.compile(r"k\d+")
_ARGUMENT = re.compile(r"a\d+")
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DURATION_UNITS = ((86_400_000_000, "d"), (3_600_000_000, "h"), (60_000_000, "min"),
                   (1_000_000, "s"), (1_000, "ms"))
#: How SQL writes an aggregate whose planner name differs: (name, argument) -> text.
_AGGREGATE_SQL: dict[str, Callable[[AggregateCall, str], str]] = {
    "count_star": lambda call, argument: "count(*)",
    "count_distinct": lambda call, argument: f"count(DISTINCT {argument})",
    "percentile_cont": lambda call, argument:
        f"approx_percentile_cont({call.fraction}) WITHIN GROUP (ORDER BY {argument})",
    "percentile_cont_weighted": lambda call, argument:  # argument: "x, weight"
        f"approx_percentile_cont_with_weight({argument}, {call.fraction})",
    # an aggregate UDF's rows, collected for the UDF that the output SQL calls on them
    "udaf_rows": lambda call, argument: f"collect_list({argument})",
}


def duration(us: int) -> str:
    """Microseconds as SQL would say them, at most two units: ``5 s``, ``1 h 30 min``."""
    if us <= 0:
        return "0 s"
    parts: list[str] = []
    rest = us
    for size, unit in _DURATION_UNITS:
        if rest >= size and len(parts) < 2:
            parts.append(f"{rest // size} {unit}")
            rest %= size
    return " ".join(parts) or f"{us} µs"


def window_name(window: WindowSpec) -> str:
    """``TUMBLE 5 s``, ``HOP 1 min every 10 s``, ``SESSION gap 30 s``."""
    if window.kind == "session":
        return f"SESSION gap {duration(window.gap_us)}"
    if window.kind == "hop":
        return f"HOP {duration(window.width_us)} every {duration(window.slide_us)}"
    return f"TUMBLE {duration(window.width_us)}"


def explain_plan(plan: PipelinePlan) -> str:
    """The plan's sources and queries, marking native Spark parts and Spate operators."""
    lines = ["Pipeline plan", "", "Sources:"]
    lines.extend(f"  {_source_line(table)}" for table in plan.sources)
    for query in plan.queries:
        names = QueryNames.of(query)
        lines += ["", f"Query {query.index} -> sink {query.sink}",
                  f"  read        {', '.join(query.sources)}"]
        for operator in query.operators:
            lines.extend(f"  [spark]     {names.sql(text, operator)}"
                         for text in _native_sql(operator))
            lines.extend(f"  [spark]     {step}" for step in names.native_steps(operator))
            lines.append(f"  [spate]     {names.describe(operator)}")
        lines.append(f"  [spark]     {names.sql(query.output_sql)}")
        lines.append(f"  write       {query.sink}")
    return "\n".join(lines)


def _source_line(table: Table) -> str:
    kind = "bounded" if table.bounded else "unbounded"
    event_time = display_sql(table.event_time_sql) if table.event_time_sql else "connector clock"
    watermark = display_sql(table.watermark_sql).replace(HIDDEN_TIMESTAMP, "connector clock") \
        if table.watermark_sql else "none"
    return (f"{table.name}: {table.config.connector} ({kind}); event time {event_time}; "
            f"watermark {watermark}")


def _native_sql(operator: Operator) -> tuple[str, ...]:
    """The Spark SQL an operator reads, as the planner wrote it."""
    if isinstance(operator, WindowAggregate | UpdatingAggregate | LookupJoin):
        return (operator.input_sql,)
    if isinstance(operator, UpdatingJoin):
        return (operator.left_sql, operator.right_sql)
    return operator.native_inputs()


@dataclass
class QueryNames:
    """What the user calls the planner's names in one query, and how to say them."""

    #: the short name of each operator's output view: __spate_q0_window -> window
    relations: dict[str, str] = field(default_factory=dict)
    #: per output view, its internal columns' user names (k0 -> auction, agg0 -> bids)
    outputs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: per aggregating operator, its inputs' text (k0 -> bid.auction, a0 -> bid.price)
    inputs: dict[str, dict[str, str]] = field(default_factory=dict)
    #: per aggregating operator, its aggregates as written (agg0 -> max(bid.price))
    calls: dict[str, dict[str, str]] = field(default_factory=dict)
    #: a lookup join's columns: __spate_q0_lookup_name -> (customers, name)
    looked_up: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: a lookup join's key inputs, shown without their internal names
    lookup_keys: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, query: QueryPlan) -> QueryNames:
        trees = [_parse(text) for operator in query.operators
                 for text in _native_sql(operator)] + [_parse(query.output_sql)]
        names = cls()
        for operator in query.operators:
            view = operator.output_view
            names.relations[view] = operator.operator_id.removeprefix(f"q{query.index}_")
            names.outputs[view] = _reader_aliases(trees, view)
            if isinstance(operator, WindowAggregate | UpdatingAggregate):
                inputs = _aliases(_parse(operator.input_sql))
                names.inputs[view] = {alias: _argument_text(node.copy())
                                      for alias, node in inputs.items()}
                names.calls[view] = {call.output: names._call_text(operator, call)
                                     for call in operator.aggregates}
            if isinstance(operator, LookupJoin):
                table = operator.table
                names.looked_up.update({output: (table.name, column.name) for output, column
                                        in zip(operator.outputs, table.columns, strict=True)})
                names.lookup_keys.update(operator.key_inputs)
        return names

    def key_names(self, operator: WindowAggregate | UpdatingAggregate) -> str:
        """The grouping keys by the names the query gives them, or ``(all rows)``."""
        view = operator.output_view
        named = [self.outputs[view].get(k) or self.inputs[view].get(k, k)
                 for k in operator.key_columns]
        return ", ".join(named) or "(all rows)"

    def _call_text(self, operator: WindowAggregate | UpdatingAggregate,
                   call: AggregateCall) -> str:
        argument = self.inputs[operator.output_view].get(call.argument or "", "")
        written = _AGGREGATE_SQL.get(call.function)
        return written(call, argument) if written else f"{call.function}({argument})"

    def aggregate(self, operator: WindowAggregate | UpdatingAggregate,
                  call: AggregateCall) -> str:
        """``max(bid.price) AS top_price``: the call as written, and its name if it has one."""
        text = self.calls[operator.output_view][call.output]
        alias = self.outputs[operator.output_view].get(call.output)
        return f"{text} AS {alias}" if alias and alias.lower() != text.lower() else text

    def native_steps(self, operator: Operator) -> list[str]:
        """What native Spark does between an operator's input SQL and the operator."""
        if isinstance(operator, WindowAggregate):
            into = ", per event time" if operator.window.kind == "session" else \
                f" into {duration(operator.window.slide_us)} panes"
            return [f"pre-aggregate by {self.key_names(operator)}{into}"]
        if isinstance(operator, UpdatingAggregate):
            return [f"pre-aggregate by {self.key_names(operator)} (signed partials)"]
        return []

    def describe(self, operator: Operator) -> str:
        """``window: TUMBLE 1 s AS w by (all rows): count(*) AS bids; state …``."""
        name = self.relations[operator.output_view]
        describe = _DESCRIPTIONS.get(type(operator))
        return f"{name}: {describe(self, operator)}" if describe else operator.describe()

    def sql(self, text: str, reader: Operator | None = None) -> str:
        """Native SQL of this query (the input of ``reader``, if given) with the user's
        names for the planner's."""
        tree = _parse(text)
        for select in list(tree.find_all(exp.Select)):
            view = _read_view(select)
            if view in self.outputs:
                self._name_operator_output(select, view)
        if reader is not None and reader.output_view in self.inputs:
            self._name_operator_input(tree, reader.output_view)
        self._name_lookup_columns(tree)
        _rename_internal(tree)
        for table in tree.find_all(exp.Table):
            if table.name in self.relations:
                table.set("this", exp.to_identifier(self.relations[table.name]))
        return _render(tree)

    def _name_operator_input(self, tree: exp.Expr, view: str) -> None:
        """An operator's input: ``bid.auction AS k0`` -> ``bid.auction AS auction``,
        ``bid.price AS a0`` -> ``bid.price``."""
        select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
        keys = self.outputs[view]
        for item in list(select.expressions if select is not None else []):
            if isinstance(item, exp.Alias) and item.alias in self.inputs[view]:
                renamed = keys.get(item.alias) if _KEY.fullmatch(item.alias) else None
                item.replace(exp.alias_(item.this, renamed) if renamed else item.this)
                _unname_struct_fields(item.this)

    def _name_lookup_columns(self, tree: exp.Expr) -> None:
        """``o.__spate_q0_lookup_name`` -> ``customers.name``; key inputs lose their alias."""
        for item in list(tree.find_all(exp.Alias)):
            if item.alias in self.lookup_keys:
                item.replace(item.this)
        for column in list(tree.find_all(exp.Column)):
            parts = ["db", "table", "this"]
            for qualifier, part in zip(parts, parts[1:], strict=False):
                name = column.args.get(part)
                if isinstance(name, exp.Identifier) and name.name in self.looked_up:
                    table, original = self.looked_up[name.name]
                    column.set(part, exp.to_identifier(original))
                    column.set(qualifier, exp.to_identifier(table))

    def _name_operator_output(self, select: exp.Select, view: str) -> None:
        """The SELECT reading an operator's output: ``agg0 AS bids`` -> ``bids``,
        ``__window AS w`` -> ``w``, ``agg0 < 4`` -> ``bids < 4``."""
        names = {WINDOW_COLUMN: "window", **self.outputs[view]}
        window = names[WINDOW_COLUMN]
        unnamed = self.calls.get(view, {})
        for column in list(select.find_all(exp.Column)):
            if column.table == WINDOW_COLUMN:
                column.set("table", exp.to_identifier(window))
            elif not column.table and column.name in names:
                column.set("this", exp.to_identifier(names[column.name]))
            elif not column.table and column.name in unnamed:  # spread(agg0): no name of its own
                column.replace(exp.var(unnamed[column.name]))


def _window_text(names: QueryNames, operator: WindowAggregate) -> str:
    window = names.outputs[operator.output_view].get(WINDOW_COLUMN)
    aggregates = ", ".join(names.aggregate(operator, a) for a in operator.aggregates)
    return (f"{window_name(operator.window)}{f' AS {window}' if window else ''} by "
            f"{names.key_names(operator)}: {aggregates}; state in statestore by key group")


def _updating_text(names: QueryNames, operator: UpdatingAggregate) -> str:
    aggregates = ", ".join(names.aggregate(operator, a) for a in operator.aggregates)
    what = f"updating aggregate by {names.key_names(operator)}: {aggregates}" if aggregates \
        else f"updating DISTINCT {names.key_names(operator)}"
    return (f"{what}; state in statestore by key group, changes flushed every "
            "pipeline.update-aggregate-flush-interval")


def _join_text(names: QueryNames, operator: UpdatingJoin) -> str:
    return (f"updating {operator.join_type.upper()} JOIN on "
            f"{display_sql(operator.condition_sql)}; rows in statestore by key group, "
            f"kept {duration(operator.ttl_us)} after their key was last seen")


def _lookup_text(names: QueryNames, operator: LookupJoin) -> str:
    kind = "LEFT" if operator.keep_unmatched else "INNER"
    return (f"{kind} lookup join with {operator.table.name} ({operator.table.connector}) "
            f"by {', '.join(operator.table.primary_key)}; fetched per batch on executors")


#: What each operator type says after its name (each function takes that type).
_DESCRIPTIONS: dict[type[Operator], Callable[[QueryNames, Any], str]] = {
    WindowAggregate: _window_text,
    UpdatingAggregate: _updating_text,
    UpdatingJoin: _join_text,
    LookupJoin: _lookup_text,
}


def display_sql(text: str) -> str:
    """Spark SQL without the backticks a plain name does not need."""
    return _render(_parse(text))


def _parse(text: str) -> exp.Expr:
    return sqlglot.parse_one(text, dialect="spark")


def _render(tree: exp.Expr) -> str:
    for select in tree.find_all(exp.Select):
        _drop_hidden(select)
    for subquery in tree.find_all(exp.Subquery):
        if subquery.alias.startswith(_INTERNAL):
            subquery.set("alias", None)
    for identifier in tree.find_all(exp.Identifier):
        identifier.set("quoted", not _PLAIN_NAME.fullmatch(identifier.name))
    return tree.sql(dialect="spark")


def _drop_hidden(select: exp.Select) -> None:
    """Leave out the runtime's pass-through columns (all of them: ``*`` stays)."""
    shown = [item for item in select.expressions if item.alias_or_name not in HIDDEN_COLUMNS]
    select.set("expressions", shown or [exp.Star()])


def _read_view(select: exp.Select) -> str | None:
    """The table a SELECT reads directly in its FROM, if that is a table."""
    from_ = select.args.get("from_")
    relation = from_.this if from_ is not None else None
    return relation.name if isinstance(relation, exp.Table) else None


def _aliases(tree: exp.Expr) -> dict[str, exp.Expr]:
    """The aliased items of the outermost SELECT: alias -> expression."""
    select = tree if isinstance(tree, exp.Select) else tree.find(exp.Select)
    if select is None:
        return {}
    return {item.alias: item.this for item in select.expressions if isinstance(item, exp.Alias)}


def _reader_aliases(trees: list[exp.Expr], view: str) -> dict[str, str]:
    """``k0 AS auction`` in the SELECT reading ``view``: {k0: auction}."""
    names: dict[str, str] = {}
    for select in _selects(trees):
        if _read_view(select) != view:
            continue
        for item in select.expressions:
            if isinstance(item, exp.Alias) and isinstance(item.this, exp.Column) \
                    and not item.this.table:
                names.setdefault(item.this.name, item.alias)
    return names


def _selects(trees: list[exp.Expr]) -> Iterator[exp.Select]:
    for tree in trees:
        yield from tree.find_all(exp.Select)


def _rename_internal(tree: exp.Expr) -> None:
    """``EXPLODE(tags) AS __spate_unnest`` read as ``__spate_unnest AS tag``: call it ``tag``
    throughout, and ``tag AS tag`` becomes ``tag``."""
    renames = {item.this.name: item.alias for item in tree.find_all(exp.Alias)
               if isinstance(item.this, exp.Column) and item.this.name.startswith(_INTERNAL)
               and item.this.name not in HIDDEN_COLUMNS}
    for identifier in tree.find_all(exp.Identifier):
        if identifier.name in renames:
            identifier.set("this", renames[identifier.name])
    for item in list(tree.find_all(exp.Alias)):
        if isinstance(item.this, exp.Column) and item.this.name == item.alias:
            item.replace(item.this)


def _argument_text(argument: exp.Expr) -> str:
    """An aggregate's input as written: ``corr(y, x)``'s pair, planned as
    ``IF(…, ARRAY(CAST(y …), CAST(x …)))``, is ``y, x`` again; an aggregate UDF's rows,
    ``STRUCT(x AS a0, y AS a1)``, are ``STRUCT(x, y)``."""
    if isinstance(argument, exp.If) and isinstance(argument.args.get("false"), exp.Array):
        parts = argument.args["false"].expressions
        if len(parts) == 2 and all(isinstance(p, exp.Cast) for p in parts):
            return ", ".join(_render(p.this) for p in parts)
    _unname_struct_fields(argument)
    return _render(argument)


def _unname_struct_fields(tree: exp.Expr) -> None:
    """``STRUCT(x AS a0)`` -> ``STRUCT(x)``: the planner's field names, not the user's."""
    for field_ in list(tree.find_all(exp.PropertyEQ)):
        if isinstance(field_.parent, exp.Struct) and _ARGUMENT.fullmatch(field_.name):
            field_.replace(field_.expression)
