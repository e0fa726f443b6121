"""The API as a client sees it while a dependency is down: polled from a thread, every
answer kept, and the shape of a 503 checked."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from tests.faults.deployment import Spate, Tenant


@dataclass
class Answer:
    """One answer of the API (``status`` None: none came)."""

    at: float
    status: int | None
    body: Any
    retry_after: str | None


class ApiWatch:
    """Asks the API for a tenant's pipelines every ``interval_s`` from a thread and keeps
    every answer (status None: no answer at all)."""

    def __init__(self, spate: Spate, tenant: Tenant, interval_s: float = 0.2) -> None:
        self.spate = spate
        self.tenant = tenant
        self.interval_s = interval_s
        self.answers: list[Answer] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="faults-api-watch", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                response = self.spate.call(self.tenant, "GET", "/pipelines")
                body: Any = response.json() if response.content else None
                self.answers.append(Answer(time.monotonic(), response.status_code, body,
                                           response.headers.get("retry-after")))
            except (httpx.HTTPError, ValueError):
                self.answers.append(Answer(time.monotonic(), None, None, None))
            self._stop.wait(self.interval_s)

    def statuses(self) -> Counter[int | None]:
        return Counter(answer.status for answer in self.answers)

    def first_ok_after(self, moment: float) -> float | None:
        return next((a.at for a in self.answers if a.at >= moment and a.status == 200), None)

    def assert_unavailable_never_internal(self) -> None:
        """Every answer is a 200 or a 503 in the error shape with ``Retry-After``."""
        for answer in self.answers:
            assert answer.status in (200, 503, None), \
                f"the API answered {answer.status}: {answer.body}"
            if answer.status == 503:
                assert_unavailable(answer.body, answer.retry_after)


def assert_unavailable(body: Any, retry_after: str | None) -> None:
    """A 503's body and header are the documented ones."""
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert error["code"] == "unavailable" and error["message"] and error["details"] == [], body
    assert retry_after is not None and int(retry_after) > 0, "a 503 without Retry-After"


@contextmanager
def watching(spate: Spate, tenant: Tenant) -> Iterator[ApiWatch]:
    """An :class:`ApiWatch` of ``tenant`` for the time of the block."""
    watch = ApiWatch(spate, tenant)
    watch.start()
    try:
        yield watch
    finally:
        watch.stop()
