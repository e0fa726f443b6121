"""/udfs: a tenant's Python UDFs, which any of its pipelines calls by name (docs/udfs.md).

A UDF is one Python file declaring one UDF (``@udf``, ``@vectorized_udf(...)``
or ``@udaf``) named as it is stored. Its source is checked as ``spate run
--udf`` checks a file, in the planning pool (the API never runs it, nor parses
it in its own process): a file that cannot be used is a 400 ``invalid_udf``
whose ``details`` locate each problem in the file. Storing a name again with
other source adds a version and makes it current (201); the same source again
is a 200. A job loads the current version when it starts, inside its tenant's
compute unit; a running job keeps the version it started with.

A deployment whose state store is FoundationDB refuses to store UDFs (403): the
cluster file its jobs hold reaches every tenant's keys, so no tenant's code may
run next to it (docs/security.md).

Deleting a UDF that a running pipeline's SQL calls (its current version's, or
its live job's) is a 409 naming those pipelines: stop them or change their SQL
first. A stopped pipeline does not hold a UDF: starting it after the UDF is
gone fails, naming the unknown function.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request, Response, status

from spate.api.http.deps import DeveloperCaller, Planner, UdfsRead, UdfsWrite, app_state
from spate.api.http.errors import (
    ERROR_RESPONSES,
    ConflictError,
    InvalidUdfError,
    PermissionDeniedError,
)
from spate.api.http.pagination import DEFAULT_LIMIT, CursorQuery, LimitQuery, Page, decode_cursor
from spate.api.http.schemas.pipelines import Diagnostic
from spate.api.http.schemas.udfs import (
    UdfCreate,
    UdfPublic,
    UdfValidation,
    UdfVersionPublic,
)
from spate.api.planning.udfs import UdfCheckAnswer, udf_file

router = APIRouter(prefix="/udfs", tags=["udfs"], responses=ERROR_RESPONSES)

NamePath = Annotated[str, Path(max_length=63, description="the UDF's name")]
#: State stores whose jobs hold credentials reaching every tenant: no tenant code there.
_SHARED_STATE_STORES = ("fdb://",)


@router.post("/validate", response_model=UdfValidation)
def validate_udf(body: UdfCreate, planner: Planner) -> UdfValidation:
    """Check a UDF file as ``POST /udfs`` would, without storing it: problems located in
    the file, or the UDF's kind and signature."""
    checked = planner.check_udf(body.name, body.source)
    return UdfValidation(valid=checked.valid,
                         diagnostics=[Diagnostic(**d) for d in checked.diagnostics],
                         kind=checked.kind, signature=checked.signature)


@router.post("", status_code=status.HTTP_201_CREATED, response_model=UdfPublic,
             responses={200: {"model": UdfPublic,
                              "description": "the source equals the current version's"}})
def create_udf(body: UdfCreate, udfs: UdfsWrite, caller: DeveloperCaller, planner: Planner,
               request: Request, response: Response) -> UdfPublic:
    """Store a UDF: a new one at version 1, or the next version of the UDF of that name
    (201); its current source again changes nothing (200). A file that cannot be used
    is a 400 ``invalid_udf`` locating each problem in it."""
    if app_state(request).settings.state_url.startswith(_SHARED_STATE_STORES):
        raise PermissionDeniedError(
            "this deployment keeps state in FoundationDB, whose cluster file reaches every "
            "tenant's state, so it runs no tenant's UDFs (docs/security.md); ask the "
            "operator for a deployment on PostgreSQL or SQLite state")
    checked = _require_valid(body.name, planner.check_udf(body.name, body.source))
    udf, created = udfs.store(body.name, body.source, checked, caller.key_id)
    response.status_code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return UdfPublic.of(udf)


@router.get("", response_model=Page[UdfPublic])
def list_udfs(udfs: UdfsRead, limit: LimitQuery = DEFAULT_LIMIT,
              cursor: CursorQuery = None) -> Page[UdfPublic]:
    """The tenant's UDFs, oldest first."""
    rows, next_cursor = udfs.list_udfs(decode_cursor(cursor), limit)
    return Page[UdfPublic](items=[UdfPublic.of(u) for u in rows], next_cursor=next_cursor)


@router.get("/{name}", response_model=UdfPublic)
def get_udf(name: NamePath, udfs: UdfsRead) -> UdfPublic:
    """The UDF's current version (source and signature) and the list of its versions."""
    return UdfPublic.of(udfs.get(name))


@router.get("/{name}/versions/{version}", response_model=UdfVersionPublic)
def get_udf_version(name: NamePath, version: Annotated[int, Path(ge=1, le=2**31 - 1)],
                    udfs: UdfsRead) -> UdfVersionPublic:
    """One version of the UDF, with its source."""
    return UdfVersionPublic.of(*udfs.get_version(name, version))


@router.delete("/{name}", status_code=status.HTTP_204_NO_CONTENT)
def delete_udf(name: NamePath, udfs: UdfsWrite, planner: Planner) -> Response:
    """Delete the UDF and its versions. One that a running pipeline's SQL calls is a 409
    naming those pipelines (``details``: ``pipeline``): stop them or change their SQL
    first."""
    udfs.get(name)  # an unknown UDF is a 404 before pipelines are looked at
    candidates = udfs.live_pipeline_sql(name)
    users = planner.udf_callers(name, candidates) if candidates else []
    if users:
        raise ConflictError(
            f"UDF '{name}' is called by running pipelines {', '.join(users)}: stop them, or "
            "give them SQL that does not call it, before deleting it",
            details=[{"pipeline": pipeline} for pipeline in users])
    udfs.delete(name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


def _require_valid(name: str, checked: UdfCheckAnswer) -> UdfCheckAnswer:
    """``checked`` when the file can be used, else a 400 locating its problems."""
    if checked.valid:
        return checked
    filename = udf_file(name, "").filename
    first = checked.diagnostics[0]
    raise InvalidUdfError(f"{filename}:{first['line']}:{first['column']}: {first['message']}",
                          details=checked.diagnostics)
