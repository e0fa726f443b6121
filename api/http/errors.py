"""The API's errors and the one body shape every error response has.

``{"error": {"code": "...", "message": "...", "details": [...]}}`` — for our
own errors, FastAPI's validation errors, Starlette's 404/405, and anything
unexpected (logged, then answered with code ``internal`` and no trace).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException

logger = logging.getLogger(__name__)


class ErrorInfo(BaseModel):
    """What went wrong: a stable code for programs, a message for people."""

    code: str = Field(description="stable, machine-readable error code")
    message: str
    details: list[dict[str, Any]] = Field(default_factory=list)


class ErrorBody(BaseModel):
    """The body of every error response."""

    error: ErrorInfo


class ApiError(Exception):
    """Base of the API's errors; each subclass fixes a status and a code."""

    status_code = 400
    code = "bad_request"

    def __init__(self, message: str, details: Sequence[Mapping[str, Any]] = (),
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = [dict(d) for d in details]
        self.headers = dict(headers or {})


class BadRequestError(ApiError):
    status_code, code = 400, "bad_request"


class InvalidSqlError(ApiError):
    status_code, code = 400, "invalid_sql"


class InvalidUdfError(ApiError):
    """A UDF file that cannot be used; ``details`` locate each problem in the file."""

    status_code, code = 400, "invalid_udf"


class AuthenticationError(ApiError):
    status_code, code = 401, "unauthenticated"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"})


class PermissionDeniedError(ApiError):
    status_code, code = 403, "forbidden"


class NotFoundError(ApiError):
    status_code, code = 404, "not_found"


class ConflictError(ApiError):
    status_code, code = 409, "conflict"


class StateIncompatibleError(ApiError):
    """A restart asked to keep state the pipeline's new SQL cannot read; ``details``
    name the operators whose state it would drop, and why."""

    status_code, code = 409, "state_incompatible"


class PayloadTooLargeError(ApiError):
    status_code, code = 413, "payload_too_large"


class RateLimitedError(ApiError):
    status_code, code = 429, "rate_limited"

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"too many requests; retry in {retry_after_s} s",
                         headers={"Retry-After": str(retry_after_s)})


class QuotaExceededError(ApiError):
    """A request the tenant's plan has no room for (see :mod:`spate.api.quotas`).

    403 when only the tenant (stopping or deleting something, lowering a
    parallelism) or the operator (another plan) can make room; 429 with
    ``Retry-After`` when what stands in the way are live previews, which end
    by themselves.
    """

    status_code, code = 403, "quota_exceeded"

    def __init__(self, message: str, details: Mapping[str, Any],
                 retry_after_s: int | None = None) -> None:
        headers = {"Retry-After": str(retry_after_s)} if retry_after_s is not None else None
        super().__init__(message, [details], headers)
        if retry_after_s is not None:
            self.status_code = 429


class BudgetExceededError(ApiError):
    """New work refused: the tenant's budget is spent and its hard stop is on."""

    status_code, code = 403, "budget_exceeded"

    def __init__(self, message: str, details: Mapping[str, Any]) -> None:
        super().__init__(message, [details])


class TooManyFailuresError(ApiError):
    """A client or key id that failed to authenticate too often lately."""

    status_code, code = 429, "too_many_failed_authentications"

    def __init__(self, retry_after_s: int) -> None:
        super().__init__(f"too many failed authentications from this client or for this key; "
                         f"retry in {retry_after_s} s with a valid key",
                         headers={"Retry-After": str(retry_after_s)})


_HTTP_CODES = {
    400: "bad_request", 401: "unauthenticated", 403: "forbidden", 404: "not_found",
    405: "method_not_allowed", 409: "conflict", 413: "payload_too_large",
    415: "unsupported_media_type", 422: "validation_failed", 429: "rate_limited",
    503: "unavailable",
}

#: Error responses every route may give, for the OpenAPI document.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": code.replace("_", " ")}
    for status, code in _HTTP_CODES.items() if status not in (405, 415)
}


def error_response(status_code: int, code: str, message: str,
                   details: Sequence[Mapping[str, Any]] = (),
                   headers: Mapping[str, str] | None = None) -> JSONResponse:
    """A response in the one error shape."""
    info = ErrorInfo(code=code, message=message, details=[dict(d) for d in details])
    body = ErrorBody(error=info)
    return JSONResponse(body.model_dump(), status_code=status_code, headers=dict(headers or {}))


async def _api_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ApiError)
    return error_response(exc.status_code, exc.code, exc.message, exc.details, exc.headers)


async def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, f"http_{exc.status_code}")
    message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
    return error_response(exc.status_code, code, message, headers=exc.headers)


async def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    # The offending input is never echoed: it may be a secret sent in the wrong field.
    details = [{"location": ".".join(str(part) for part in error.get("loc", ())),
                "message": str(error.get("msg", "")), "type": str(error.get("type", ""))}
               for error in exc.errors()]
    if any(d["type"] == "json_invalid" for d in details):
        return error_response(400, "malformed_json", "the request body is not valid JSON",
                              details)
    return error_response(422, "validation_failed", "the request does not match the schema",
                          details)


#: Errors of a dependency that is down, not of the request: the database unreachable or
#: restarting, a connection it dropped, a pool with no connection to give.
_DEPENDENCY_DOWN = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.DisconnectionError,
                    sa_exc.TimeoutError)
#: Seconds a client is asked to wait before retrying while a dependency is down.
RETRY_AFTER_S = 5


async def _unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, _DEPENDENCY_DOWN):
        # Transient: the request may well succeed again in a few seconds.
        logger.warning("the control-plane database is unavailable: %s",
                       str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                       extra={"method": request.method, "path": request.url.path})
        return error_response(
            503, "unavailable", "the service cannot reach its database right now; retry in "
            "a few seconds", headers={"Retry-After": str(RETRY_AFTER_S)})
    logger.error("unhandled error", exc_info=exc,
                 extra={"method": request.method, "path": request.url.path})
    return error_response(500, "internal", "internal error; it has been logged")


def install_error_handlers(app: FastAPI) -> None:
    """Route every kind of error to the one body shape."""
    app.add_exception_handler(ApiError, _api_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(Exception, _unexpected_error)
