"""An in-memory stand-in for the FoundationDB Python bindings' transaction API.

FoundationDB cannot run on this project's machines, so the fdb backend's tests
drive it through this stand-in: serializable conflict checks on read and write
spans, read-your-writes, FoundationDB's limits on key, value and transaction
size, and hooks to inject crashes, conflicts and unknown commit results.
Against a real cluster the shared conformance suite runs instead
(``SPATE_FDB_CLUSTER_FILE``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any


class FakeError(Exception):
    """``fdb.FDBError``: a code, and a description the C library returns as bytes."""

    RETRYABLE = {1007, 1020, 1021}

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code

    @property
    def description(self) -> bytes:
        return f"fake error {self.code}".encode()


class Crash(Exception):
    """The process died here."""


class Ready:
    """A finished future."""

    def __init__(self, result: Any = None, error: Exception | None = None) -> None:
        self.result, self.error = result, error
        self.value = result

    def wait(self) -> Any:
        if self.error is not None:
            raise self.error
        return self.result


@dataclass
class Pair:
    key: bytes
    value: bytes


Span = tuple[bytes, bytes]


def _overlap(a: list[Span], b: list[Span]) -> bool:
    return any(x0 < y1 and y0 < x1 for x0, x1 in a for y0, y1 in b)


class Cluster:
    """The database: committed data, and the write sets of past commits for conflicts."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.history: list[list[Span]] = []  # write spans of the commit making version i + 1
        self.lock = threading.RLock()
        self.commits = 0
        self.largest_commit = 0
        #: Called with the attempt number before (may raise Crash/FakeError) each commit.
        self.before: Callable[[int], None] = lambda attempt: None
        self.after: Callable[[int], None] = lambda attempt: None
        self.attempts = 0

    def bindings(self) -> Any:
        return SimpleNamespace(open=lambda cluster_file: SimpleNamespace(
            create_transaction=lambda: Transaction(self)), FDBError=FakeError,
            StreamingMode=SimpleNamespace(want_all=-2, iterator=-1))


class Transaction:
    """Serializable, read-your-writes, with FoundationDB's limits on keys, values and size."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.options = SimpleNamespace(set_timeout=lambda ms: None,
                                       set_retry_limit=self._set_retry_limit)
        self.retries, self.retry_limit = 0, 0
        self._begin()

    def _set_retry_limit(self, limit: int) -> None:
        self.retry_limit = limit

    def _begin(self) -> None:
        with self.cluster.lock:
            self.view = dict(self.cluster.data)
            self.read_version = len(self.cluster.history)
        self.reads: list[Span] = []
        self.writes: list[Span] = []
        self.ops: list[tuple[str, bytes, bytes]] = []
        self.size = 0

    def get_read_version(self) -> Ready:
        return Ready(self.read_version)

    def get(self, key: bytes) -> Ready:
        self.reads.append((key, key + b"\x00"))
        return Ready(self.view.get(key))

    def get_range(self, begin: bytes, end: bytes, limit: int = 0, reverse: bool = False,
                  streaming_mode: int = -1) -> list[Pair]:
        assert isinstance(begin, bytes) and isinstance(end, bytes) and not reverse
        self.reads.append((begin, end))
        rows = [Pair(k, self.view[k]) for k in sorted(self.view) if begin <= k < end]
        return rows[:limit] if limit else rows

    def set(self, key: bytes, value: bytes) -> None:
        if len(key) > 10_000 or len(value) > 100_000:
            raise FakeError(2102 if len(key) > 10_000 else 2103)
        self.view[key] = value
        self.ops.append(("set", key, value))
        self.writes.append((key, key + b"\x00"))
        self.size += 2 * len(key) + len(value)

    def clear(self, key: bytes) -> None:
        self.clear_range(key, key + b"\x00")

    def clear_range(self, begin: bytes, end: bytes) -> None:
        for key in [k for k in self.view if begin <= k < end]:
            del self.view[key]
        self.ops.append(("clear", begin, end))
        self.writes.append((begin, end))
        self.size += 2 * (len(begin) + len(end))

    def commit(self) -> Ready:
        cluster = self.cluster
        if self.size > 10_000_000:
            return Ready(error=FakeError(2101))
        with cluster.lock:
            cluster.attempts += 1
            cluster.before(cluster.attempts)
            if any(_overlap(self.reads, spans) for spans in cluster.history[self.read_version:]):
                return Ready(error=FakeError(1020))
            if self.ops:
                self._apply()
            cluster.after(cluster.attempts)
        return Ready()

    def _apply(self) -> None:
        cluster = self.cluster
        for op, key, value in self.ops:
            if op == "set":
                cluster.data[key] = value
            else:
                for stored in [k for k in cluster.data if key <= k < value]:
                    del cluster.data[stored]
        cluster.history.append(self.writes)
        cluster.commits += 1
        cluster.largest_commit = max(cluster.largest_commit, self.size)

    def on_error(self, error: FakeError) -> Ready:
        if error.code in FakeError.RETRYABLE and self.retries < self.retry_limit:
            self.retries += 1
            self._begin()
            return Ready()
        return Ready(error=error)
