"""Streaming a preview job's progress and rows to the caller as Server-Sent Events.

A preview is a throwaway job (``kind="preview"``) the scheduler runs with its
sinks replaced by ``rows`` events on the job's channel. The stream polls: every
:data:`POLL_S` it reads the job row (for its state) in a short session of its
own and the channel after its own cursor (for rows and errors), so it holds
neither a database connection nor a thread between polls.

Events, each ``data`` a JSON value:

- ``status`` — ``{"job_id", "state"}``, first ``created``, then each change
  (``running`` at the latest before the first ``epoch`` or ``rows``);
- ``epoch`` — ``{"epoch", "rows_in", "rows_out"}``: an epoch committed (what the
  preview has read so far, while a window has not closed yet and nothing is out);
- ``rows`` — an array of row objects (never more than ``limit`` in all);
- ``error`` — ``{"message"}``: the job failed, or the preview timed out;
- ``end`` — ``{"reason", "rows"}``: the last event; ``reason`` is ``limit``,
  ``timeout``, ``finished``, ``stopped``, ``failed`` or ``gone``.

When the stream ends before the job did — the row limit, the timeout, or the
client going away — the job is asked to stop (``stop_mode = "immediate"``) and
the scheduler is poked, so no preview outlives its reader.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from fastapi.sse import KEEPALIVE_COMMENT, format_sse_event

from spate.api.db import Database
from spate.api.http.errors import NotFoundError
from spate.api.repositories.jobs import JobRepository
from spate.api.scheduling import SchedulerNotifier
from spate.engine.job.channel import ChannelError, JobChannel, open_channel
from spate.scheduler.store import CREATED, RUNNING, STARTING, TERMINAL_STATES

logger = logging.getLogger(__name__)
#: Job states before ``running``: a stream seeing rows in one of them reports ``running``.
_BEFORE_RUNNING = frozenset({CREATED, STARTING})

#: Seconds between polls of the job row and its channel.
POLL_S = 0.25
#: Seconds without an event after which a keep-alive comment is sent.
KEEPALIVE_S = 10.0
#: The stop mode asked of a preview whose reader is done with it.
STOP_MODE = "immediate"


@dataclass(frozen=True)
class JobSnapshot:
    state: str
    channel_url: str | None
    failure_message: str | None


@dataclass
class PreviewStream:
    """The event stream of one preview job."""

    database: Database
    tenant_id: str
    job_id: str
    limit: int
    timeout_s: float
    notifier: SchedulerNotifier
    is_disconnected: Callable[[], Awaitable[bool]]
    rows_sent: int = 0
    _channel: JobChannel | None = None
    _cursor: str | None = None
    _errors_sent: set[str] = field(default_factory=set)

    async def events(self) -> AsyncIterator[bytes]:
        """The SSE byte stream; asks the job to stop if it ends before the job does."""
        job_done = False
        try:
            async for chunk, done in self._run():
                job_done = job_done or done
                yield chunk
        finally:
            # Also reached when the client disconnects and the response is
            # cancelled: shield the stop request so it still happens.
            with anyio.CancelScope(shield=True):
                if not job_done:
                    await anyio.to_thread.run_sync(self._request_stop)
                if self._channel is not None:
                    await anyio.to_thread.run_sync(self._channel.close)

    async def _run(self) -> AsyncIterator[tuple[bytes, bool]]:
        deadline = time.monotonic() + self.timeout_s
        state = "created"
        yield _event("status", {"job_id": self.job_id, "state": state}), False
        quiet_since = time.monotonic()
        while not await self.is_disconnected():
            snapshot = await anyio.to_thread.run_sync(self._read_job)
            if snapshot is None:
                yield _event("error", {"message": "the preview job no longer exists"}), True
                yield _event("end", self._end("gone")), True
                return
            if snapshot.state != state and not (state == RUNNING
                                                and snapshot.state in _BEFORE_RUNNING):
                state = snapshot.state
                quiet_since = time.monotonic()
                yield _event("status", {"job_id": self.job_id, "state": state}), False
            chunks = await anyio.to_thread.run_sync(self._read_channel, snapshot)
            if chunks and state in _BEFORE_RUNNING:
                # The job's own channel is ahead of the scheduler, which records the job
                # as running once it has read the job's events: rows mean it runs.
                state = RUNNING
                yield _event("status", {"job_id": self.job_id, "state": state}), False
            for chunk in chunks:
                quiet_since = time.monotonic()
                yield chunk, False
            if self.rows_sent >= self.limit:
                yield _event("end", self._end("limit")), False
                return
            if state in TERMINAL_STATES:
                async for chunk in self._finish(snapshot):
                    yield chunk, True
                return
            if time.monotonic() >= deadline:
                message = f"the preview timed out after {self.timeout_s:g} s; it is stopped"
                yield _event("error", {"message": message}), False
                yield _event("end", self._end("timeout")), False
                return
            if time.monotonic() - quiet_since >= KEEPALIVE_S:
                quiet_since = time.monotonic()
                yield KEEPALIVE_COMMENT, False
            await anyio.sleep(POLL_S)

    async def _finish(self, snapshot: JobSnapshot) -> AsyncIterator[bytes]:
        message = snapshot.failure_message
        if snapshot.state == "failed" and message and message not in self._errors_sent:
            yield _event("error", {"message": message})
        yield _event("end", self._end(snapshot.state))

    def _end(self, reason: str) -> dict[str, Any]:
        return {"reason": reason, "rows": self.rows_sent}

    def _read_job(self) -> JobSnapshot | None:
        with self.database.sessions() as session:
            try:
                job = JobRepository(session, self.tenant_id).get(self.job_id)
            except NotFoundError:
                return None
            return JobSnapshot(job.state, job.channel_url, job.failure_message)

    def _read_channel(self, snapshot: JobSnapshot) -> list[bytes]:
        """SSE chunks for the channel's new rows, epoch and error events."""
        if snapshot.channel_url is None:
            return []  # the scheduler has not started the job yet
        try:
            if self._channel is None:
                self._channel = open_channel(snapshot.channel_url)
            events, self._cursor = self._channel.read(self._cursor)
        except ChannelError:
            logger.warning("could not read a preview's channel", exc_info=True,
                           extra={"job_id": self.job_id})
            return []
        chunks = []
        for event in events:
            if event.get("type") == "rows" and self.rows_sent < self.limit:
                rows = _row_objects(event.get("rows"))[: self.limit - self.rows_sent]
                if rows:
                    self.rows_sent += len(rows)
                    chunks.append(_event("rows", rows))
            elif event.get("type") == "epoch":
                chunks.append(_event("epoch", {name: event.get(name)
                                               for name in ("epoch", "rows_in", "rows_out")}))
            elif event.get("type") == "error":
                message = str(event.get("message") or "the preview failed")
                self._errors_sent.add(message)
                chunks.append(_event("error", {"message": message}))
        return chunks

    def _request_stop(self) -> None:
        try:
            with self.database.sessions() as session:
                JobRepository(session, self.tenant_id).request_stop(self.job_id, STOP_MODE)
        except Exception:  # noqa: BLE001 - the stream is over either way; log and go on
            logger.warning("could not ask a preview job to stop", exc_info=True,
                           extra={"job_id": self.job_id})
            return
        self.notifier.job_changed(self.job_id)


def _row_objects(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, list):
        return []
    return [row for row in value if isinstance(row, dict)]


def _event(name: str, data: Any) -> bytes:
    return format_sse_event(event=name, data_str=json.dumps(data, separators=(",", ":"),
                                                            default=str))
