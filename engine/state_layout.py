"""The state a pipeline's stateful operators keep, and whether other SQL can resume from it.

Each stateful operator stores its state under its id (``q<query>_<kind>[n]``,
stable for the same SQL) in a layout fixed by what it is:

- a window aggregate by its GROUP BY keys, its window and its aggregates;
- an updating aggregate by its keys, its aggregates and whether its input is
  updating (min and max then keep multisets);
- an updating join by its type, its condition and the columns it keeps of
  each side;

and, for all of them, by the types of the source columns those read. Nothing
else is state: the output SELECT list (an added column computed from the keys,
aggregates or window), WHERE and HAVING, sinks, TTLs and source options can all
change while the state is kept. A lookup join keeps none (only a cache).

:func:`state_layout` gives a plan's layout as plain values, which a job stores
with every epoch it commits. :func:`compare_layouts` is the one rule saying
whether new SQL can resume from state written by old SQL: the API answers
``plan-update`` with it, and a job applies it to the stored layout before it
reads any state (:func:`resumed_layout`), so the two never disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp

from spate.engine.explain import QueryNames, display_sql, window_name
from spate.engine.planner.plan import (
    Operator,
    PipelinePlan,
    QueryPlan,
    UpdatingAggregate,
    UpdatingJoin,
    WindowAggregate,
    WindowSpec,
)
from spate.engine.runtime.errors import PipelineFailedError

#: Epoch metadata: the layout of the state the epoch was written in.
LAYOUT_KEY = "state_layout"
#: How this Spate writes a layout; a stored layout of another version is not judged.
LAYOUT_VERSION = 1
#: An operator's state, as plain values (msgpack and JSON keep them as they are).
OperatorLayout = dict[str, Any]
#: Each stateful operator's layout, by operator id.
Layout = dict[str, OperatorLayout]

KEPT, CHANGED, REMOVED, NEW = "kept", "changed", "removed", "new"
#: The operators that keep state in the store (a lookup join keeps only a cache).
_STATEFUL = (WindowAggregate, UpdatingAggregate, UpdatingJoin)
#: What the layout fields are called in a reason, in the order reasons are given.
_FIELDS = (
    ("keys", "its GROUP BY keys"),
    ("window", "its window"),
    ("aggregates", "its aggregates"),
    ("updating_input", "whether its input rows are updating"),
    ("join_type", "its join type"),
    ("condition", "its join condition"),
    ("left_columns", "the columns it keeps of its left side"),
    ("right_columns", "the columns it keeps of its right side"),
)
_KIND_NAMES = {"window": "a window aggregate", "aggregate": "an updating aggregate",
               "join": "an updating join"}


@dataclass(frozen=True)
class OperatorState:
    """What becomes of one operator's state: ``kept`` (the new SQL reads it as it is),
    ``changed`` (the new SQL has an operator of that id that cannot read it),
    ``removed`` (the new SQL has no such operator) or ``new`` (none to reuse yet)."""

    operator: str
    kind: str
    #: the operator in the SQL's terms (``TUMBLE 5 s by auction: count(*)``)
    label: str
    status: str
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class StateVerdict:
    """Whether new SQL can resume from old state, operator by operator."""

    operators: tuple[OperatorState, ...]

    @property
    def compatible(self) -> bool:
        """No operator of the new SQL would read state it cannot read."""
        return not any(o.status == CHANGED for o in self.operators)

    @property
    def dropped(self) -> tuple[OperatorState, ...]:
        """The operators whose state the new SQL does not carry on."""
        return tuple(o for o in self.operators if o.status in (CHANGED, REMOVED))

    def summary(self) -> str:
        """One line per changed operator, for an error message."""
        return "; ".join(f"{o.operator} ({o.label}): {', '.join(o.reasons)}"
                         for o in self.operators if o.status == CHANGED)


def state_layout(plan: PipelinePlan) -> Layout:
    """The layout of each stateful operator of ``plan``, by operator id."""
    layout: Layout = {}
    for query in plan.queries:
        if not any(isinstance(o, _STATEFUL) for o in query.operators):
            continue  # naming a query's columns parses its SQL: only where state is kept
        names = QueryNames.of(query)
        for operator in query.operators:
            described = _describe(plan, query, names, operator)
            if described is not None:
                layout[operator.operator_id] = described
    return layout


def stored_layout(plan: PipelinePlan) -> dict[str, Any]:
    """What a job stores with each epoch: the layout and the version it is written in."""
    return {"version": LAYOUT_VERSION, "operators": state_layout(plan)}


def layout_of(stored: Any) -> Layout | None:
    """The layout stored with an epoch; None when there is none this Spate can judge
    (the state of an older Spate, or of another layout version)."""
    if not isinstance(stored, Mapping) or stored.get("version") != LAYOUT_VERSION:
        return None
    operators = stored.get("operators")
    return dict(operators) if isinstance(operators, Mapping) else None


def resumed_layout(plan: PipelinePlan, stored: Any) -> dict[str, Any]:
    """The layout a run of ``plan`` stores with its epochs, once it is checked that
    ``plan`` can read the state stored with the last epoch (its layout ``stored``).

    Operators the plan no longer has stay in it, so that one coming back under the
    same id is judged against the state it would find. State of an older Spate,
    with no layout, is not judged.
    """
    new = state_layout(plan)
    old = layout_of(stored) or {}
    verdict = compare_layouts(old, new)
    if not verdict.compatible:
        raise PipelineFailedError(
            f"this SQL cannot resume from the pipeline's state, which other SQL wrote: "
            f"{verdict.summary()}; restart the pipeline without state (its state is "
            "dropped), or run SQL whose stateful operators are unchanged")
    return {"version": LAYOUT_VERSION, "operators": {**old, **new}}


def compare_layouts(old: Mapping[str, OperatorLayout],
                    new: Mapping[str, OperatorLayout]) -> StateVerdict:
    """What becomes of the state written in ``old`` when ``new`` resumes from it."""
    states = [_compare(operator, layout, new.get(operator))
              for operator, layout in old.items()]
    states.extend(OperatorState(operator, layout["kind"], layout["label"], NEW)
                  for operator, layout in new.items() if operator not in old)
    return StateVerdict(tuple(states))


def _compare(operator: str, old: OperatorLayout,
             new: OperatorLayout | None) -> OperatorState:
    if new is None:
        return OperatorState(operator, old["kind"], old["label"], REMOVED,
                             ("the new SQL has no such operator; its state is not read",))
    if new["kind"] != old["kind"]:
        return OperatorState(operator, new["kind"], new["label"], CHANGED, (
            f"it was {_KIND_NAMES[old['kind']]} ({old['label']}) and is now "
            f"{_KIND_NAMES[new['kind']]}",))
    reasons = [f"{what} changed: {_show(field, old.get(field))} → "
               f"{_show(field, new.get(field))}"
               for field, what in _FIELDS if old.get(field) != new.get(field)]
    reasons.extend(_type_changes(old.get("input_types") or {}, new.get("input_types") or {}))
    return OperatorState(operator, new["kind"], new["label"], CHANGED if reasons else KEPT,
                         tuple(reasons))


def _type_changes(old: Mapping[str, str], new: Mapping[str, str]) -> list[str]:
    """A source column read before and after whose declared type changed (a column read
    by only one side shows as a changed key or aggregate)."""
    return [f"the type of source column {name} changed: {old[name]} → {new[name]}"
            for name in sorted(old.keys() & new.keys()) if old[name] != new[name]]


def _show(field: str, value: Any) -> str:
    if value is None:
        return "(none)"
    if field == "window":
        return window_name(WindowSpec(**value))
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, Mapping):
        return ", ".join(f"{k} {v}" for k, v in sorted(value.items())) or "(none)"
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or "(none)"
    return str(value)


def _describe(plan: PipelinePlan, query: QueryPlan, names: QueryNames,
              operator: Operator) -> OperatorLayout | None:
    """One operator's layout; None for an operator that keeps no state."""
    if isinstance(operator, WindowAggregate | UpdatingAggregate):
        return _aggregate_layout(plan, query, names, operator)
    if isinstance(operator, UpdatingJoin):
        return {
            "kind": "join", "label": f"{operator.join_type.upper()} JOIN on "
                                     f"{display_sql(operator.condition_sql)}",
            "join_type": operator.join_type, "condition": display_sql(operator.condition_sql),
            "left_columns": list(operator.left_columns),
            "right_columns": list(operator.right_columns),
            "input_types": _input_types(plan, query, [sqlglot.parse_one(
                text, dialect="spark") for text in (operator.left_sql, operator.right_sql)]),
        }
    return None


