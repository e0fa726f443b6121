"""Refuse requests carrying text no database can store, before any route sees them.

A NUL character (``\\u0000`` in JSON, ``%00`` in a URL) or an unpaired UTF-16
surrogate (``\\ud800``) in a name, a description or SQL is valid JSON but not
valid text for PostgreSQL, which would fail the insert deep inside a route.
This middleware checks the path, the query string and every string (keys
included) of a JSON body, and answers 422 ``invalid_text`` naming where the
bad character is. It runs inside the body-size limit, so the body it reads is
already bounded.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from spate.api.http.bodylimit import replay
from spate.api.http.errors import error_response


class InvalidTextMiddleware:
    """ASGI middleware answering 422 in the API's error shape for unstorable text."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        where = _bad_url(scope)
        messages: list[Message] = []
        if where is None and _is_json(scope):
            messages = await _read(receive)
            body = b"".join(m.get("body", b"") for m in messages
                            if m["type"] == "http.request")
            where = _bad_json(body)
        if where is not None:
            response = error_response(
                422, "invalid_text",
                f"the request has a NUL character or an unpaired surrogate in {where}; "
                "text must be valid Unicode without NUL characters", [{"location": where}])
            await response(scope, receive, send)
            return
        await self.app(scope, replay(messages, receive), send)


def _bad_url(scope: Scope) -> str | None:
    raw_path = scope.get("raw_path") or str(scope.get("path", "")).encode()
    if not _valid(unquote_to_bytes(raw_path)):
        return "path"
    query = scope.get("query_string", b"")
    if not _valid(unquote_to_bytes(query.replace(b"+", b" "))):
        return "query"
    return None


def _valid(raw: bytes) -> bool:
    if b"\x00" in raw:
        return False
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _is_json(scope: Scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"content-type":
            return b"json" in value.lower()
    return False


def _bad_json(body: bytes) -> str | None:
    if not body:
        return None
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return None  # malformed JSON: the app answers it as such
    return _bad_value(document, "body")


def _bad_value(value: Any, where: str) -> str | None:
    if isinstance(value, str):
        return None if _storable(value) else where
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _bad_value(item, f"{where}.{index}")
            if found is not None:
                return found
    if isinstance(value, dict):
        for key, item in value.items():
            if not _storable(key):
                return f"{where} (a key)"
            found = _bad_value(item, f"{where}.{key}")
            if found is not None:
                return found
    return None


def _storable(text: str) -> bool:
    if "\x00" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate
        return False
    return True


async def _read(receive: Receive) -> list[Message]:
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request" or not message.get("more_body", False):
            return messages
