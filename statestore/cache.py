"""The per-process local cache in front of every backend.

The cache holds key groups (``{user key: value}``) of one operator, each
tagged with the epoch it reflects.  A group is cached whole (after a group
read) or in part (after point reads: the keys read, present or absent), so a
task that touches a few keys of a group reads only those from the store.  A
read as of epoch N is a hit only when the cached group is tagged N, so a
cache never serves data another process has since replaced: a commit
elsewhere moves the last committed epoch, and the next read asks for the new
epoch and misses.

:class:`CachedPipelineState` wraps a backend's :class:`PipelineState`.  When
this process publishes an epoch, it re-tags the cached groups its own writers
covered (they hold exactly what was committed, since a key group has one
writer per epoch) — so a warm task reads nothing remote, and a cold or moved
task fills lazily from the store.

The cache is bounded in bytes (``SPATE_STATE_CACHE_BYTES``) and evicts the
least recently used group.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from spate.statestore.base.store import (
    EpochMetadata,
    EpochWriter,
    GcReport,
    PipelineInfo,
    PipelineState,
    UserKey,
)

DEFAULT_CACHE_BYTES = 256 * 1024 * 1024
#: Tag of a group read before any epoch was committed.
NO_EPOCH = -1
#: Rough per-entry overhead of a dict slot holding a tuple key and bytes.
_ENTRY_OVERHEAD_BYTES = 96

#: (pipeline scope id, operator, key group)
Slot = tuple[str, str, int]
GroupContents = Mapping[UserKey, bytes]


@dataclass(frozen=True)
class CacheStats:
    """Counters for metrics: reads served locally vs from the backend.

    A read is one key group (a group read) or one key (a point read).
    """

    hits: int
    misses: int
    evictions: int
    entries: int
    bytes: int
    max_bytes: int
    #: bytes of state values read from the backend on misses
    remote_bytes: int = 0


@dataclass
class _Entry:
    epoch: int
    #: the live keys known (all of the group's when ``complete``)
    contents: GroupContents
    size: int
    #: False: only the keys in ``contents`` and ``absent`` are known
    complete: bool = True
    #: keys known to hold nothing (point reads that found none, deletions)
    absent: frozenset[UserKey] = frozenset()


@dataclass(frozen=True)
class _Expected:
    """A commit this process staged but another process publishes (see ``expect``)."""

    from_epoch: int
    to_epoch: int
    changes: Mapping[UserKey, bytes | None]


def _entry_size(key: UserKey, value: bytes) -> int:
    """Approximate bytes held for one key: the value, the key's parts, dict overhead."""
    key_bytes = sum(len(part) if isinstance(part, str | bytes) else 8 for part in key)
    return len(value) + key_bytes + _ENTRY_OVERHEAD_BYTES


def _size_of(contents: Mapping[UserKey, bytes]) -> int:
    return sum(_entry_size(key, value) for key, value in contents.items())


def cache_bytes_from_env() -> int:
    raw = os.environ.get("SPATE_STATE_CACHE_BYTES")
    if raw is None:
        return DEFAULT_CACHE_BYTES
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"SPATE_STATE_CACHE_BYTES must be a whole number of bytes, "
                         f"not {raw!r}") from None
    if value < 0:
        raise ValueError("SPATE_STATE_CACHE_BYTES must not be negative")
    return value


