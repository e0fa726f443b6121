"""Checking a tenant's SQL with the engine's planner, for the API.

Planning parses and checks only; it never starts Spark or reads data. It runs
in the planning pool's processes (:mod:`spate.api.planning.pool`), never in
the API's, and :func:`plan_request` is what they run. Three things differ
from ``spate run``:

- ``{{ NAME }}`` references, which the planner fills from the environment,
  are refused: the API process's environment holds *its* secrets, not the
  tenant's, and a reference could echo one back in a diagnostic.
- Tables are held to the tenant's boundary: file paths inside its storage
  root, network destinations through the egress policy.
- The SQL may call the tenant's UDFs (:mod:`spate.api.planning.udfs`), read
  from their files' source text, never run.
- SQL nested deeper than the parser can recurse is a diagnostic, not a crash.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

from spate.api.http.schemas.pipelines import Diagnostic, PlanEdge, PlanGraph, PlanNode
from spate.engine.connectors.core.boundary import UNCONFINED, Boundary
from spate.engine.explain import QueryNames, explain_plan, window_name
from spate.engine.planner import PREVIEW_SINK, PipelinePlan, PlanningError, plan_pipeline
from spate.engine.planner.catalog import Table
from spate.engine.planner.external import TableDefinition, table_from_definition
from spate.engine.planner.functions import check_udf_names
from spate.engine.planner.plan import Operator, WindowAggregate
from spate.engine.udf import UdfDefinitionError, UdfFile, UdfRegistry, load_udf_files, load_udfs

log = logging.getLogger(__name__)

# The planner's own syntax for environment references in option values.
_ENV_REFERENCE = re.compile(r"\{\{\s*[A-Za-z_][A-Za-z0-9_]*\s*\}\}")


@dataclass(frozen=True)
class SqlCheck:
    """The plan when the SQL is valid, otherwise what is wrong with it."""

    plan: PipelinePlan | None
    diagnostics: list[Diagnostic]


@dataclass(frozen=True)
class PlanRequest:
    """What one request asks the planner, as plain values (it crosses processes)."""

    sql: str
    #: the tenant's connection tables, secrets as placeholders
    tables: tuple[TableDefinition, ...] = ()
    #: the tenant's :class:`~spate.engine.connectors.core.boundary.Boundary` as a dict
    boundary: dict[str, Any] = field(default_factory=dict)
    #: also draw the plan as a graph (what /validate answers with)
    graph: bool = False
    #: a pipeline that runs on its own: every query must write to a sink (no bare SELECT)
    needs_sinks: bool = False
    #: the files of the tenant's UDFs whose names the SQL mentions
    udfs: tuple[UdfFile, ...] = ()


@dataclass(frozen=True)
class PlannedSource:
    """A source table the planned SQL reads, as plain values: what the API's plan limits
    look at (a generator's rate, :mod:`spate.api.quotas`)."""

    name: str
    connector: str
    #: the table's WITH options (connection tables' secrets as placeholders)
    options: dict[str, str]
    bounded: bool

    @classmethod
    def of(cls, table: Table) -> PlannedSource:
        return cls(name=table.name, connector=table.config.connector,
                   options=dict(table.config.options), bounded=table.bounded)


@dataclass(frozen=True)
class PlanAnswer:
    """The planner's answer, as plain values: diagnostics, the graph if asked, and the
    source tables of valid SQL."""

    diagnostics: list[dict[str, Any]]
    graph: dict[str, Any] | None = None
    sources: tuple[PlannedSource, ...] = ()

    @property
    def valid(self) -> bool:
        return not self.diagnostics


def plan_request(request: PlanRequest) -> PlanAnswer:
    """Plan one request (in a planning process): its diagnostics, and its graph."""
    boundary = Boundary.from_dict(request.boundary)
    checked = check_sql(request.sql, tenant_tables(request, boundary), boundary,
                        previews=not request.needs_sinks, udfs=tenant_udfs(request))
    return plan_answer(request, checked)


def tenant_tables(request: PlanRequest, boundary: Boundary) -> dict[str, Table]:
    """The tenant's connection tables a request's SQL may name, by lower-case name."""
    tables: dict[str, Table] = {}
    for definition in request.tables:
        try:
            tables[definition.name.lower()] = table_from_definition(definition, boundary)
        except PlanningError as error:  # stored before the engine changed: left out
            log.warning("connection table no longer validates: %s", error.message,
                        extra={"table": definition.name})
    return tables


def tenant_udfs(request: PlanRequest) -> UdfRegistry | None:
    """The tenant's UDFs a request's SQL may call (None: none)."""
    usable = []
    for file in request.udfs:
        try:
            check_udf_names(load_udfs(file.source, file.filename))
        except UdfDefinitionError as error:  # stored before the engine changed: left out
            log.warning("UDF file no longer validates: %s", error, extra={"udf": file.filename})
            continue
        usable.append(file)
    return load_udf_files(usable) if usable else None


def plan_answer(request: PlanRequest, checked: SqlCheck) -> PlanAnswer:
    """The answer to ``request`` once its SQL is checked: the graph if it asked."""
    graph = None
    if checked.plan is not None and request.graph:
        graph = plan_graph(checked.plan).model_dump()
    sources = () if checked.plan is None else tuple(
        PlannedSource.of(table) for table in checked.plan.sources)
    return PlanAnswer([d.model_dump() for d in checked.diagnostics], graph, sources)


def check_sql(sql: str, tables: Mapping[str, Table] | None = None,
              boundary: Boundary = UNCONFINED, previews: bool = True,
              udfs: UdfRegistry | None = None) -> SqlCheck:
    """Plan ``sql``; problems come back as diagnostics, never as exceptions.

    ``tables`` are the tenant's connection tables, which the SQL may use by
    name; their secrets are placeholders. ``boundary`` is the tenant's;
    ``udfs`` the tenant's UDFs the SQL may call.
    """
    reference = _ENV_REFERENCE.search(sql)
    if reference is not None:
        line, column = _line_col(sql, reference.start())
        return SqlCheck(None, [Diagnostic(
            message="environment references ({{ NAME }}) cannot be used in pipelines "
                    "submitted to the API; write the value into the SQL",
            line=line, column=column)])
    try:
        return SqlCheck(plan_pipeline(sql, tables=tables, boundary=boundary,
                                      previews=previews, check_inputs=True,
                                      connect=False, udfs=udfs), [])
    except PlanningError as error:
        return SqlCheck(None, [Diagnostic(message=error.message, line=error.line,
                                          column=error.column)])
    except RecursionError:
        return SqlCheck(None, [Diagnostic(
            message="the SQL is nested too deeply to plan; simplify the expression",
            line=1, column=1)])


def plan_graph(plan: PipelinePlan) -> PlanGraph:
    """The plan as nodes and edges, marking what runs as native Spark and what in Spate."""
    nodes = [PlanNode(
        id=f"source:{table.name}", kind="source", label=table.name, runs_on="spark",
        detail={"connector": table.config.connector, "bounded": table.bounded,
                "event_time": table.event_time_sql, "watermark": table.watermark_sql},
    ) for table in plan.sources]
    edges: list[PlanEdge] = []
    sinks: set[str] = set()
    for query in plan.queries:
        chain: list[PlanNode] = []
        names = QueryNames.of(query)
        for operator in query.operators:
            chain.extend(_operator_nodes(query.index, operator, names))
        chain.append(PlanNode(
            id=f"q{query.index}:project", kind="projection", label=f"query {query.index}",
            runs_on="spark",
            detail={"sql": query.output_sql, "columns": list(query.output_columns)},
        ))
        nodes.extend(chain)
        edges.extend(PlanEdge(source=f"source:{name}", target=chain[0].id)
                     for name in query.sources)
        edges.extend(PlanEdge(source=a.id, target=b.id) for a, b in pairwise(chain))
        sink_id = f"sink:{query.sink}"
        edges.append(PlanEdge(source=chain[-1].id, target=sink_id))
        if query.sink not in sinks:
            sinks.add(query.sink)
            table = plan.tables.get(query.sink)
            connector = table.config.connector if table is not None else PREVIEW_SINK
            nodes.append(PlanNode(id=sink_id, kind="sink", label=query.sink, runs_on="spate",
                                  detail={"connector": connector}))
    return PlanGraph(bounded=plan.bounded, nodes=nodes, edges=edges, explain=explain_plan(plan))


def _operator_nodes(index: int, operator: Operator, names: QueryNames) -> list[PlanNode]:
    """The graph nodes of one Spate operator of query ``index``."""
    if not isinstance(operator, WindowAggregate):
        return [PlanNode(id=f"q{index}:{operator.operator_id}", kind="operator",
                         label=names.describe(operator), runs_on="spate", detail={})]
    return [
        PlanNode(
            id=f"q{index}:pre_aggregate", kind="pre_aggregate",
            label=f"pre-aggregate by {names.key_names(operator)}",
            runs_on="spark",
            detail={"sql": operator.input_sql, "keys": list(operator.key_columns)},
        ),
        PlanNode(
            id=f"q{index}:{operator.operator_id}", kind="window_aggregate",
            label=window_name(operator.window), runs_on="spate",
            detail={"window": operator.window.kind,
                    "width_us": operator.window.width_us,
                    "slide_us": operator.window.slide_us,
                    "gap_us": operator.window.gap_us,
                    "aggregates": [f"{a.function}({a.argument or '*'})"
                                   for a in operator.aggregates]},
        ),
    ]


def _line_col(text: str, offset: int) -> tuple[int, int]:
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1
