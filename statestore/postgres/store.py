"""The PostgreSQL backend: a real remote store shared by every host of a job.

Every epoch transition is one transaction that locks the pipeline's row
(``FOR UPDATE``; writers take ``FOR SHARE``, so writers of different key
groups run side by side while a publish waits for them), which makes it safe
under any number of concurrent committers in any number of processes.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from spate.statestore.base.relational import Cursor, RelationalStateStore, schema
from spate.statestore.errors import (
    BackendUnavailableError,
    StateStoreError,
    StateStoreUnreachableError,
)

_SCHEMA = schema(integer="BIGINT", blob="BYTEA", serial_key="BIGSERIAL PRIMARY KEY")

#: Any constant: serialises concurrent schema creation across processes.
_SCHEMA_LOCK_ID = 0x5A7E_5707
_CONNECT_TIMEOUT_S = 10
#: Below this many rows a plain multi-row upsert is as fast as COPY.
_COPY_FROM_ROWS = 200


def redact(url: str) -> str:
    """The URL with its password removed, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    user = f"{parts.username}:***@" if parts.username else ""
    return urlunsplit((parts.scheme, user + host, parts.path, parts.query, parts.fragment))


class PostgresStateStore(RelationalStateStore):
    """The state of any number of pipelines in one PostgreSQL database."""

    def __init__(self, url: str) -> None:
        super().__init__(redact(url))
        self._dsn = url.replace("postgres://", "postgresql://", 1)
        self._connection = self._connect()
        self._create_schema()

    def _connect(self) -> psycopg.Connection[tuple[object, ...]]:
        try:
            return psycopg.connect(self._dsn, connect_timeout=_CONNECT_TIMEOUT_S,
                                   application_name="spate-statestore")
        except psycopg.OperationalError as error:
            raise _unavailable(self.url, error) from None
        except psycopg.ProgrammingError as error:
            raise BackendUnavailableError(
                f"the state URL {self.url} is not a valid PostgreSQL URL ({error}); write "
                f"postgresql://user[:password]@host[:port]/database") from None

    def _create_schema(self) -> None:
        with self.transaction(write=True) as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK_ID,))
            cur.execute(_SCHEMA)

    def sql(self, text: str) -> str:
        return text.replace("?", "%s")

    @contextmanager
    def transaction(self, write: bool) -> Iterator[Cursor]:
        del write  # PostgreSQL's row locks (lock_pipeline) order the writers
        with self.lock:
            try:
                with self._connection.transaction(), self._connection.cursor() as cursor:
                    yield cursor
            except psycopg.OperationalError as error:
                self._reconnect_if_broken()
                raise _unavailable(self.url, error) from None
            except psycopg.errors.UndefinedTable as error:
                raise StateStoreError(f"the state tables in {self.url} are missing ({error}); "
                                      f"reopen the store to create them") from None

    def _reconnect_if_broken(self) -> None:
        """Replace a broken connection, so the next transaction can succeed."""
        if self._connection.closed or self._connection.broken:
            try:
                self._connection = self._connect()
            except BackendUnavailableError:
                pass  # still down: the next transaction reports it

    def insert_versions(self, cursor: Cursor, rows: list[tuple[Any, ...]]) -> None:
        """COPY into a temporary table, then one upsert: several times faster than
        row-by-row inserts for the thousands of keys an epoch writes."""
        if len(rows) < _COPY_FROM_ROWS:
            super().insert_versions(cursor, rows)
            return
        cursor.execute("CREATE TEMPORARY TABLE IF NOT EXISTS spate_incoming "
                       "(LIKE spate_state) ON COMMIT DELETE ROWS")
        with cursor.copy("COPY spate_incoming (pipeline_id, operator, key_group, user_key, "  # type: ignore[attr-defined]
                         "epoch, value) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        cursor.execute("INSERT INTO spate_state SELECT * FROM spate_incoming "
                       "ON CONFLICT (pipeline_id, operator, key_group, user_key, epoch) "
                       "DO UPDATE SET value = excluded.value")

    def lock_pipeline(self, cursor: Cursor, pipeline_id: int, exclusive: bool) -> None:
        mode = "UPDATE" if exclusive else "SHARE"
        cursor.execute(f"SELECT 1 FROM spate_pipelines WHERE id = %s FOR {mode}", (pipeline_id,))

    def close(self) -> None:
        with self.lock:
            self._connection.close()

    # Shipped to another process (a Spark task) as its URL, credentials included.
    def __reduce__(self) -> tuple[Any, ...]:
        return (PostgresStateStore, (self._dsn,))


def _unavailable(url: str, error: psycopg.OperationalError) -> BackendUnavailableError:
    reason = str(error).strip().splitlines()[-1] if str(error).strip() else repr(error)
    text = str(error)
    if "password authentication failed" in text or "no password supplied" in text \
            or ("role" in text and "does not exist" in text):
        return BackendUnavailableError(
            f"PostgreSQL refused the credentials in the state URL {url} ({reason}); check the "
            f"user name and password")
    if "database" in text and "does not exist" in text:
        return BackendUnavailableError(
            f"the database named in the state URL {url} does not exist ({reason}); create it "
            f"or name another")
    return StateStoreUnreachableError(
        f"cannot reach PostgreSQL for the state URL {url} ({reason}); check that the server "
        f"is running and the host and port are right")
