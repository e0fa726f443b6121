"""Refuse request bodies over a size limit with 413, before any route reads them.

A declared ``Content-Length`` over the limit is refused at once. A body sent
without one (chunked) is read up to the limit; one byte more and the request
is refused. A body within the limit is handed to the app unchanged.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from spate.api.http.errors import error_response


class BodyLimitMiddleware:
    """ASGI middleware answering 413 in the API's error shape."""

    def __init__(self, app: ASGIApp, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._refuse(scope, receive, send)
            return
        body, more_allowed = await self._read_body(receive)
        if not more_allowed:
            await self._refuse(scope, receive, send)
            return
        await self.app(scope, replay(body, receive), send)

    async def _read_body(self, receive: Receive) -> tuple[list[Message], bool]:
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                return messages, True
            size += len(message.get("body", b""))
            if size > self.max_body_bytes:
                return messages, False
            if not message.get("more_body", False):
                return messages, True

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413, "payload_too_large",
            f"the request body is larger than {self.max_body_bytes} bytes",
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


def replay(messages: list[Message], receive: Receive) -> Receive:
    """A ``receive`` that hands out ``messages`` (already read) first, then reads on."""
    pending = list(messages)

    async def replay() -> Message:
        if pending:
            return pending.pop(0)
        return await receive()

    return replay