class StateCache:
    """Bounded LRU of key groups, tagged by epoch; safe to share between threads."""

    def __init__(self, max_bytes: int | None = None) -> None:
        self.max_bytes = cache_bytes_from_env() if max_bytes is None else max_bytes
        self._entries: OrderedDict[Slot, _Entry] = OrderedDict()
        self._expected: dict[Slot, _Expected] = {}
        self._lock = threading.Lock()
        self._bytes = 0
        self._hits = 0
        self._misses = 0
        self._evictions = 0
        self._remote_bytes = 0

    def get(self, slot: Slot, epoch: int) -> GroupContents | None:
        """The whole group as of ``epoch`` if cached whole with that tag (counts a hit or
        a miss).

        A group this process wrote for ``epoch`` (:meth:`expect`) is brought up to
        ``epoch`` on the first read that asks for it, which is how a Spark task's
        cache learns that the driver published its writes.
        """
        with self._lock:
            entry = self._current(slot, epoch)
            if entry is None or not entry.complete:
                self._misses += 1
                return None
            self._entries.move_to_end(slot)
            self._hits += 1
            return entry.contents

    def get_keys(self, slot: Slot, epoch: int, keys: Sequence[UserKey]
                 ) -> tuple[dict[UserKey, bytes | None], list[UserKey]]:
        """``(known, unknown)``: the values of ``keys`` the cache knows as of ``epoch``
        (None: known absent), and the keys it does not know (one hit or miss per key)."""
        with self._lock:
            entry = self._current(slot, epoch)
            if entry is None:
                self._misses += len(keys)
                return {}, list(keys)
            self._entries.move_to_end(slot)
            known: dict[UserKey, bytes | None] = {}
            unknown: list[UserKey] = []
            for key in keys:
                value = entry.contents.get(key)
                if value is not None or entry.complete or key in entry.absent:
                    known[key] = value
                else:
                    unknown.append(key)
            self._hits += len(known)
            self._misses += len(unknown)
            return known, unknown

    def _current(self, slot: Slot, epoch: int) -> _Entry | None:
        """The entry of ``slot`` at ``epoch`` (applying an expected publish), or None."""
        entry = self._entries.get(slot)
        expected = self._expected.pop(slot, None)
        if entry is not None and entry.epoch != epoch and expected is not None \
                and (expected.from_epoch, expected.to_epoch) == (entry.epoch, epoch):
            self._apply(slot, entry, epoch, expected.changes)
            entry = self._entries.get(slot)
        if entry is None or entry.epoch != epoch:
            return None
        return entry

    def record_remote(self, size: int) -> None:
        """Count ``size`` bytes read from the backend."""
        with self._lock:
            self._remote_bytes += size

    def expect(self, slot: Slot, from_epoch: int, to_epoch: int,
               changes: Mapping[UserKey, bytes | None]) -> None:
        """Remember that ``changes`` turn the group cached at ``from_epoch`` into ``to_epoch``.

        For a writer whose epoch another process publishes: this process cannot
        know when (or whether) that happens, so the group is advanced lazily, by
        the first read as of ``to_epoch``.  A read as of any other epoch drops the
        expectation.  The writes of an epoch are a function of its input and the
        state before it, so whichever task attempt's writes were published, they
        are these.
        """
        with self._lock:
            if slot not in self._entries:
                return
            earlier = self._expected.get(slot)
            merged = dict(changes)
            if earlier is not None and (earlier.from_epoch, earlier.to_epoch) == (
                    from_epoch, to_epoch):
                # several writers of the range in one epoch (one per stateful step)
                merged = {**earlier.changes, **changes}
            self._expected[slot] = _Expected(from_epoch, to_epoch, merged)

    def put(self, slot: Slot, epoch: int, contents: Mapping[UserKey, bytes]) -> GroupContents:
        """Cache ``contents`` as the whole group at ``epoch``; returns the read-only view."""
        frozen: GroupContents = MappingProxyType(dict(contents))
        with self._lock:
            self._store(slot, _Entry(epoch, frozen, _size_of(frozen)))
        return frozen

    def put_keys(self, slot: Slot, epoch: int, found: Mapping[UserKey, bytes | None]) -> None:
        """Add point reads of the group at ``epoch`` (None: the key holds nothing)."""
        with self._lock:
            entry = self._entries.get(slot)
            if entry is not None and entry.epoch == epoch and entry.complete:
                return  # already known whole
            if entry is None or entry.epoch != epoch:
                entry = _Entry(epoch, MappingProxyType({}), 0, complete=False)
            self._apply(slot, entry, epoch, found)

    def advance(self, slot: Slot, from_epoch: int, to_epoch: int,
                changes: Mapping[UserKey, bytes | None]) -> None:
        """Re-tag a group cached at ``from_epoch`` as ``to_epoch`` with ``changes`` applied.

        ``None`` in ``changes`` is a deletion.  A group cached at another epoch is
        dropped: it can no longer be brought up to date locally.
        """
        with self._lock:
            entry = self._entries.get(slot)
            if entry is None:
                return
            if entry.epoch != from_epoch:
                self._drop(slot)
                return
            self._apply(slot, entry, to_epoch, changes)

    def _apply(self, slot: Slot, entry: _Entry, to_epoch: int,
               changes: Mapping[UserKey, bytes | None]) -> None:
        if not changes:
            entry.epoch = to_epoch
            return
        # Copy on write (readers may hold the old view); the size is adjusted by
        # the changed keys only, so a commit costs what it changed, not the group.
        updated = dict(entry.contents)
        absent = set(entry.absent)
        size = entry.size
        for key, value in changes.items():
            previous = updated.pop(key, None)
            if previous is not None:
                size -= _entry_size(key, previous)
            elif key in absent:
                absent.discard(key)
                size -= _entry_size(key, b"")
            if value is not None:
                updated[key] = value
                size += _entry_size(key, value)
            elif not entry.complete:  # a partial group must remember what it knows is gone
                absent.add(key)
                size += _entry_size(key, b"")
        self._store(slot, _Entry(to_epoch, MappingProxyType(updated), size, entry.complete,
                                 frozenset(absent)))

    def slots(self, scope: str) -> list[Slot]:
        with self._lock:
            return [slot for slot in self._entries if slot[0] == scope]

    def discard(self, slot: Slot) -> None:
        with self._lock:
            self._drop(slot)

    def invalidate(self, scope: str) -> None:
        """Forget every group of one pipeline (after a drop or discard)."""
        with self._lock:
            for slot in [s for s in self._entries if s[0] == scope]:
                self._drop(slot)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(self._hits, self._misses, self._evictions, len(self._entries),
                              self._bytes, self.max_bytes, self._remote_bytes)

    def _store(self, slot: Slot, entry: _Entry) -> None:
        self._drop(slot)
        if entry.size > self.max_bytes:
            return  # larger than the whole cache: serve it, do not keep it
        self._entries[slot] = entry
        self._bytes += entry.size
        while self._bytes > self.max_bytes:
            oldest, _ = next(iter(self._entries.items()))
            self._drop(oldest)
            self._evictions += 1

    def _drop(self, slot: Slot) -> None:
        self._expected.pop(slot, None)
        entry = self._entries.pop(slot, None)
        if entry is not None:
            self._bytes -= entry.size


