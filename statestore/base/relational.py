"""The epoch-versioned store on a relational database (SQLite and PostgreSQL).

Four tables hold everything:

* ``spate_pipelines`` — one row per (tenant, pipeline): the last committed
  epoch, the epoch being written (``pending_epoch``) and the GC floor.  Every
  epoch transition locks this row, which serialises concurrent committers.
* ``spate_manifest`` — the key-group ranges of the pending epoch, each marked
  done when its writer committed.
* ``spate_state`` — versions: ``(operator, key group, user key, epoch) →
  value`` (NULL value: a deletion).
* ``spate_epochs`` — the metadata committed with each epoch.

A writer's versions are durable when it commits but invisible: readers take,
per key, the newest version at or below the last committed epoch.  Publishing
epoch N is one small transaction that checks the manifest and moves
``last_epoch`` to N — the epoch appears whole or not at all.

Backends supply the connection, the DDL and the transaction/locking details;
the SQL here is written with ``?`` placeholders and is portable between the two.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from spate.statestore import base, encoding
from spate.statestore.errors import (
    EpochNotBegunError,
    EpochUnavailableError,
    IncompleteEpochError,
    KeyGroupOutOfRangeError,
    OutOfOrderEpochError,
)
from spate.statestore.keys import check_key_ranges, pack_key, prefix_bounds, unpack_key

_LIVE_VERSIONS = """
    SELECT key_group, user_key, value, epoch FROM (
        SELECT key_group, user_key, value, epoch, ROW_NUMBER() OVER (
            PARTITION BY operator, key_group, user_key ORDER BY epoch DESC) AS newest
        FROM spate_state
        WHERE pipeline_id = ? AND operator = ? AND key_group >= ? AND key_group < ?
          AND epoch <= ? {prefix}
    ) AS versions WHERE newest = 1 AND value IS NOT NULL
    ORDER BY key_group, user_key
"""

_OPERATOR_SIZES = """
    SELECT operator, COUNT(DISTINCT key_group), COUNT(*), COALESCE(SUM(LENGTH(value)), 0)
    FROM (
        SELECT operator, key_group, value, ROW_NUMBER() OVER (
            PARTITION BY operator, key_group, user_key ORDER BY epoch DESC) AS newest
        FROM spate_state WHERE pipeline_id = ? AND epoch <= ?
    ) AS versions WHERE newest = 1 AND value IS NOT NULL
    GROUP BY operator ORDER BY operator
"""

_DELETE_SUPERSEDED = """
    DELETE FROM spate_state WHERE pipeline_id = ? AND epoch < ? AND EXISTS (
        SELECT 1 FROM spate_state AS newer
        WHERE newer.pipeline_id = spate_state.pipeline_id
          AND newer.operator = spate_state.operator
          AND newer.key_group = spate_state.key_group
          AND newer.user_key = spate_state.user_key
          AND newer.epoch > spate_state.epoch AND newer.epoch <= ?)
    RETURNING LENGTH(value)
"""

_UPSERT = """
    INSERT INTO spate_state (pipeline_id, operator, key_group, user_key, epoch, value)
    VALUES (?, ?, ?, ?, ?, ?)
    ON CONFLICT (pipeline_id, operator, key_group, user_key, epoch)
    DO UPDATE SET value = excluded.value
"""


def schema(*, integer: str, blob: str, serial_key: str, table_options: str = "") -> str:
    """The store's tables in one dialect: its epoch and counter type (``integer``), its byte
    string type (``blob``), its auto-numbered primary key (``serial_key``) and what follows
    the state table (``table_options``)."""
    return f"""
CREATE TABLE IF NOT EXISTS spate_pipelines (
    id {serial_key},
    tenant TEXT NOT NULL, pipeline TEXT NOT NULL,
    last_epoch {integer}, pending_epoch {integer}, gc_floor {integer},
    UNIQUE (tenant, pipeline));
