"""A small HTTP client for the Spate API, used by the ``spate`` client commands.

It sends the API key as a bearer token, turns the API's one error shape into
:class:`ClientError`, walks paginated listings, polls a resource until it
settles and reads Server-Sent Events streams. It never prints or logs the key.
It imports nothing of the server, so the client commands start quickly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

API_PREFIX = "/api/v1"
DEFAULT_SERVER = "http://127.0.0.1:8000"
TIMEOUT_S = 30.0
#: How long a stream may stay silent; the API sends a keep-alive every 10 s.
STREAM_READ_TIMEOUT_S = 60.0


class ClientError(Exception):
    """The server refused a request, or could not be reached."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None,
                 details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.details = details or []


def clean_api_key(raw: str, named: str) -> str:
    """The API key in ``raw`` without the whitespace around it (a key read from a file
    keeps its newline; one pasted often gains a space). A key with any other character
    than printable ASCII inside it is refused with a :class:`ClientError` naming where it
    came from, ``named`` (a variable, an option), never the key."""
    key = raw.strip()
    if not key:
        raise ClientError(f"the API key in {named} is empty; set it to a key of your tenant")
    if not all("!" <= char <= "~" for char in key):
        raise ClientError(
            f"the API key in {named} holds a space, a control character or a non-ASCII "
            "character inside it, which no Spate key has (the key is not shown); set it "
            "again from where the key was saved")
    return key


#: Methods a client may send twice (RFC 9110, 9.2.2).
_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})


class SpateClient:
    """Calls ``/api/v1`` on one server with one API key; ``key_named`` says where the key
    came from, for the message when it is malformed (:func:`clean_api_key`)."""

    def __init__(self, server: str, api_key: str, http: httpx.Client | None = None,
                 key_named: str = "the client's settings") -> None:
        self.server = server.rstrip("/")
        self._key = clean_api_key(api_key, key_named)
        self._owns_http = http is None
        self._http = http if http is not None else httpx.Client(
            base_url=self.server, timeout=TIMEOUT_S)
        self._headers = {"Authorization": f"Bearer {self._key}"}

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> SpateClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, json: Any = None,
                params: dict[str, Any] | None = None) -> Any:
        """The decoded JSON body of a successful call (None for 204; the text of a body
        that is not JSON, such as an invoice's CSV)."""
        try:
            response = self._send(method, path, json, params)
        except httpx.HTTPError as error:
            raise self._unreachable(error) from None
        if response.status_code >= 400:
            raise _error_of(response)
        if response.status_code == 204 or not response.content:
            return None
        if not response.headers.get("content-type", "").startswith("application/json"):
            return response.text
        return response.json()

    def _send(self, method: str, path: str, json: Any,
              params: dict[str, Any] | None) -> httpx.Response:
        """One call; an idempotent one goes again, once, when the server closed the kept-alive
        connection it went out on before answering (its idle timeout raced the request)."""
        try:
            return self._http.request(method, API_PREFIX + path, json=json, params=params,
                                      headers=self._headers)
        except httpx.RemoteProtocolError:
            if method not in _IDEMPOTENT:
                raise
        return self._http.request(method, API_PREFIX + path, json=json, params=params,
                                  headers=self._headers)

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params={k: v for k, v in params.items()
                                                 if v is not None})

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, json=body)

    def patch(self, path: str, body: Any) -> Any:
        return self.request("PATCH", path, json=body)

    def delete(self, path: str, **params: Any) -> Any:
        return self.request("DELETE", path, params=params or None)

    def items(self, path: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every item of a paginated listing, following ``next_cursor``."""
        cursor: str | None = None
        while True:
            page = self.get(path, cursor=cursor, **params)
            yield from page["items"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def poll(self, path: str, settled: Callable[[Any], bool], timeout_s: float,
             interval_s: float = 1.0,
             on_each: Callable[[Any], None] | None = None) -> tuple[Any, bool]:
        """GET ``path`` until ``settled(body)`` or ``timeout_s`` passes:
        (the last body, whether it settled). ``on_each`` sees every body read."""
        deadline = time.monotonic() + timeout_s
        while True:
            body = self.get(path)
            if on_each is not None:
                on_each(body)
            if settled(body):
                return body, True
            if time.monotonic() + interval_s > deadline:
                return body, False
            time.sleep(interval_s)

    @contextmanager
    def events(self, path: str, body: Any) -> Iterator[Iterator[tuple[str, Any]]]:
        """POST ``body`` and read the answer as Server-Sent Events: (event, parsed data)
        pairs as they arrive. Leaving the block closes the connection."""
        timeout = httpx.Timeout(TIMEOUT_S, read=STREAM_READ_TIMEOUT_S)
        try:
            with self._http.stream("POST", API_PREFIX + path, json=body, headers=self._headers,
                                   timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    raise _error_of(response)
                yield self._sse(response)
        except httpx.HTTPError as error:
            raise self._unreachable(error) from None

    @staticmethod
    def _sse(response: httpx.Response) -> Iterator[tuple[str, Any]]:
        """The events of an SSE body; comments (keep-alives) are skipped."""
        name = "message"
        data: list[str] = []
        for line in response.iter_lines():
            if line == "":
                if data:
                    yield name, json.loads("\n".join(data))
                name, data = "message", []
            elif line.startswith("event:"):
                name = line.removeprefix("event:").strip()
            elif line.startswith("data:"):
                data.append(line.removeprefix("data:").removeprefix(" "))

    def _unreachable(self, error: httpx.HTTPError) -> ClientError:
        # An error of the HTTP stack may quote the request's headers: the key goes.
        cause = str(error).replace(self._key, "<API key>")
        if isinstance(error, httpx.RemoteProtocolError):
            return ClientError(f"the Spate server at {self.server} closed the connection "
                               f"without answering ({cause}); the request may or may not "
                               "have taken effect: look before sending it again")
        return ClientError(f"cannot reach the Spate server at {self.server}: {cause}; "
                           "start one with 'spate serve' or set SPATE_SERVER")


def _error_of(response: httpx.Response) -> ClientError:
    try:
        error = response.json()["error"]
        return ClientError(error["message"], response.status_code, error.get("code"),
                           error.get("details"))
    except (ValueError, KeyError, TypeError):
        return ClientError(f"the server answered {response.status_code}", response.status_code)
