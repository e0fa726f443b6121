"""Where the FoundationDB backend keeps each pipeline's state: its key layout.

Every key is a tuple-layer encoding under the store's root (the URL's
``?prefix=``, default ``spate``); ``P`` below is ``(root, "pipeline", tenant,
pipeline)``::

    (root, "registry", tenant, pipeline)           -> b""  lists pipelines()
    P + ("meta",)                                  -> (last, pending, gc floor)
    P + ("epoch", N, chunk)                        -> epoch N's metadata, chunked
    P + ("manifest", N, first_group)               -> (end_group, done, attempt)
    P + ("data", operator, group, key, N, chunk)   -> one chunk of key's version N
    P + ("log", N, group, operator, key)           -> b""  epoch N wrote key

``key`` is the user key packed by :func:`spate.statestore.keys.pack_key`, stored as
one bytes element: the tuple layer keeps bytes in order, so versions sort by
user key exactly as on the other backends, and a user-key prefix is still a
byte range.  Each user key's versions follow each other by epoch, so "newest
version at or below N" is one ordered read.

The ``log`` entries name the keys each epoch wrote.  Discarding an epoch, a
writer retrying its range, and gc visit exactly those keys instead of scanning
the whole state; gc deletes the entries it has processed.  A writer writes only
its own range's manifest entry, versions and log entries, so writers of
different ranges never conflict, while every epoch transition reads and writes
``meta``, which makes FoundationDB serialise them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fdb import tuple as fdb_tuple

from spate.statestore.errors import (
    EpochNotBegunError,
    EpochUnavailableError,
    OutOfOrderEpochError,
    StateStoreError,
)

#: FoundationDB refuses keys longer than this.
MAX_KEY_BYTES = 10_000
#: Headroom for the tuple encoding of the epoch and chunk index of a data key.
_EPOCH_AND_CHUNK_BYTES = 20

#: A byte range ``[begin, end)``.
KeyRange = tuple[bytes, bytes]


@dataclass(frozen=True)
class Meta:
    """A pipeline's epoch bookkeeping (last committed, being written, gc floor), and the
    epoch rules every transaction checks against it."""

    last: int | None = None
    pending: int | None = None
    floor: int | None = None

    def encode(self) -> bytes:
        return bytes(fdb_tuple.pack((self.last, self.pending, self.floor)))

    @classmethod
    def decode(cls, raw: bytes | None) -> Meta:
        if raw is None:
            return cls()
        last, pending, floor = fdb_tuple.unpack(raw)[:3]
        return cls(last, pending, floor)

    def readable(self, epoch: int | None, name: str) -> int | None:
        """The epoch a read sees (default: the last committed), or why it cannot be read."""
        if epoch is None:
            return self.last
        if self.last is None or epoch > self.last:
            raise EpochUnavailableError(
                f"epoch {epoch} of {name} is not committed (the last committed epoch is "
                f"{self.last}); read the last committed epoch instead")
        if self.floor is not None and epoch < self.floor:
            raise EpochUnavailableError(
                f"epoch {epoch} of {name} was garbage-collected (the oldest readable epoch "
                f"is {self.floor})")
        return epoch

    def is_replay(self, epoch: int, action: str, name: str) -> bool:
        """True if ``epoch`` is committed already; raises unless it is the pending one."""
        if self.last is not None and epoch <= self.last:
            return True
        if self.last is not None and epoch > self.last + 1:
            raise OutOfOrderEpochError(next_must_be(action, epoch, self.last, name))
        if self.pending != epoch:
            raise EpochNotBegunError(
                f"cannot {action} epoch {epoch} of {name}: it was not begun or was "
                f"discarded; call begin_epoch({epoch}, ranges) first")
        return False


def next_must_be(action: str, epoch: int, last: int, name: str) -> str:
    return (f"cannot {action} epoch {epoch} of {name}: the last committed epoch is {last}, "
            f"so the next must be {last + 1}")


@dataclass(frozen=True)
class ManifestEntry:
    """One key-group range of an epoch's manifest; ``attempt`` names the writer that owns it."""

    first: int
    end: int
    done: bool
    attempt: bytes | None

    def encode(self) -> bytes:
        return bytes(fdb_tuple.pack((self.end, self.done, self.attempt)))


@dataclass(frozen=True)
class DataKey:
    """A parsed data key: one chunk of one version of one user key."""

    operator: str
    key_group: int
    user_key: bytes
    epoch: int
    chunk: int

    @property
    def identity(self) -> tuple[str, int, bytes]:
        return self.operator, self.key_group, self.user_key


@dataclass(frozen=True)
class LogKey:
    """A parsed log key: epoch ``epoch`` wrote this user key."""

    epoch: int
    key_group: int
    operator: str
    user_key: bytes


def _after(prefix: bytes) -> KeyRange:
    """Every key that extends ``prefix``: tuple-layer type codes never start with 0xff."""
    return prefix, prefix + b"\xff"


def _pack(items: tuple[Any, ...]) -> bytes:
    return bytes(fdb_tuple.pack(items))


def registry_range(root: str, tenant: str | None) -> KeyRange:
    """The registry keys of every pipeline of the store, or of one tenant."""
    scope = (root, "registry") if tenant is None else (root, "registry", tenant)
    return _after(_pack(scope))


def registry_entry(key: bytes) -> tuple[str, str]:
    """``(tenant, pipeline)`` of a registry key."""
    _, _, tenant, pipeline = fdb_tuple.unpack(key)
    return str(tenant), str(pipeline)


