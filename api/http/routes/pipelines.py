"""/pipelines: create from SQL, list, get, change settings, delete; lifecycle controls
(stop, restart, rescale, move); SQL versions; validation; whether new SQL can keep a
pipeline's state (plan-update).

SQL is planned before anything is stored, so a stored version always plans.
Versions are immutable: a SQL change adds a version and makes it current. A restart
that keeps state is refused when the current version cannot read the state the latest
job wrote (:mod:`spate.api.planning.state`).

Whatever a request would add — a pipeline, a running one, compute units, a
parallelism, a generator's rate — is admitted by the tenant's plan in the
repository (:mod:`spate.api.quotas`): a 403 ``quota_exceeded`` beyond it.

Lifecycle controls only record the desired state (``desired_state``,
``stop_mode``, ``restart_generation``, ``parallelism``, ``cluster``) and poke the scheduler,
which makes it true and records jobs; a pipeline's ``job`` shows how far it got.
A new pipeline is started unless it is created with ``"stopped": true``.
Deleting a pipeline whose latest job is still active is a 409 (stop it first);
``?force=true`` stops it with ``force`` first and deletes it once its job has
ended, waiting up to :data:`FORCE_DELETE_WAIT_S`.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response, status
from pydantic import AfterValidator, AwareDatetime

from spate.api.http.deps import (
    DeveloperCaller,
    Notifier,
    PipelinesRead,
    PipelinesWrite,
    Planner,
    TenantPlanner,
    ViewerCaller,
    app_state,
)
from spate.api.http.errors import ERROR_RESPONSES, BadRequestError, StateIncompatibleError
from spate.api.http.pagination import DEFAULT_LIMIT, CursorQuery, LimitQuery, Page, decode_cursor
from spate.api.http.schemas.common import NAME_PATTERN
from spate.api.http.schemas.pipelines import (
    Diagnostic,
    PipelineCreate,
    PipelineMove,
    PipelinePlanUpdate,
    PipelinePublic,
    PipelineRescale,
    PipelineRestart,
    PipelineSpec,
    PipelineUpdate,
    PipelineValidate,
    PipelineValidation,
    PipelineVersionCreate,
    PipelineVersionPublic,
    PlanGraph,
    StatePlan,
    not_reserved,
)
from spate.api.models import Pipeline
from spate.api.planning.pool import require_valid
from spate.api.planning.sql import PlanAnswer
from spate.api.repositories.pipelines import (
    PipelineFilter,
    PipelineRepository,
    desired_state_changes,
)
from spate.api.security import Role
from spate.api.settings import known_clusters
from spate.scheduler.store import DESIRED_RUNNING, DESIRED_STOPPED

router = APIRouter(prefix="/pipelines", tags=["pipelines"], responses=ERROR_RESPONSES)
#: How long ``DELETE ?force=true`` waits for a running job to be killed.
FORCE_DELETE_WAIT_S = 30.0

NamePath = Annotated[str, Path(max_length=63, description="the pipeline's name")]
NewNamePath = Annotated[str, Path(pattern=NAME_PATTERN, max_length=63,
                                  description="the pipeline's name"),
                        AfterValidator(not_reserved)]


@router.post("/validate", response_model=PipelineValidation)
def validate_pipeline(body: PipelineValidate, caller: ViewerCaller, planner: Planner,
                      pipelines: PipelinesRead, notify: Notifier) -> PipelineValidation:
    """Plan SQL without storing it: diagnostics with line and column, or the plan graph.
    With ``pipeline`` (an unknown one is a 404), the SQL is planned as that pipeline's
    next version and valid SQL's answer says whether it can keep its state. A plan over
    its time or memory budget is a 422.

    A key that may run what it writes is about to preview or start it: its tenant's
    application starts now, so that the preview or the pipeline finds it running."""
    if caller.role.allows(Role.DEVELOPER):
        notify.tenant_active(caller.tenant_id)
    state = None
    if body.pipeline is None:
        answer = planner.check(body.sql, graph=True)
    else:
        answer, state = _plan_update(pipelines, planner, body.pipeline, body.sql, graph=True)
    return PipelineValidation(
        valid=answer.valid, diagnostics=[Diagnostic(**d) for d in answer.diagnostics],
        plan=PlanGraph(**answer.graph) if answer.graph is not None else None, state=state)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=PipelinePublic)
def create_pipeline(body: PipelineCreate, pipelines: PipelinesWrite, caller: DeveloperCaller,
                    notify: Notifier, planner: Planner) -> PipelinePublic:
    """Create a pipeline at version 1 and start it (unless ``stopped``). Invalid SQL is a
    400 with located diagnostics."""
    planned = planner.require_valid(body.sql, needs_sinks=True)
    pipeline = pipelines.create(body.name, body.sql, _settings(body), caller.key_id,
                                planned.sources)
    notify.pipeline_changed(pipeline.id)
    return _public(pipelines, pipeline)


@router.put("/{name}", response_model=PipelinePublic,
            responses={201: {"model": PipelinePublic, "description": "created"}})
def put_pipeline(name: NewNamePath, body: PipelineSpec, pipelines: PipelinesWrite,
                 caller: DeveloperCaller, response: Response, notify: Notifier,
                 planner: Planner) -> PipelinePublic:
    """Create the pipeline ``name`` if absent (201) and start it (unless ``stopped``), or
    return it unchanged if it exists with the same SQL and settings (200); other SQL or
    settings are a 409. ``stopped`` is not compared: it only applies to a new pipeline."""
    planned = planner.require_valid(body.sql, needs_sinks=True)
    pipeline, created = pipelines.create_or_get(name, body.sql, _settings(body), caller.key_id,
                                                planned.sources)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    if created:
        notify.pipeline_changed(pipeline.id)
    return _public(pipelines, pipeline)


@router.get("", response_model=Page[PipelinePublic])
def list_pipelines(
    pipelines: PipelinesRead,
    limit: LimitQuery = DEFAULT_LIMIT,
    cursor: CursorQuery = None,
    name_prefix: Annotated[str | None, Query(max_length=63,
                                             description="names starting with this")] = None,
    created_after: Annotated[AwareDatetime | None, Query()] = None,
    created_before: Annotated[AwareDatetime | None, Query()] = None,
) -> Page[PipelinePublic]:
    """The tenant's pipelines, oldest first, optionally filtered."""
    where = PipelineFilter(name_prefix=name_prefix, created_after=created_after,
                           created_before=created_before)
    rows, next_cursor = pipelines.list_pipelines(where, decode_cursor(cursor), limit)
    jobs = pipelines.latest_runs(rows)
    return Page[PipelinePublic](items=[PipelinePublic.of(p, jobs.get(p.id)) for p in rows],
                                next_cursor=next_cursor)


