"""A small HTTP client for the Spate API, used by the ``spate`` client commands.

It sends the API key as a bearer token, turns the API's one error shape into
:class:`ClientError`, and walks paginated listings. It never prints or logs
the key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx

API_PREFIX = "/api/v1"
DEFAULT_SERVER = "http://127.0.0.1:8000"
TIMEOUT_S = 30.0


class ClientError(Exception):
    """The server refused a request, or could not be reached."""

    def __init__(self, message: str, status: int | None = None, code: str | None = None,
                 details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.details = details or []


class SpateClient:
    """Calls ``/api/v1`` on one server with one API key."""

    def __init__(self, server: str, api_key: str, http: httpx.Client | None = None) -> None:
        self.server = server.rstrip("/")
        self._owns_http = http is None
        self._http = http if http is not None else httpx.Client(
            base_url=self.server, timeout=TIMEOUT_S)
        self._headers = {"Authorization": f"Bearer {api_key}"}

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> SpateClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, json: Any = None,
                params: dict[str, Any] | None = None) -> Any:
        """The decoded JSON body of a successful call (None for 204)."""
        try:
            response = self._http.request(method, API_PREFIX + path, json=json, params=params,
                                          headers=self._headers)
        except httpx.HTTPError as error:
            raise ClientError(f"cannot reach the Spate server at {self.server}: {error}; "
                              "start one with 'spate serve' or set SPATE_SERVER") from None
        if response.status_code >= 400:
            raise _error_of(response)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

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


def _error_of(response: httpx.Response) -> ClientError:
    try:
        error = response.json()["error"]
        return ClientError(error["message"], response.status_code, error.get("code"),
                           error.get("details"))
    except (ValueError, KeyError, TypeError):
        return ClientError(f"the server answered {response.status_code}", response.status_code)
