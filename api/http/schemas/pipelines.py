"""Bodies of the pipelines resource: settings, lifecycle controls (stop, restart,
rescale, move), versions, SQL validation and preview."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from spate.api.http.schemas.common import Name, StrictModel
from spate.api.http.schemas.jobs import JobSummary
from spate.api.models import DESCRIPTION_LENGTH, NAME_LENGTH, Job, Pipeline

MAX_SQL_CHARS = 200_000
MAX_PARALLELISM = 128  # the state store's key groups per pipeline
#: Names taken by sub-resources of /pipelines.
RESERVED_NAMES = frozenset({"validate", "preview"})


def not_reserved(name: str) -> str:
    if name in RESERVED_NAMES:
        raise ValueError(f"'{name}' is reserved; choose another pipeline name")
    return name


PipelineName = Annotated[Name, AfterValidator(not_reserved)]
Sql = Annotated[str, Field(min_length=1, max_length=MAX_SQL_CHARS,
                           description="the pipeline script (Spate's SQL dialect)")]
Description = Annotated[str, Field(max_length=DESCRIPTION_LENGTH)]
Parallelism = Annotated[int, Field(ge=1, le=MAX_PARALLELISM,
                                   description="tasks sharing the pipeline's key groups")]
CheckpointIntervalMs = Annotated[int, Field(
    ge=100, le=86_400_000,
    description="time between epochs (checkpoints) in ms; null: each epoch starts when "
                "the previous one commits",
)]
#: ``none`` runs the pipeline (again); the others stop it that way: ``checkpoint``
#: after the epoch in progress commits, ``graceful`` the same but falling back to
#: ``immediate`` if that takes too long, ``immediate`` without waiting for the
#: epoch in progress (it is replayed on the next start), ``force`` by killing it.
StopMode = Literal["none", "checkpoint", "graceful", "immediate", "force"]
MAX_PREVIEW_ROWS = 10_000
MAX_PREVIEW_PARALLELISM = 8
MAX_PREVIEW_TIMEOUT_S = 3600


class Autoscale(StrictModel):
    """The parallelism range the autoscaler keeps a running pipeline in: it rescales from
    the run's backlog and busy ratio (docs/running.md, Autoscaling)."""

    min: Parallelism
    max: Parallelism

    @model_validator(mode="after")
    def _ordered(self) -> Autoscale:
        if self.min > self.max:
            raise ValueError(f"autoscale min ({self.min}) is above its max ({self.max})")
        return self


class AutoscalePublic(Autoscale):
    last_decision: str | None = Field(
        description="the autoscaler's latest rescale, with its reason (null: none since "
                    "the parallelism was last set through the API)")
    last_decision_at: datetime | None


class PipelineSpec(StrictModel):
    """What defines a pipeline besides its name (the body of PUT /pipelines/{name})."""

    sql: Sql
    description: Description = ""
    parallelism: Parallelism = 1
    checkpoint_interval_ms: CheckpointIntervalMs | None = None
    autoscale: Autoscale | None = Field(
        None, description="a parallelism range the autoscaler keeps the pipeline in; null: "
                          "its parallelism is what you set")
    stopped: bool = Field(
        False, description="create the pipeline without starting it (it starts with PATCH "
                           "stop=none); only read when the pipeline is created")


class PipelineCreate(PipelineSpec):
    name: PipelineName


class PipelineUpdate(StrictModel):
    """Settings to change; fields left out stay as they are. SQL changes add a version."""

    description: Description | None = None
    parallelism: Parallelism | None = None
    checkpoint_interval_ms: CheckpointIntervalMs | None = Field(
        None, description="null clears it (epochs back to back); leave it out to keep it",
    )
    autoscale: Autoscale | None = Field(
        None, description="null turns autoscaling off; leave it out to keep it")
    stop: StopMode | None = Field(
        None, description="none: run the pipeline; checkpoint, graceful, immediate or force: "
                          "stop it that way")

    @model_validator(mode="after")
    def _only_interval_clears(self) -> PipelineUpdate:
        for field in ("description", "parallelism", "stop"):
            if field in self.model_fields_set and getattr(self, field) is None:
                raise ValueError(f"{field} cannot be null; leave it out to keep it")
        return self

    def changes(self) -> dict[str, Any]:
        """The settings the caller gave, with their new values (``stop`` is not a setting)."""
        return {field: getattr(self, field) for field in self.model_fields_set
                if field != "stop"}


class PipelineRestart(StrictModel):
    """Stop the pipeline's job and start a new one (a stopped pipeline just starts)."""

    with_state: bool = Field(
        True, description="keep the pipeline's state and source offsets; false starts over "
                          "from empty state")


class PipelineRescale(StrictModel):
    """Run the pipeline at another parallelism; its state moves by key group."""

    parallelism: Parallelism


class PipelineMove(StrictModel):
    """Run the pipeline on another Spark cluster; its state stays in the state store."""

    cluster: str = Field(min_length=1, max_length=NAME_LENGTH,
                         description="the name of one of the deployment's Spark clusters")