@router.get("/{name}", response_model=PipelinePublic)
def get_pipeline(name: NamePath, pipelines: PipelinesRead) -> PipelinePublic:
    return _public(pipelines, pipelines.get(name))


@router.patch("/{name}", response_model=PipelinePublic)
def update_pipeline(name: NamePath, body: PipelineUpdate, pipelines: PipelinesWrite,
                    notify: Notifier) -> PipelinePublic:
    """Change settings, and run or stop the pipeline (``stop``); fields left out keep their
    values. A new parallelism on a running pipeline rescales it. SQL changes go to
    /versions."""
    changes = body.changes()
    if body.stop is not None:
        changes.update(desired_state_changes(body.stop))
    pipeline = pipelines.update(name, changes)
    if changes:
        notify.pipeline_changed(pipeline.id)
    return _public(pipelines, pipeline)


@router.post("/{name}/plan-update", response_model=StatePlan)
def plan_pipeline_update(name: NamePath, body: PipelinePlanUpdate, pipelines: PipelinesRead,
                         planner: Planner) -> StatePlan:
    """Whether ``sql``, as the pipeline's next version, could restart keeping its state:
    for each stateful operator of the version its latest job ran, whether the new SQL
    reads that state as it is, and what would be dropped and why. Nothing is stored;
    invalid SQL is a 400 with located diagnostics."""
    answer, state = _plan_update(pipelines, planner, name, body.sql)
    require_valid(answer)
    assert state is not None  # valid SQL is always judged
    return state