CREATE TABLE IF NOT EXISTS spate_manifest (
    pipeline_id {integer} NOT NULL, epoch {integer} NOT NULL,
    first_group INTEGER NOT NULL, end_group INTEGER NOT NULL, done INTEGER NOT NULL,
    PRIMARY KEY (pipeline_id, epoch, first_group));
CREATE TABLE IF NOT EXISTS spate_epochs (
    pipeline_id {integer} NOT NULL, epoch {integer} NOT NULL, metadata {blob} NOT NULL,
    PRIMARY KEY (pipeline_id, epoch));
CREATE TABLE IF NOT EXISTS spate_state (
    pipeline_id {integer} NOT NULL, operator TEXT NOT NULL, key_group INTEGER NOT NULL,
    user_key {blob} NOT NULL, epoch {integer} NOT NULL, value {blob},
    PRIMARY KEY (pipeline_id, operator, key_group, user_key, epoch)){table_options};
"""


class Cursor(Protocol):
    """The part of a DB-API cursor the relational store uses."""

    @property
    def rowcount(self) -> int: ...

    def execute(self, sql: Any, params: Sequence[Any] = ...) -> Any: ...

    def executemany(self, sql: Any, params: Sequence[Sequence[Any]]) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class RelationalStateStore(base.StateStore):
    """A store on one database connection, shared by its pipelines under a lock."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.lock = threading.RLock()

    # -- what a backend supplies --

    @abstractmethod
    def transaction(self, write: bool) -> AbstractContextManager[Cursor]:
        """A transaction; ``write`` transactions must not interleave with other writers'
        epoch transitions of the same pipeline (see :meth:`lock_pipeline`)."""

    @abstractmethod
    def lock_pipeline(self, cursor: Cursor, pipeline_id: int, exclusive: bool) -> None:
        """Lock a pipeline's row for the rest of the transaction."""

    def sql(self, text: str) -> str:
        """Adapt portable SQL (``?`` placeholders) to the driver."""
        return text

    # -- shared --

    def insert_versions(self, cursor: Cursor, rows: list[tuple[Any, ...]]) -> None:
        """Upsert ``(pipeline_id, operator, key_group, user_key, epoch, value)`` rows."""
        cursor.executemany(self.sql(_UPSERT), rows)

    def run(self, cursor: Cursor, text: str, params: Sequence[Any] = ()) -> Cursor:
        cursor.execute(self.sql(text), params)
        return cursor

    def pipeline(self, tenant: str, pipeline: str) -> base.PipelineState:
        return RelationalPipelineState(self, tenant, pipeline)

    def pipelines(self, tenant: str | None = None) -> list[tuple[str, str]]:
        with self.transaction(write=False) as cur:
            if tenant is None:
                self.run(cur, "SELECT tenant, pipeline FROM spate_pipelines "
                              "ORDER BY tenant, pipeline")
            else:
                self.run(cur, "SELECT tenant, pipeline FROM spate_pipelines WHERE tenant = ? "
                              "ORDER BY pipeline", (tenant,))
            return [(row[0], row[1]) for row in cur.fetchall()]