class Layout:
    """The keys of one tenant's pipeline under one root."""

    def __init__(self, root: str, tenant: str, pipeline: str) -> None:
        self.registry_key = _pack((root, "registry", tenant, pipeline))
        self.prefix = _pack((root, "pipeline", tenant, pipeline))
        self.meta_key = self.prefix + _pack(("meta",))

    def pipeline_range(self) -> KeyRange:
        return _after(self.prefix)

    # -- epochs and manifests --

    def metadata_key(self, epoch: int, chunk: int) -> bytes:
        return self.prefix + _pack(("epoch", epoch, chunk))

    def metadata_range(self, epoch: int) -> KeyRange:
        return _after(self.prefix + _pack(("epoch", epoch)))

    def metadata_below(self, epoch: int) -> KeyRange:
        """Metadata of every epoch before ``epoch``."""
        return self.prefix + _pack(("epoch",)), self.prefix + _pack(("epoch", epoch))

    def metadata_chunk(self, key: bytes) -> int:
        return int(fdb_tuple.unpack(key, len(self.prefix))[2])

    def manifest_key(self, epoch: int, first_group: int) -> bytes:
        return self.prefix + _pack(("manifest", epoch, first_group))

    def manifest_range(self, epoch: int | None = None) -> KeyRange:
        """The manifest of one epoch, or of all epochs."""
        scope = ("manifest",) if epoch is None else ("manifest", epoch)
        return _after(self.prefix + _pack(scope))

    def manifest_entry(self, key: bytes, value: bytes) -> ManifestEntry:
        first = int(fdb_tuple.unpack(key, len(self.prefix))[2])
        end, done, attempt = fdb_tuple.unpack(value)
        return ManifestEntry(first, int(end), bool(done), attempt)

    # -- versions --

    def group_prefix(self, operator: str, key_group: int) -> bytes:
        return self.prefix + _pack(("data", operator, key_group))

    def data_key(self, operator: str, key_group: int, user_key: bytes, epoch: int,
                 chunk: int) -> bytes:
        return self.group_prefix(operator, key_group) + _pack((user_key, epoch, chunk))

    def data_range(self) -> KeyRange:
        """Every version of every operator."""
        return _after(self.prefix + _pack(("data",)))

    def group_range(self, operator: str, key_group: int, key_prefix: bytes = b"") -> KeyRange:
        """Every version of the group's user keys whose packed form starts with ``key_prefix``."""
        group = self.group_prefix(operator, key_group)
        if not key_prefix:
            return _after(group)
        # The bytes element without its terminator: a byte prefix of every longer key's element.
        return _after(group + _pack((key_prefix,))[:-1])

    def key_versions(self, operator: str, key_group: int, user_key: bytes,
                     through_epoch: int) -> KeyRange:
        """The versions of one user key with epochs at most ``through_epoch``."""
        group = self.group_prefix(operator, key_group)
        return group + _pack((user_key,)), group + _pack((user_key, through_epoch + 1))

    def version_range(self, operator: str, key_group: int, user_key: bytes,
                      epoch: int) -> KeyRange:
        """Every chunk of one version."""
        return _after(self.group_prefix(operator, key_group) + _pack((user_key, epoch)))

    def parse_data_key(self, key: bytes) -> DataKey:
        _, operator, group, user_key, epoch, chunk = fdb_tuple.unpack(key, len(self.prefix))
        return DataKey(operator, group, user_key, epoch, chunk)

    # -- the log of written keys --

    def log_key(self, epoch: int, key_group: int, operator: str, user_key: bytes) -> bytes:
        return self.prefix + _pack(("log", epoch, key_group, operator, user_key))

    def log_of_range(self, epoch: int, key_groups: range) -> KeyRange:
        """What epoch ``epoch`` wrote in a writer's key groups."""
        return (self.prefix + _pack(("log", epoch, key_groups.start)),
                self.prefix + _pack(("log", epoch, key_groups.stop)))

    def log_after(self, epoch: int | None) -> KeyRange:
        """What the epochs after ``epoch`` (all epochs if None) wrote."""
        begin, end = _after(self.prefix + _pack(("log",)))
        if epoch is not None:
            begin = self.prefix + _pack(("log", epoch + 1))
        return begin, end

    def log_through(self, epoch: int) -> KeyRange:
        """What the epochs up to and including ``epoch`` wrote."""
        return self.prefix + _pack(("log",)), self.prefix + _pack(("log", epoch + 1))

    def parse_log_key(self, key: bytes) -> LogKey:
        _, epoch, group, operator, user_key = fdb_tuple.unpack(key, len(self.prefix))
        return LogKey(epoch, group, operator, user_key)

    def fits(self, operator: str, key_group: int, user_key: bytes) -> bool:
        """Whether the key's versions and log entries stay within FoundationDB's key limit."""
        return self._stored_bytes(operator, key_group, user_key) <= MAX_KEY_BYTES

    def check_key_size(self, operator: str, key_group: int, user_key: bytes) -> None:
        """Refuse a user key whose stored keys would pass FoundationDB's key-size limit."""
        if not self.fits(operator, key_group, user_key):
            size = self._stored_bytes(operator, key_group, user_key)
            raise StateStoreError(
                f"a state key of operator {operator!r} takes up to {size} bytes once stored, "
                f"over FoundationDB's {MAX_KEY_BYTES}-byte key limit: use shorter keys (for "
                f"example a hash of a long string) or another backend")

    def _stored_bytes(self, operator: str, key_group: int, user_key: bytes) -> int:
        longest = max(len(self.group_prefix(operator, key_group) + _pack((user_key,))),
                      len(self.log_key(0, key_group, operator, user_key)))
        return longest + _EPOCH_AND_CHUNK_BYTES