@router.post("/{name}/restart", response_model=PipelinePublic,
             status_code=status.HTTP_202_ACCEPTED)
def restart_pipeline(name: NamePath, pipelines: PipelinesWrite, notify: Notifier,
                     planner: Planner, body: PipelineRestart | None = None) -> PipelinePublic:
    """Replace the pipeline's job with a new one, keeping its state unless
    ``with_state`` is false; a stopped pipeline starts. The scheduler does it (202).
    Keeping state that the current version's SQL cannot read (see plan-update) is a 409
    ``state_incompatible`` naming the operators whose state it would drop, before any
    job is stopped."""
    with_state = body.with_state if body is not None else True
    if with_state:
        _require_state_kept(pipelines, planner, name)
    pipeline = pipelines.restart(name, with_state)
    notify.pipeline_changed(pipeline.id)
    return _public(pipelines, pipeline)


@router.post("/{name}/rescale", response_model=PipelinePublic,
             status_code=status.HTTP_202_ACCEPTED)
def rescale_pipeline(name: NamePath, body: PipelineRescale, pipelines: PipelinesWrite,
                     notify: Notifier) -> PipelinePublic:
    """Run the pipeline at ``parallelism`` tasks: a running job is replaced by one at the
    new parallelism (its state moves by key group); a stopped pipeline uses it when it
    next starts. The scheduler does it (202)."""
    pipeline = pipelines.update(name, {"parallelism": body.parallelism})
    notify.pipeline_changed(pipeline.id)
    return _public(pipelines, pipeline)


@router.post("/{name}/move", response_model=PipelinePublic,
             status_code=status.HTTP_202_ACCEPTED)
def move_pipeline(name: NamePath, body: PipelineMove, pipelines: PipelinesWrite,
                  notify: Notifier, request: Request) -> PipelinePublic:
    """Run the pipeline on the Spark cluster ``cluster`` (state stays in the state store):
    a running job stops after an epoch commits and a new one resumes on that cluster; a
    stopped pipeline, or one whose last job ended on another cluster, starts there. An
    unknown cluster is a 400 listing the known ones. The scheduler does it (202)."""
    pipelines.get(name)  # an unknown pipeline is a 404 before the cluster is judged
    clusters = list(known_clusters(app_state(request).settings))
    if body.cluster not in clusters:
        raise BadRequestError(f"unknown cluster '{body.cluster}'; known clusters: "
                              f"{', '.join(clusters)}", details=[{"known_clusters": clusters}])
    pipeline = pipelines.move(name, body.cluster)
    notify.pipeline_changed(pipeline.id)
    return _public(pipelines, pipeline)


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT)
def delete_pipeline(
    name: NamePath, pipelines: PipelinesWrite, notify: Notifier,
    force: Annotated[bool, Query(description="stop a running pipeline with force first "
                                             "(waits a few seconds for its job to end)")] = False,
) -> Response:
    """Delete a pipeline, its versions and its jobs' history. A pipeline whose job is still
    active is a 409 unless ``force``: stop it first (PATCH stop), or delete with force."""
    if force:
        pipeline = pipelines.update(name, desired_state_changes("force"))
        notify.pipeline_changed(pipeline.id)
        pipelines.wait_until_inactive(name, FORCE_DELETE_WAIT_S)
    pipelines.delete(name, forced=force)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{name}/versions", response_model=PipelineVersionPublic,
             status_code=status.HTTP_201_CREATED,
             responses={200: {"model": PipelineVersionPublic,
                              "description": "the SQL equals the current version's"}})
