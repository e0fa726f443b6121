"""The embedded backend: one SQLite file in WAL mode, for one machine.

Several processes of the same machine may share the file (SQLite's locking
serialises writers; ``BEGIN IMMEDIATE`` takes the write lock up front, so an
epoch transition never upgrades a read lock and deadlocks).  The store
remembers the host that opened it; a copy shipped to another host — a Spark
executor elsewhere — refuses to run, because that host would see a different
file or none.
"""

from __future__ import annotations

import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from spate.statestore.base.relational import Cursor, RelationalStateStore, schema
from spate.statestore.errors import BackendUnavailableError, EmbeddedStoreNotShareableError

_SCHEMA = """
CREATE TABLE IF NOT EXISTS spate_store_info (
    name TEXT PRIMARY KEY, value TEXT NOT NULL);""" + schema(
    integer="INTEGER", blob="BLOB", serial_key="INTEGER PRIMARY KEY AUTOINCREMENT",
    table_options=" WITHOUT ROWID")

_BUSY_TIMEOUT_S = 60.0


def path_of(url: str) -> Path:
    """``sqlite:///relative/file.db`` or ``sqlite:////absolute/file.db``."""
    path = url.removeprefix("sqlite:///")
    if not path or path == url:
        raise BackendUnavailableError(
            f"'{url}' has no file: write sqlite:///path/to/state.db (three slashes, then "
            f"the path; four for an absolute path)")
    return Path(path)


class SqliteStateStore(RelationalStateStore):
    """The state of any number of pipelines in one SQLite file."""

    def __init__(self, url: str, *, origin_host: str | None = None) -> None:
        super().__init__(url)
        self.path = path_of(url)
        self.origin_host = origin_host or socket.gethostname()
        self._check_host()
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        with self.transaction(write=True) as cur:
            cur.execute("INSERT INTO spate_store_info (name, value) VALUES ('created_on', ?) "
                        "ON CONFLICT (name) DO NOTHING", (self.origin_host,))

    def _check_host(self) -> None:
        here = socket.gethostname()
        if here != self.origin_host:
            raise EmbeddedStoreNotShareableError(
                f"the embedded state store {self.url} belongs to host {self.origin_host!r} but "
                f"is used on {here!r} (a Spark executor on another machine?): the sqlite "
                f"backend serves one machine only; pick a remote backend for distributed "
                f"runs, e.g. --state postgresql://user@host/db or --state fdb://")

    def _connection(self) -> sqlite3.Connection:
        """One connection per thread: sqlite3 connections must not be shared mid-transaction."""
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = self._connect()
            self._local.connection = connection
            with self.lock:
                self._connections.append(connection)
        return connection

    def _connect(self) -> sqlite3.Connection:
        deadline = time.monotonic() + _BUSY_TIMEOUT_S
        while True:
            try:
                return self._open()
            except sqlite3.OperationalError as error:
                # Two jobs of a tenant opening its new store at once race to switch it to
                # WAL; SQLite answers "locked" at once (no busy handler) to avoid a deadlock
                # between the two, so the loser retries until the winner is done.
                if not _is_busy(error) or time.monotonic() > deadline:
                    raise self._unavailable(error) from error
                time.sleep(0.05)
            except (sqlite3.Error, OSError) as error:
                raise self._unavailable(error) from error

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S,
                                     isolation_level=None, check_same_thread=False)
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            # FULL: a commit survives power loss, not only a killed process.  The store
            # commits a few small transactions per epoch, so the fsync cost is small.
            connection.execute("PRAGMA synchronous = FULL")
            connection.executescript(_SCHEMA)
        except BaseException:
            connection.close()
            raise
        return connection

    def _unavailable(self, error: Exception) -> BackendUnavailableError:
        return BackendUnavailableError(
            f"cannot open the embedded state store {self.path}: {error}; check that the "
            f"directory is writable and the file is an SQLite database")

    @contextmanager
    def transaction(self, write: bool) -> Iterator[Cursor]:
        connection = self._connection()
        cursor = connection.cursor()
        cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield cursor
        except BaseException:
            connection.rollback()
            raise
        else:
            connection.commit()
        finally:
            cursor.close()

    def lock_pipeline(self, cursor: Cursor, pipeline_id: int, exclusive: bool) -> None:
        """``BEGIN IMMEDIATE`` already holds the database's write lock."""

    def close(self) -> None:
        with self.lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
        self._local = threading.local()

    # Shipped to another process (a Spark task) as its URL and the host it belongs to.
    def __reduce__(self) -> tuple[Any, ...]:
        return (_reopen, (self.url, self.origin_host))


def _is_busy(error: sqlite3.OperationalError) -> bool:
    message = str(error)
    return "locked" in message or "busy" in message


def _reopen(url: str, origin_host: str) -> SqliteStateStore:
    return SqliteStateStore(url, origin_host=origin_host)
