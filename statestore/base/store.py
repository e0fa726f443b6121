"""The state-store contract every backend implements and the engine builds on.

State is addressed by ``(tenant, pipeline, operator, key group, user key)``.
A :class:`StateStore` is one connection to a backend (picked by URL);
:meth:`StateStore.pipeline` scopes it to one tenant's pipeline.

Versioning model
----------------
Every write belongs to an *epoch* (one Spark micro-batch).  Reads see the
state *as of the last committed epoch*: for each key, its newest version whose
epoch is at most that one.  Writes for epoch N are staged by one
:class:`EpochWriter` per key-group range (one per task) and stay invisible
until :meth:`PipelineState.commit_epoch` publishes N with one small final
write, after checking that every range named in the epoch's manifest
(:meth:`PipelineState.begin_epoch`) has committed its writer.  So an epoch
becomes visible whole or not at all, however many tasks wrote it.

Rules the conformance suite checks for every backend:

* ``begin_epoch(N)`` needs ``N == last + 1`` (or ``N <= last``: a replay);
  ``N > last + 1`` raises :class:`OutOfOrderEpochError`.  It first discards
  anything staged for epochs above ``last`` by a crashed attempt.
* A replay (``N <= last``) is accepted and changes nothing: writers and the
  commit become no-ops, because epoch N is already durable.
* ``commit_epoch`` raises :class:`IncompleteEpochError` while a manifest
  range has not committed its writer.
* ``gc()`` drops versions superseded at or before the last committed epoch;
  reading an epoch older than that afterwards raises
  :class:`EpochUnavailableError`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: A user key: a tuple of scalars, encoded order-preservingly by ``spate.statestore.keys``.
UserKey = tuple[Any, ...]

#: Epoch metadata is a small msgpack-able mapping: watermarks, source offsets,
#: sink commit markers.  Backends store it verbatim with the epoch.
EpochMetadata = Mapping[str, Any]


@dataclass(frozen=True)
class GcReport:
    """What one garbage collection removed."""

    versions_removed: int
    bytes_removed: int


@dataclass(frozen=True)
class OperatorInfo:
    """Size of one operator's state as of the last committed epoch."""

    operator: str
    key_groups: int
    keys: int
    value_bytes: int


@dataclass(frozen=True)
class PipelineInfo:
    """What ``spate state inspect`` prints for one pipeline."""

    tenant: str
    pipeline: str
    last_committed_epoch: int | None
    operators: list[OperatorInfo] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)


class EpochWriter(ABC):
    """Stages one task's writes for one epoch and one key-group range."""

    epoch: int
    key_groups: range

    @abstractmethod
    def put(self, operator: str, key_group: int, user_key: UserKey, value: bytes) -> None:
        """Stage ``value`` for the key; raises ``KeyGroupOutOfRangeError`` outside the range."""

    @abstractmethod
    def delete(self, operator: str, key_group: int, user_key: UserKey) -> None:
        """Stage a deletion (a tombstone version) of the key."""

    @abstractmethod
    def commit(self) -> None:
        """Make the staged writes durable and mark this range done in the manifest.

        The writes stay invisible to readers until ``commit_epoch`` publishes
        the epoch.  Calling ``commit`` twice is harmless.
        """


class PipelineState(ABC):
    """One pipeline's versioned state inside a store."""

    tenant: str
    pipeline: str

    @property
    def scope_id(self) -> str:
        """Identifies this pipeline in this store; local caches key on it."""
        return f"{self.store_url}|{self.tenant}|{self.pipeline}"

    @property
    @abstractmethod
    def store_url(self) -> str:
        """The URL of the store, with any password removed."""

    # -- reads (as of the last committed epoch unless ``epoch`` is given) --

    @abstractmethod
    def last_committed_epoch(self) -> int | None:
        """The newest published epoch, or ``None`` before the first commit."""

    @abstractmethod
    def epoch_metadata(self, epoch: int | None = None) -> dict[str, Any]:
        """The metadata committed with ``epoch`` (default: the last); ``{}`` if none."""

    @abstractmethod
    def get(
        self, operator: str, key_group: int, user_key: UserKey, *, epoch: int | None = None
    ) -> bytes | None:
        """One value, or ``None`` if absent or deleted."""

    @abstractmethod
    def get_many(
        self,
        operator: str,
        key_group: int,
        user_keys: Sequence[UserKey],
        *,
        epoch: int | None = None,
    ) -> list[bytes | None]:
        """Several values of one key group, in the order asked."""

    @abstractmethod
    def scan(
        self,
        operator: str,
        key_groups: range,
        prefix: UserKey = (),
        *,
        epoch: int | None = None,
    ) -> Iterator[tuple[int, UserKey, bytes]]:
        """Live ``(key group, user key, value)`` in key order whose user keys start with
        ``prefix``."""

    def read_group(
        self, operator: str, key_group: int, *, epoch: int | None = None
    ) -> Mapping[UserKey, bytes]:
        """Every live key of one key group: the unit the local cache holds."""
        return {key: value for _, key, value in
                self.scan(operator, range(key_group, key_group + 1), epoch=epoch)}

    # -- writes --

    @abstractmethod
    def begin_epoch(self, epoch: int, key_group_ranges: Sequence[range]) -> None:
        """Record epoch's manifest: the ranges whose writers must commit before publishing."""

    @abstractmethod
    def writer(self, epoch: int, key_groups: range) -> EpochWriter:
        """A writer for one manifest range of a begun epoch."""

    @abstractmethod
    def commit_epoch(self, epoch: int, metadata: EpochMetadata) -> None:
        """Publish ``epoch`` with its metadata, atomically."""

    @abstractmethod
    def discard_uncommitted(self) -> None:
        """Remove everything staged for epochs after the last committed one."""

    @abstractmethod
    def gc(self) -> GcReport:
        """Remove versions superseded at or before the last committed epoch."""

    @abstractmethod
    def describe(self) -> PipelineInfo:
        """Operators, key groups, sizes and the last epoch, for inspection."""

    @abstractmethod
    def drop(self) -> None:
        """Delete all of this pipeline's state and epochs (a restart without state)."""


class StateStore(ABC):
    """A connection to one backend, opened by ``spate.statestore.open_store(url)``."""

    url: str

    @abstractmethod
    def pipeline(self, tenant: str, pipeline: str) -> PipelineState:
        """The state of one tenant's pipeline."""

    @abstractmethod
    def pipelines(self, tenant: str | None = None) -> list[tuple[str, str]]:
        """``(tenant, pipeline)`` pairs that have state here."""

    @abstractmethod
    def close(self) -> None:
        """Release connections."""

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