def create_pipeline_version(name: NamePath, body: PipelineVersionCreate,
                            pipelines: PipelinesWrite, caller: DeveloperCaller,
                            response: Response, notify: Notifier,
                            planner: Planner) -> PipelineVersionPublic:
    """Make new SQL current as the next version (201); the current SQL again is a 200.
    A running job keeps the SQL it started with until the pipeline is restarted."""
    planned = planner.require_valid(body.sql, needs_sinks=True)
    version, created = pipelines.add_version(name, body.sql, caller.key_id, planned.sources)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    if created:
        notify.pipeline_changed(version.pipeline_id)
    return PipelineVersionPublic.model_validate(version)


@router.get("/{name}/versions", response_model=Page[PipelineVersionPublic])
def list_pipeline_versions(name: NamePath, pipelines: PipelinesRead,
                           limit: LimitQuery = DEFAULT_LIMIT,
                           cursor: CursorQuery = None) -> Page[PipelineVersionPublic]:
    """A pipeline's versions, oldest first."""
    return Page[PipelineVersionPublic].of_rows(
        *pipelines.list_versions(name, decode_cursor(cursor), limit))


@router.get("/{name}/versions/{version}", response_model=PipelineVersionPublic)
def get_pipeline_version(name: NamePath, version: Annotated[int, Path(ge=1, le=2**31 - 1)],
                         pipelines: PipelinesRead) -> PipelineVersionPublic:
    return PipelineVersionPublic.model_validate(pipelines.get_version(name, version))


def _plan_update(pipelines: PipelineRepository, planner: TenantPlanner, name: str, sql: str,
                 graph: bool = False) -> tuple[PlanAnswer, StatePlan | None]:
    """Plan ``sql`` as the next version of pipeline ``name``, judging the state its
    latest job wrote: the plan's answer, and the verdict when the SQL is valid."""
    written_by = pipelines.state_version(name)
    planned = planner.plan_update(sql, written_by.sql if written_by else None,
                                  written_by.version if written_by else None, graph)
    state = None if planned.state is None else StatePlan.of(
        planned.state, written_by.version if written_by else None)
    return planned.answer, state


def _require_state_kept(pipelines: PipelineRepository, planner: TenantPlanner,
                        name: str) -> None:
    """Refuse (409) to restart ``name`` on its current version keeping state that version
    cannot read. The same SQL as the state's needs no plan; SQL that no longer plans is
    left to the restart, as before."""
    pipeline = pipelines.get(name)
    written_by = pipelines.state_version(name)
    if written_by is None or written_by.sql_sha256 == pipeline.current.sql_sha256:
        return
    _, state = _plan_update(pipelines, planner, name, pipeline.current.sql)
    if state is None or state.verdict == "compatible":
        return
    raise StateIncompatibleError(
        f"pipeline '{name}' cannot restart on version {pipeline.current_version} keeping its "
        f"state: {state.message}",
        details=[{**o.model_dump(), "message": f"{o.operator} ({o.label}): "
                  f"{'; '.join(o.reasons)}"} for o in state.dropped])


def _settings(spec: PipelineSpec) -> dict[str, object]:
    # An autoscaled pipeline given no parallelism starts at its range's minimum.
    parallelism = spec.autoscale.min if spec.autoscale is not None and \
        "parallelism" not in spec.model_fields_set else spec.parallelism
    return {"description": spec.description, "parallelism": parallelism,
            "checkpoint_interval_ms": spec.checkpoint_interval_ms, "autoscale": spec.autoscale,
            "desired_state": DESIRED_STOPPED if spec.stopped else DESIRED_RUNNING}


def _public(pipelines: PipelineRepository, pipeline: Pipeline) -> PipelinePublic:
    return PipelinePublic.of(pipeline, pipelines.latest_run(pipeline))
