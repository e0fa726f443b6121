"""/pipelines: create from SQL, list, get, change settings, delete; SQL versions; validation.

SQL is planned before anything is stored, so a stored version always plans.
Versions are immutable: a SQL change adds a version and makes it current.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status
from pydantic import AfterValidator, AwareDatetime

from api.deps import DeveloperCaller, PipelinesRead, PipelinesWrite, ViewerCaller
from api.errors import ERROR_RESPONSES
from api.pagination import DEFAULT_LIMIT, CursorQuery, LimitQuery, Page, decode_cursor
from api.planning import check_sql, plan_graph, require_valid_sql
from api.repositories.pipelines import PipelineFilter
from api.schemas.common import NAME_PATTERN
from api.schemas.pipelines import (
    PipelineCreate,
    PipelinePublic,
    PipelineSpec,
    PipelineUpdate,
    PipelineValidate,
    PipelineValidation,
    PipelineVersionCreate,
    PipelineVersionPublic,
    not_reserved,
)

router = APIRouter(prefix="/pipelines", tags=["pipelines"], responses=ERROR_RESPONSES)

NamePath = Annotated[str, Path(max_length=63, description="the pipeline's name")]
NewNamePath = Annotated[str, Path(pattern=NAME_PATTERN, max_length=63,
                                  description="the pipeline's name"),
                        AfterValidator(not_reserved)]


@router.post("/validate", response_model=PipelineValidation)
def validate_pipeline(body: PipelineValidate, caller: ViewerCaller) -> PipelineValidation:
    """Plan SQL without storing it: diagnostics with line and column, or the plan graph."""
    checked = check_sql(body.sql)
    graph = plan_graph(checked.plan) if checked.plan is not None else None
    return PipelineValidation(valid=checked.plan is not None, diagnostics=checked.diagnostics,
                              plan=graph)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=PipelinePublic)
def create_pipeline(body: PipelineCreate, pipelines: PipelinesWrite,
                    caller: DeveloperCaller) -> PipelinePublic:
    """Create a pipeline at version 1. Invalid SQL is a 400 with located diagnostics."""
    require_valid_sql(body.sql)
    pipeline = pipelines.create(body.name, body.sql, _settings(body), caller.key_id)
    return PipelinePublic.of(pipeline)


@router.put("/{name}", response_model=PipelinePublic,
            responses={201: {"model": PipelinePublic, "description": "created"}})
def put_pipeline(name: NewNamePath, body: PipelineSpec, pipelines: PipelinesWrite,
                 caller: DeveloperCaller, response: Response) -> PipelinePublic:
    """Create the pipeline ``name`` if absent (201), or return it unchanged if it exists
    with the same SQL and settings (200); other SQL or settings are a 409."""
    require_valid_sql(body.sql)
    pipeline, created = pipelines.create_or_get(name, body.sql, _settings(body), caller.key_id)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return PipelinePublic.of(pipeline)


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
    return Page[PipelinePublic](items=[PipelinePublic.of(p) for p in rows],
                                next_cursor=next_cursor)


@router.get("/{name}", response_model=PipelinePublic)
def get_pipeline(name: NamePath, pipelines: PipelinesRead) -> PipelinePublic:
    return PipelinePublic.of(pipelines.get(name))


@router.patch("/{name}", response_model=PipelinePublic)
def update_pipeline(name: NamePath, body: PipelineUpdate,
                    pipelines: PipelinesWrite) -> PipelinePublic:
    """Change settings; fields left out keep their values. SQL changes go to /versions."""
    return PipelinePublic.of(pipelines.update(name, body.changes()))


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT)
def delete_pipeline(name: NamePath, pipelines: PipelinesWrite) -> Response:
    """Delete a pipeline and all its versions."""
    pipelines.delete(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.post("/{name}/versions", response_model=PipelineVersionPublic,
             status_code=status.HTTP_201_CREATED,
             responses={200: {"model": PipelineVersionPublic,
                              "description": "the SQL equals the current version's"}})
def create_pipeline_version(name: NamePath, body: PipelineVersionCreate,
                            pipelines: PipelinesWrite, caller: DeveloperCaller,
                            response: Response) -> PipelineVersionPublic:
    """Make new SQL current as the next version (201); the current SQL again is a 200."""
    require_valid_sql(body.sql)
    version, created = pipelines.add_version(name, body.sql, caller.key_id)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
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
            "checkpoint_interval_ms": spec.checkpoint_interval_ms}
