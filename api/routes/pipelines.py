"""/pipelines: create from SQL, list, get, change settings, delete; lifecycle controls
(stop, restart, rescale, move); SQL versions; validation.

SQL is planned before anything is stored, so a stored version always plans.
Versions are immutable: a SQL change adds a version and makes it current.

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

from spate.api.deps import (
    DeveloperCaller,
    Notifier,
    PipelinesRead,
    PipelinesWrite,
    Planner,
    ViewerCaller,
    app_state,
)
from spate.api.errors import ERROR_RESPONSES, BadRequestError
from spate.api.models import DESIRED_RUNNING, DESIRED_STOPPED, Pipeline
from spate.api.pagination import DEFAULT_LIMIT, CursorQuery, LimitQuery, Page, decode_cursor
from spate.api.repositories.pipelines import (
    PipelineFilter,
    PipelineRepository,
    desired_state_changes,
)
from spate.api.schemas.common import NAME_PATTERN
from spate.api.schemas.pipelines import (
    Diagnostic,
    PipelineCreate,
    PipelineMove,
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
    not_reserved,
)
from spate.api.settings import known_clusters

router = APIRouter(prefix="/pipelines", tags=["pipelines"], responses=ERROR_RESPONSES)
#: How long ``DELETE ?force=true`` waits for a running job to be killed.
FORCE_DELETE_WAIT_S = 30.0

NamePath = Annotated[str, Path(max_length=63, description="the pipeline's name")]
NewNamePath = Annotated[str, Path(pattern=NAME_PATTERN, max_length=63,
                                  description="the pipeline's name"),
                        AfterValidator(not_reserved)]


@router.post("/validate", response_model=PipelineValidation)
def validate_pipeline(body: PipelineValidate, caller: ViewerCaller,
                      planner: Planner) -> PipelineValidation:
    """Plan SQL without storing it: diagnostics with line and column, or the plan graph.
    A plan over its time or memory budget is a 422."""
    answer = planner.check(body.sql, graph=True)
    return PipelineValidation(
        valid=answer.valid, diagnostics=[Diagnostic(**d) for d in answer.diagnostics],
        plan=PlanGraph(**answer.graph) if answer.graph is not None else None)


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


@router.post("/{name}/restart", response_model=PipelinePublic,
             status_code=status.HTTP_202_ACCEPTED)
def restart_pipeline(name: NamePath, pipelines: PipelinesWrite, notify: Notifier,
                     body: PipelineRestart | None = None) -> PipelinePublic:
    """Replace the pipeline's job with a new one, keeping its state unless
    ``with_state`` is false; a stopped pipeline starts. The scheduler does it (202)."""
    with_state = body.with_state if body is not None else True
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
    rows, next_cursor = pipelines.list_versions(name, decode_cursor(cursor), limit)
    return Page[PipelineVersionPublic](
        items=[PipelineVersionPublic.model_validate(v) for v in rows], next_cursor=next_cursor)


@router.get("/{name}/versions/{version}", response_model=PipelineVersionPublic)
def get_pipeline_version(name: NamePath, version: Annotated[int, Path(ge=1, le=2**31 - 1)],
                         pipelines: PipelinesRead) -> PipelineVersionPublic:
    return PipelineVersionPublic.model_validate(pipelines.get_version(name, version))


def _settings(spec: PipelineSpec) -> dict[str, object]:
    return {"description": spec.description, "parallelism": spec.parallelism,
            "checkpoint_interval_ms": spec.checkpoint_interval_ms,
            "desired_state": DESIRED_STOPPED if spec.stopped else DESIRED_RUNNING}


def _public(pipelines: PipelineRepository, pipeline: Pipeline) -> PipelinePublic:
    return PipelinePublic.of(pipeline, pipelines.latest_run(pipeline))