class RelationalPipelineState(base.PipelineState):
    """One pipeline's versions in the relational tables."""

    def __init__(self, store: RelationalStateStore, tenant: str, pipeline: str) -> None:
        self.store = store
        self.tenant = tenant
        self.pipeline = pipeline
        self._id: int | None = None

    @property
    def store_url(self) -> str:
        return self.store.url

    # -- bookkeeping --

    def pipeline_id(self, cur: Cursor) -> int:
        """The pipeline's row id, creating the row on first write."""
        found = self.existing_id(cur)
        if found is None:
            run = self.store.run
            run(cur, "INSERT INTO spate_pipelines (tenant, pipeline) VALUES (?, ?) "
                     "ON CONFLICT (tenant, pipeline) DO NOTHING", (self.tenant, self.pipeline))
            found = self.existing_id(cur)
            assert found is not None
            self._id = None  # not cached: this transaction, and the insert, may roll back
        return found

    def existing_id(self, cur: Cursor) -> int | None:
        """The pipeline's row id, or None if it never wrote (reads create nothing)."""
        if self._id is None:
            self.store.run(cur, "SELECT id FROM spate_pipelines WHERE tenant = ? "
                                "AND pipeline = ?", (self.tenant, self.pipeline))
            row = cur.fetchone()
            self._id = None if row is None else int(row[0])
        return self._id

    def _epochs(self, cur: Cursor, pid: int | None,
                ) -> tuple[int | None, int | None, int | None]:
        """(last committed, pending, gc floor) of the pipeline."""
        if pid is None:
            return None, None, None
        self.store.run(cur, "SELECT last_epoch, pending_epoch, gc_floor FROM spate_pipelines "
                            "WHERE id = ?", (pid,))
        row = cur.fetchone()
        return (row[0], row[1], row[2]) if row is not None else (None, None, None)

    def _read_epoch(self, cur: Cursor, pid: int | None, epoch: int | None) -> int | None:
        last, _, floor = self._epochs(cur, pid)
        if epoch is None:
            return last
        if last is None or epoch > last:
            raise EpochUnavailableError(
                f"epoch {epoch} of {self.tenant}/{self.pipeline} is not committed "
                f"(the last committed epoch is {last}); read the last committed epoch instead")
        if floor is not None and epoch < floor:
            raise EpochUnavailableError(
                f"epoch {epoch} of {self.tenant}/{self.pipeline} was garbage-collected "
                f"(the oldest readable epoch is {floor})")
        return epoch

    # -- reads --

    def last_committed_epoch(self) -> int | None:
        with self.store.transaction(write=False) as cur:
            return self._epochs(cur, self.existing_id(cur))[0]

    def epoch_metadata(self, epoch: int | None = None) -> dict[str, Any]:
        with self.store.transaction(write=False) as cur:
            pid = self.existing_id(cur)
            wanted = self._read_epoch(cur, pid, epoch)
            if wanted is None:
                return {}
            self.store.run(cur, "SELECT metadata FROM spate_epochs WHERE pipeline_id = ? "
                                "AND epoch = ?", (pid, wanted))
            row = cur.fetchone()
        return dict(encoding.decode(bytes(row[0]))) if row is not None else {}

    def get(self, operator: str, key_group: int, user_key: base.UserKey, *,
            epoch: int | None = None) -> bytes | None:
        return self.get_many(operator, key_group, [user_key], epoch=epoch)[0]

    def get_many(self, operator: str, key_group: int, user_keys: Sequence[base.UserKey], *,
                 epoch: int | None = None) -> list[bytes | None]:
        packed = [pack_key(k) for k in user_keys]
        found: dict[bytes, bytes] = {}
        with self.store.transaction(write=False) as cur:
            pid = self.existing_id(cur)
            wanted = self._read_epoch(cur, pid, epoch)
            if wanted is None:
                return [None] * len(user_keys)
            for start in range(0, len(packed), 500):
                chunk = packed[start:start + 500]
                marks = ", ".join("?" * len(chunk))
                self.store.run(cur, _LIVE_VERSIONS.format(prefix=f"AND user_key IN ({marks})"),
                               (pid, operator, key_group, key_group + 1, wanted, *chunk))
                found.update((bytes(row[1]), bytes(row[2])) for row in cur.fetchall())
        return [found.get(k) for k in packed]

    def scan(self, operator: str, key_groups: range, prefix: base.UserKey = (), *,
             epoch: int | None = None) -> Iterator[tuple[int, base.UserKey, bytes]]:
        start, stop = prefix_bounds(prefix)
        condition, params = "", []
        if prefix:
            condition, params = "AND user_key >= ? AND user_key < ?", [start, stop]
        with self.store.transaction(write=False) as cur:
            pid = self.existing_id(cur)
            wanted = self._read_epoch(cur, pid, epoch)
            if wanted is None:
                return iter(())
            self.store.run(cur, _LIVE_VERSIONS.format(prefix=condition),
                           (pid, operator, key_groups.start, key_groups.stop, wanted, *params))
            rows = cur.fetchall()
        return ((int(r[0]), unpack_key(bytes(r[1])), bytes(r[2])) for r in rows)

    # -- writes --

    def begin_epoch(self, epoch: int, key_group_ranges: Sequence[range]) -> None:
        check_key_ranges(key_group_ranges)
        with self.store.transaction(write=True) as cur:
            pid = self.pipeline_id(cur)
            self.store.lock_pipeline(cur, pid, exclusive=True)
            last, _, _ = self._epochs(cur, pid)
            if last is not None and epoch <= last:
                return  # a replay: epoch is durable already
            if last is not None and epoch > last + 1:
                raise OutOfOrderEpochError(
                    f"cannot begin epoch {epoch} of {self.tenant}/{self.pipeline}: the last "
                    f"committed epoch is {last}, so the next must be {last + 1}")
            self._discard(cur, pid, last)
            self.store.run(cur, "UPDATE spate_pipelines SET pending_epoch = ? WHERE id = ?",
                           (epoch, pid))
            cur.executemany(self.store.sql(
                "INSERT INTO spate_manifest (pipeline_id, epoch, first_group, end_group, done) "
                "VALUES (?, ?, ?, ?, 0)"),
                [(pid, epoch, r.start, r.stop) for r in key_group_ranges])

    def writer(self, epoch: int, key_groups: range) -> base.EpochWriter:
        return base.BufferedEpochWriter(epoch, key_groups, self.write_versions)

    def commit_epoch(self, epoch: int, metadata: base.EpochMetadata) -> None:
        blob = encoding.encode(dict(metadata))
        with self.store.transaction(write=True) as cur:
            pid = self.pipeline_id(cur)
            self.store.lock_pipeline(cur, pid, exclusive=True)
            last = self._writable(cur, pid, epoch, "commit")
            if last is not None and epoch <= last:
                return
            self.store.run(cur, "SELECT first_group, end_group FROM spate_manifest "
                                "WHERE pipeline_id = ? AND epoch = ? AND done = 0 "
                                "ORDER BY first_group", (pid, epoch))
            missing = [f"{row[0]}..{row[1] - 1}" for row in cur.fetchall()]
            if missing:
                raise IncompleteEpochError(
                    f"cannot publish epoch {epoch} of {self.tenant}/{self.pipeline}: the "
                    f"writers of key groups {', '.join(missing)} have not committed")
            self.store.run(cur, "INSERT INTO spate_epochs (pipeline_id, epoch, metadata) "
                                "VALUES (?, ?, ?)", (pid, epoch, blob))
            self.store.run(cur, "UPDATE spate_pipelines SET last_epoch = ?, pending_epoch = NULL "
                                "WHERE id = ?", (epoch, pid))
            self.store.run(cur, "DELETE FROM spate_manifest WHERE pipeline_id = ? "
                                "AND epoch <= ?", (pid, epoch))

    def _writable(self, cur: Cursor, pid: int, epoch: int,
                  action: str) -> int | None:
        """Check ``epoch`` is the pending one (or a replay); returns the last committed."""
        last, pending, _ = self._epochs(cur, pid)
        if last is not None and epoch <= last:
            return last
        if last is not None and epoch > last + 1:
            raise OutOfOrderEpochError(
                f"cannot {action} epoch {epoch} of {self.tenant}/{self.pipeline}: the last "
                f"committed epoch is {last}, so the next must be {last + 1}")
        if pending != epoch:
            raise EpochNotBegunError(
                f"cannot {action} epoch {epoch} of {self.tenant}/{self.pipeline}: it was not "
                f"begun or was discarded; call begin_epoch({epoch}, ranges) first")
        return last

    def write_versions(self, epoch: int, key_groups: range, writes: base.StagedWrites) -> None:
        """Stage one writer's versions and mark its manifest range done, in one transaction."""
        with self.store.transaction(write=True) as cur:
            pid = self.pipeline_id(cur)
            self.store.lock_pipeline(cur, pid, exclusive=False)
            last = self._writable(cur, pid, epoch, "write")
            if last is not None and epoch <= last:
                return  # a replayed epoch's writes are already durable
            self.store.insert_versions(
                cur, [(pid, op, group, key, epoch, value)
                      for (op, group, key), value in writes.items()])
            self.store.run(cur, "UPDATE spate_manifest SET done = 1 WHERE pipeline_id = ? "
                                "AND epoch = ? AND first_group = ? AND end_group = ?",
                           (pid, epoch, key_groups.start, key_groups.stop))
            if cur.rowcount != 1:
                raise KeyGroupOutOfRangeError(
                    f"key groups {key_groups.start}..{key_groups.stop - 1} are not a range of "
                    f"epoch {epoch}'s manifest; use a range given to begin_epoch")

    def discard_uncommitted(self) -> None:
        with self.store.transaction(write=True) as cur:
            pid = self.pipeline_id(cur)
            self.store.lock_pipeline(cur, pid, exclusive=True)
            self._discard(cur, pid, self._epochs(cur, pid)[0])

    def _discard(self, cur: Cursor, pid: int, last: int | None) -> None:
        above = -1 if last is None else last
        run = self.store.run
        run(cur, "DELETE FROM spate_state WHERE pipeline_id = ? AND epoch > ?", (pid, above))
        run(cur, "DELETE FROM spate_manifest WHERE pipeline_id = ?", (pid,))
        run(cur, "UPDATE spate_pipelines SET pending_epoch = NULL WHERE id = ?", (pid,))

    def gc(self) -> base.GcReport:
        with self.store.transaction(write=True) as cur:
            pid = self.existing_id(cur)
            if pid is None:
                return base.GcReport(0, 0)
            self.store.lock_pipeline(cur, pid, exclusive=True)
            floor = self._epochs(cur, pid)[0]
            if floor is None:
                return base.GcReport(0, 0)
            run = self.store.run
            removed = run(cur, _DELETE_SUPERSEDED, (pid, floor, floor)).fetchall()
            removed += run(cur, "DELETE FROM spate_state WHERE pipeline_id = ? AND epoch <= ? "
                                "AND value IS NULL RETURNING 0", (pid, floor)).fetchall()
            run(cur, "DELETE FROM spate_epochs WHERE pipeline_id = ? AND epoch < ?", (pid, floor))
            run(cur, "UPDATE spate_pipelines SET gc_floor = ? WHERE id = ?", (floor, pid))
        return base.GcReport(len(removed), sum(int(row[0] or 0) for row in removed))

    def describe(self) -> base.PipelineInfo:
        with self.store.transaction(write=False) as cur:
            pid = self.existing_id(cur)
            last = self._epochs(cur, pid)[0]
            operators: list[base.OperatorInfo] = []
            metadata: dict[str, Any] = {}
            if last is not None:
                self.store.run(cur, _OPERATOR_SIZES, (pid, last))
                operators = [base.OperatorInfo(r[0], int(r[1]), int(r[2]), int(r[3]))
                             for r in cur.fetchall()]
                self.store.run(cur, "SELECT metadata FROM spate_epochs WHERE pipeline_id = ? "
                                    "AND epoch = ?", (pid, last))
                row = cur.fetchone()
                metadata = dict(encoding.decode(bytes(row[0]))) if row else {}
        return base.PipelineInfo(self.tenant, self.pipeline, last, operators, metadata)

    def drop(self) -> None:
        with self.store.transaction(write=True) as cur:
            pid = self.existing_id(cur)
            if pid is None:
                return
            self.store.lock_pipeline(cur, pid, exclusive=True)
            for table in ("spate_state", "spate_manifest", "spate_epochs"):
                self.store.run(cur, f"DELETE FROM {table} WHERE pipeline_id = ?", (pid,))
            self.store.run(cur, "DELETE FROM spate_pipelines WHERE id = ?", (pid,))
        self._id = None