class PipelinePublic(BaseModel):
    id: str
    name: str
    description: str
    parallelism: int
    checkpoint_interval_ms: int | None
    version: int = Field(description="the current SQL version")
    sql: str = Field(description="the current version's SQL")
    desired_state: Literal["running", "stopped"] = Field(
        description="what the scheduler is making true; the job shows how far it got")
    stop_mode: Literal["checkpoint", "graceful", "immediate", "force"] | None = Field(
        description="how the latest stop was asked for (null while the pipeline should run)")
    restart_generation: int = Field(description="how many restarts were asked for")
    cluster: str | None = Field(
        description="the Spark cluster the pipeline was last moved to; null: never moved "
                    "(it runs on the deployment's default cluster)")
    autoscale: AutoscalePublic | None = Field(description="null: autoscaling is off")
    job: JobSummary | None = Field(description="the current (latest) run; null before the "
                                               "scheduler first starts the pipeline")
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, pipeline: Pipeline, job: Job | None) -> PipelinePublic:
        """The pipeline with its current version's SQL and its latest run ``job``."""
        return cls(id=pipeline.id, name=pipeline.name, description=pipeline.description,
                   parallelism=pipeline.parallelism,
                   checkpoint_interval_ms=pipeline.checkpoint_interval_ms,
                   version=pipeline.current_version, sql=pipeline.current.sql,
                   desired_state=pipeline.desired_state,  # type: ignore[arg-type]
                   stop_mode=pipeline.stop_mode,  # type: ignore[arg-type]
                   restart_generation=pipeline.restart_generation, cluster=pipeline.cluster,
                   autoscale=_autoscale(pipeline),
                   job=JobSummary.of(job) if job is not None else None,
                   created_at=pipeline.created_at, updated_at=pipeline.updated_at)


def _autoscale(pipeline: Pipeline) -> AutoscalePublic | None:
    if pipeline.autoscale_min is None or pipeline.autoscale_max is None:
        return None
    return AutoscalePublic(min=pipeline.autoscale_min, max=pipeline.autoscale_max,
                           last_decision=pipeline.autoscale_reason,
                           last_decision_at=pipeline.autoscaled_at
                           if pipeline.autoscale_reason else None)


class PipelineVersionCreate(StrictModel):
    sql: Sql


class PipelineVersionPublic(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    version: int
    sql: str
    sql_sha256: str
    created_at: datetime
    created_by_key_id: str | None


class PipelineValidate(StrictModel):
    sql: Sql
    pipeline: Name | None = Field(
        None, description="a pipeline the SQL would update: the answer then says whether "
                          "it can keep that pipeline's state (``state``)")


class PipelinePlanUpdate(StrictModel):
    """New SQL for a pipeline, as a new version would carry it."""

    sql: Sql


class OperatorStatePublic(BaseModel):
    """What becomes of one stateful operator's state under the new SQL."""

    operator: str = Field(description="the operator's id (``q<query>_<kind>[n]``), under "
                                      "which its state is stored")
    kind: Literal["window", "aggregate", "join"]
    label: str = Field(description="the operator in the SQL's terms")
    status: Literal["kept", "changed", "removed", "new"] = Field(
        description="kept: the new SQL reads it as it is; changed: the new SQL's operator "
                    "of this id cannot read it; removed: the new SQL has no such operator; "
                    "new: an operator with no state yet")
    reasons: list[str] = Field(description="what changed, for changed and removed ones")


class StatePlan(BaseModel):
    """Whether new SQL can resume from a pipeline's state (``with_state``)."""

    verdict: Literal["compatible", "incompatible"]
    state_version: int | None = Field(
        description="the version whose job wrote the state (the latest run's); null: the "
                    "pipeline has not run, so it has no state")
    operators: list[OperatorStatePublic]
    dropped: list[OperatorStatePublic] = Field(
        description="the operators whose state the new SQL does not carry on (changed or "
                    "removed)")
    message: str

    @classmethod
    def of(cls, state: dict[str, Any], state_version: int | None) -> StatePlan:
        """The plain verdict a planning worker gives, as the API answers it."""
        operators = [OperatorStatePublic(**o) for o in state["operators"]]
        return cls(verdict="compatible" if state["compatible"] else "incompatible",
                   state_version=state_version, operators=operators,
                   dropped=[o for o in operators if o.status in ("changed", "removed")],
                   message=state["message"])


class Diagnostic(BaseModel):
    """A problem in the SQL, located at a 1-based line and column."""

    severity: Literal["error"] = "error"
    message: str
    line: int
    column: int


class PlanNode(BaseModel):
    id: str
    kind: Literal["source", "pre_aggregate", "window_aggregate", "operator", "projection",
                  "sink"]
    label: str
    runs_on: Literal["spark", "spate"] = Field(
        description="spark: native Spark SQL; spate: Spate's operators and sinks",
    )
    detail: dict[str, Any] = Field(default_factory=dict)


class PlanEdge(BaseModel):
    source: str
    target: str


class PlanGraph(BaseModel):
    """The logical graph: sources → transforms and window operators → sinks."""

    bounded: bool = Field(description="every source ends, so the pipeline finishes")
    nodes: list[PlanNode]
    edges: list[PlanEdge]
    explain: str = Field(description="the same plan as text (spate run --explain)")


class PipelineValidation(BaseModel):
    valid: bool
    diagnostics: list[Diagnostic]
    plan: PlanGraph | None = None
    state: StatePlan | None = Field(
        None, description="with ``pipeline``: whether valid SQL can keep its state")


class PreviewCreate(StrictModel):
    """SQL to run as a throwaway preview job whose first rows are streamed back."""

    sql: Sql
    limit: Annotated[int, Field(ge=1, le=MAX_PREVIEW_ROWS,
                                description="the stream ends after this many rows")] = 100
    parallelism: Annotated[int, Field(ge=1, le=MAX_PREVIEW_PARALLELISM)] = 1
    timeout_s: Annotated[int, Field(ge=1, le=MAX_PREVIEW_TIMEOUT_S,
                                    description="the stream ends (and the job stops) after "
                                                "this many seconds")] = 300