_process_cache: StateCache | None = None
_process_cache_lock = threading.Lock()


def process_cache() -> StateCache:
    """The cache every store opened in this process shares unless given its own."""
    global _process_cache
    with _process_cache_lock:
        if _process_cache is None:
            _process_cache = StateCache()
        return _process_cache


class _RecordingWriter(EpochWriter):
    """Forwards to the backend's writer and remembers what it staged, per group."""

    def __init__(self, inner: EpochWriter,
                 on_commit: Callable[[_RecordingWriter], None] | None = None) -> None:
        self.inner = inner
        self.epoch = inner.epoch
        self.key_groups = inner.key_groups
        self.changes: dict[tuple[str, int], dict[UserKey, bytes | None]] = {}
        self.committed = False
        self._on_commit = on_commit

    def put(self, operator: str, key_group: int, user_key: UserKey, value: bytes) -> None:
        self.inner.put(operator, key_group, user_key, value)
        self.changes.setdefault((operator, key_group), {})[tuple(user_key)] = value

    def delete(self, operator: str, key_group: int, user_key: UserKey) -> None:
        self.inner.delete(operator, key_group, user_key)
        self.changes.setdefault((operator, key_group), {})[tuple(user_key)] = None

    def commit(self) -> None:
        self.inner.commit()
        self.committed = True
        if self._on_commit is not None:
            self._on_commit(self)


