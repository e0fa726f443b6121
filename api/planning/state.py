"""Whether new SQL for a pipeline can keep its state: planned like any SQL, in the
planning pool's processes (:mod:`spate.api.planning.pool`).

The state was written by the SQL of the version the pipeline's latest job ran.
Both SQL texts are planned over the tenant's tables and their stateful
operators compared by :func:`spate.engine.state_layout.compare_layouts` — the
rule a job applies to the stored layout when it starts — so what the API
promises is what the job does. A pipeline that never ran has no state: any
valid SQL is compatible.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from spate.api.planning.sql import (
    PlanAnswer,
    PlanRequest,
    check_sql,
    plan_answer,
    tenant_tables,
    tenant_udfs,
)
from spate.engine.connectors.core.boundary import Boundary
from spate.engine.state_layout import Layout, compare_layouts, state_layout


@dataclass(frozen=True)
class UpdatePlanRequest:
    """New SQL (planned as ``new`` asks) and the SQL that wrote the pipeline's state."""

    new: PlanRequest
    #: the SQL of the version that wrote the state; None: the pipeline has no state
    state_sql: str | None
    #: that version's number, for messages
    state_version: int | None = None


@dataclass(frozen=True)
class UpdatePlanAnswer:
    """The new SQL's plan answer and, when it is valid, the state verdict as plain
    values: ``compatible``, ``operators`` (each an :class:`~spate.engine.state_layout.
    OperatorState` as a dict) and a one-line ``message``."""

    answer: PlanAnswer
    state: dict[str, Any] | None


def plan_update(request: UpdatePlanRequest) -> UpdatePlanAnswer:
    """Plan the new SQL and judge the state (in a planning process)."""
    boundary = Boundary.from_dict(request.new.boundary)
    tables = tenant_tables(request.new, boundary)
    udfs = tenant_udfs(request.new)
    checked = check_sql(request.new.sql, tables, boundary,
                        previews=not request.new.needs_sinks, udfs=udfs)
    answer = plan_answer(request.new, checked)
    if checked.plan is None:
        return UpdatePlanAnswer(answer, None)
    new_layout = state_layout(checked.plan)
    if request.state_sql is None:
        return UpdatePlanAnswer(answer, _verdict({}, new_layout, None))
    old = check_sql(request.state_sql, tables, boundary, previews=False, udfs=udfs)
    if old.plan is None:
        problem = old.diagnostics[0]
        return UpdatePlanAnswer(answer, {
            "compatible": False, "operators": [],
            "message": f"the SQL of version {request.state_version}, which wrote the state, "
                       f"no longer plans (line {problem.line}, column {problem.column}: "
                       f"{problem.message}), so its state cannot be judged; restart without "
                       "state"})
    return UpdatePlanAnswer(answer, _verdict(state_layout(old.plan), new_layout,
                                             request.state_version))


def _verdict(old: Layout, new: Layout, version: int | None) -> dict[str, Any]:
    verdict = compare_layouts(old, new)
    source = "the state" if version is None else f"the state of version {version}"
    if version is None:
        message = "the pipeline has not run yet: it has no state to keep"
    elif verdict.compatible:
        removed = [o.operator for o in verdict.dropped]
        message = f"the new SQL can resume from {source}" + (
            f"; the state of {', '.join(removed)} is no longer read" if removed else "")
    else:
        message = (f"the new SQL cannot resume from {source}: {verdict.summary()}; "
                   "restart without state to run it")
    return {"compatible": verdict.compatible,
            "operators": [asdict(o) for o in verdict.operators], "message": message}