def _aggregate_layout(plan: PipelinePlan, query: QueryPlan, names: QueryNames,
                      operator: WindowAggregate | UpdatingAggregate) -> OperatorLayout:
    view = operator.output_view
    keys = [names.inputs[view].get(k, k) for k in operator.key_columns]
    aggregates = [names.calls[view][call.output] for call in operator.aggregates]
    state_columns = {*operator.key_columns, *(c.argument for c in operator.aggregates)}
    select = sqlglot.parse_one(operator.input_sql, dialect="spark")
    inputs = [item.this for item in select.expressions
              if isinstance(item, exp.Alias) and item.alias in state_columns]
    layout: OperatorLayout = {"keys": keys, "aggregates": aggregates,
                              "input_types": _input_types(plan, query, inputs, select)}
    named = ", ".join(names.aggregate(operator, call) for call in operator.aggregates)
    what = f"by {names.key_names(operator)}: {named or 'DISTINCT'}"
    if isinstance(operator, WindowAggregate):
        window = operator.window
        return {"kind": "window", "label": f"{window_name(window)} {what}",
                "window": {"kind": window.kind, "width_us": window.width_us,
                           "slide_us": window.slide_us, "gap_us": window.gap_us},
                **layout}
    return {"kind": "aggregate", "label": f"updating aggregate {what}",
            "updating_input": operator.updating_input, **layout}


def _input_types(plan: PipelinePlan, query: QueryPlan, expressions: list[exp.Expr],
                 scope: exp.Expr | None = None) -> dict[str, str]:
    """The declared types of the query's source columns that ``expressions`` read.

    ``a.counter`` reads ``counter`` when ``a`` names a table of ``scope`` (or of the
    expressions) or a source; otherwise it reads the struct column ``a``.
    """
    trees = [*expressions, *([scope] if scope is not None else [])]
    tables = {name.lower() for name in query.sources} | {
        name.lower() for tree in trees for table in tree.find_all(exp.Table)
        for name in (table.name, table.alias_or_name)}
    named: set[str] = set()
    for expression in expressions:
        for reference in expression.find_all(exp.Column):
            parts = [part.name.lower() for part in reference.parts]
            named.add(parts[1] if len(parts) > 1 and parts[0] in tables else parts[0])
    types: dict[str, str] = {}
    for source in query.sources:
        table = plan.tables.get(source)
        for declared in table.columns if table is not None else ():
            if declared.name.lower() in named:
                types.setdefault(declared.name.lower(), declared.spark_type.simpleString())
    return types
