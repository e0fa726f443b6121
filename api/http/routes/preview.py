"""POST /pipelines/preview: run SQL as a throwaway job and stream its rows (SSE).

Previews run tenant code, so they need the developer role. The SQL is checked
first (a 400 with located diagnostics, as when creating a pipeline); then a
preview job is recorded for the scheduler and the answer is a
``text/event-stream`` of its progress and rows (see :mod:`spate.api.http.preview_stream`).
The tenant's plan admits the preview first (:mod:`spate.api.quotas`): how many
stream at once, their parallelism and compute units, their generators' rates.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from spate.api.http.deps import DeveloperCaller, JobsWrite, Notifier, Planner, app_state
from spate.api.http.errors import ERROR_RESPONSES
from spate.api.http.preview_stream import PreviewStream
from spate.api.http.schemas.pipelines import PreviewCreate

# The route's response class is the event stream, so its error responses name
# their (JSON) media type themselves rather than inherit the stream's.
_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {"description": "Server-Sent Events: status, epoch, rows, error, end",
          "content": {"text/event-stream": {"schema": {"type": "string"}}}},
    **{status: {"description": response["description"], "content": {"application/json": {
        "schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
       for status, response in ERROR_RESPONSES.items()},
}

router = APIRouter(prefix="/pipelines", tags=["pipelines"])


class EventStream(StreamingResponse):
    """A ``text/event-stream`` of already encoded events (FastAPI's own SSE response
    class is only for generator routes, and this route must answer errors first)."""

    media_type = "text/event-stream"


@router.post("/preview", response_class=EventStream, responses=_RESPONSES)
def preview_pipeline(body: PreviewCreate, request: Request, caller: DeveloperCaller,
                     jobs: JobsWrite, notify: Notifier, planner: Planner) -> StreamingResponse:
    """Run SQL without storing it and stream its first ``limit`` rows as they come:
    events ``status``, ``epoch``, ``rows``, ``error`` and, last, ``end``. Closing the connection
    stops the preview job. A tenant streams as many previews at once as its plan allows
    (429 beyond: they end by themselves)."""
    planned = planner.require_valid(body.sql)
    settings = app_state(request).settings
    job = jobs.create_preview(body.sql, body.parallelism, settings.cluster_backend,
                              planned.sources)
    notify.job_changed(job.id)
    stream = PreviewStream(
        database=app_state(request).database, tenant_id=caller.tenant_id, job_id=job.id,
        limit=body.limit, timeout_s=body.timeout_s, notifier=notify,
        is_disconnected=request.is_disconnected)
    # No caching, and no buffering by proxies such as nginx, or the events arrive late.
    return EventStream(stream.events(), headers={"Cache-Control": "no-cache",
                                                 "X-Accel-Buffering": "no"})