class CachedPipelineState(PipelineState):
    """A backend's pipeline state behind the local cache."""

    def __init__(self, inner: PipelineState, cache: StateCache, run: str = "",
                 origin: object = None) -> None:
        self.inner = inner
        self.cache = cache
        #: the store (from ``open_store``) this state belongs to, for shipping to tasks
        self.origin = origin
        self.tenant = inner.tenant
        self.pipeline = inner.pipeline
        #: set by a Spark task: its cache entries belong to one run of the pipeline
        self.run = run
        # epoch being written -> (epoch it builds on, this process's writers)
        self._open: dict[int, tuple[int, list[_RecordingWriter]]] = {}

    @property
    def store_url(self) -> str:
        return self.inner.store_url

    @property
    def scope_id(self) -> str:
        scope = super().scope_id
        return f"{scope}|{self.run}" if self.run else scope

    def _resolve(self, epoch: int | None) -> int:
        if epoch is not None:
            return epoch
        last = self.inner.last_committed_epoch()
        return NO_EPOCH if last is None else last

    # -- reads --

    def last_committed_epoch(self) -> int | None:
        return self.inner.last_committed_epoch()

    def epoch_metadata(self, epoch: int | None = None) -> dict[str, Any]:
        return self.inner.epoch_metadata(epoch)

    def read_group(self, operator: str, key_group: int, *,
                   epoch: int | None = None) -> GroupContents:
        tag = self._resolve(epoch)
        slot = (self.scope_id, operator, key_group)
        cached = self.cache.get(slot, tag)
        if cached is not None:
            return cached
        if tag == NO_EPOCH:
            return self.cache.put(slot, tag, {})
        contents = self.inner.read_group(operator, key_group, epoch=tag)
        self.cache.record_remote(sum(len(v) for v in contents.values()))
        return self.cache.put(slot, tag, contents)

    def read_range(self, operator: str, key_groups: range, *,
                   epoch: int | None = None) -> dict[int, GroupContents]:
        """Every group of ``key_groups``: cached ones locally, the rest in one scan."""
        tag = self._resolve(epoch)
        groups: dict[int, GroupContents] = {}
        missing = []
        for group in key_groups:
            cached = self.cache.get((self.scope_id, operator, group), tag)
            if cached is None:
                missing.append(group)
            else:
                groups[group] = cached
        if not missing:
            return groups
        scanned: dict[int, dict[UserKey, bytes]] = {group: {} for group in missing}
        if tag != NO_EPOCH:
            for group, key, value in self.inner.scan(operator, range(missing[0], missing[-1] + 1),
                                                     epoch=tag):
                if group in scanned:
                    scanned[group][key] = value
            self.cache.record_remote(sum(len(v) for g in scanned.values() for v in g.values()))
        for group, contents in scanned.items():
            groups[group] = self.cache.put((self.scope_id, operator, group), tag, contents)
        return groups

    def get(self, operator: str, key_group: int, user_key: UserKey, *,
            epoch: int | None = None) -> bytes | None:
        return self.get_many(operator, key_group, [user_key], epoch=epoch)[0]

    def get_many(self, operator: str, key_group: int, user_keys: Sequence[UserKey], *,
                 epoch: int | None = None) -> list[bytes | None]:
        """Point reads: the keys the cache does not know are read in one batch, and kept."""
        tag = self._resolve(epoch)
        keys = [tuple(k) for k in user_keys]
        slot = (self.scope_id, operator, key_group)
        known, unknown = self.cache.get_keys(slot, tag, keys)
        if unknown:
            wanted = list(dict.fromkeys(unknown))
            fetched = ([None] * len(wanted) if tag == NO_EPOCH else
                       self.inner.get_many(operator, key_group, wanted, epoch=tag))
            found = dict(zip(wanted, fetched, strict=True))
            self.cache.record_remote(sum(len(v) for v in fetched if v is not None))
            self.cache.put_keys(slot, tag, found)
            known.update(found)
        return [known[k] for k in keys]

    def scan(self, operator: str, key_groups: range, prefix: UserKey = (), *,
             epoch: int | None = None) -> Iterator[tuple[int, UserKey, bytes]]:
        return self.inner.scan(operator, key_groups, prefix, epoch=epoch)

    # -- writes --

    def begin_epoch(self, epoch: int, key_group_ranges: Sequence[range]) -> None:
        last = self.inner.last_committed_epoch()
        self.inner.begin_epoch(epoch, key_group_ranges)
        self._open = {}
        if last is None or epoch > last:
            self._open[epoch] = (NO_EPOCH if last is None else last, [])

    def writer(self, epoch: int, key_groups: range) -> EpochWriter:
        inner = self.inner.writer(epoch, key_groups)
        opened = self._open.get(epoch)
        if opened is None:
            return inner  # a replay, or an epoch begun elsewhere
        recording = _RecordingWriter(inner)
        opened[1].append(recording)
        return recording

    def task_writer(self, epoch: int, key_groups: range, previous: int | None,
                    owns: str | None) -> EpochWriter:
        """A writer for a Spark task: another process (the driver) begins and publishes
        ``epoch``, which builds on ``previous``; the cache learns of the publish lazily
        (:meth:`StateCache.expect`).

        ``owns`` names the operator (and its ``<owns>/…`` sub-operators) that only
        this writer writes in ``epoch`` for its range: only those groups can be
        brought forward locally, as other tasks, in other processes, may write
        the rest.  None: nothing is brought forward.
        """
        base = NO_EPOCH if previous is None else previous

        def expect(writer: _RecordingWriter) -> None:
            if owns is None:
                return
            for slot in self.cache.slots(self.scope_id):
                if slot[2] in writer.key_groups and (
                        slot[1] == owns or slot[1].startswith(f"{owns}/")):
                    changes = writer.changes.get((slot[1], slot[2]), {})
                    self.cache.expect(slot, base, epoch, changes)

        return _RecordingWriter(self.inner.writer(epoch, key_groups), on_commit=expect)

    def commit_epoch(self, epoch: int, metadata: EpochMetadata) -> None:
        self.inner.commit_epoch(epoch, metadata)
        opened = self._open.pop(epoch, None)
        if opened is None:
            return
        previous, writers = opened
        for writer in writers:
            if writer.committed:
                self._advance(writer, previous, epoch)
            else:  # nothing staged reached the store; the cache may not move either
                self._forget(writer.key_groups)

    def _advance(self, writer: _RecordingWriter, previous: int, epoch: int) -> None:
        for scope, operator, group in self.cache.slots(self.scope_id):
            if group in writer.key_groups:
                changes = writer.changes.get((operator, group), {})
                self.cache.advance((scope, operator, group), previous, epoch, changes)

    def _forget(self, key_groups: range) -> None:
        for slot in self.cache.slots(self.scope_id):
            if slot[2] in key_groups:
                self.cache.discard(slot)

    def discard_uncommitted(self) -> None:
        self._open = {}
        self.inner.discard_uncommitted()

    def gc(self) -> GcReport:
        return self.inner.gc()

    def describe(self) -> PipelineInfo:
        return self.inner.describe()

    def drop(self) -> None:
        self._open = {}
        self.inner.drop()
        self.cache.invalidate(self.scope_id)
