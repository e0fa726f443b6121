"""The FoundationDB backend of the state store, on the official ``foundationdb`` bindings.

URLs: ``fdb://`` opens the default cluster file (``FDB_CLUSTER_FILE``, else the
platform default such as /etc/foundationdb/fdb.cluster); ``fdb:///etc/x/fdb.cluster``
names an absolute cluster file and ``fdb://conf/fdb.cluster`` a relative one.
``?prefix=name`` picks the root subspace (default ``spate``), so several stores
or test runs can share a cluster without seeing each other.

The bindings and libfdb_c load on the first open (:mod:`spate.statestore.fdb.client`),
never when :mod:`spate.statestore` is imported.

FoundationDB's limits (10 MB and 5 s per transaction, 100 KB per value, 10 KB
per key) shape the epoch protocol; the key layout is in
:mod:`spate.statestore.fdb.layout`, the chunked version format in
:mod:`spate.statestore.fdb.versions`:

* ``begin_epoch`` / ``discard_uncommitted`` first stop the pending epoch in one
  small transaction (its writers' next transactions then fail), then remove what
  it staged page by page; ``begin_epoch`` finally sets the new pending epoch and
  manifest, after checking nothing staged is left.
* A writer's ``commit`` claims its manifest range under a fresh attempt id,
  removes what an earlier attempt of that range staged, writes its versions in
  transactions of at most ~2 MB, and marks the range done in a small final
  transaction.  Each of them re-checks that the epoch is still pending and the
  range still this attempt's, so nothing lands after a discard or takeover.  So
  a range holds its last writer's output (on the relational backends, where a
  writer commits in one transaction, two writers of one range merge): a retried
  task's output never mixes with a crashed attempt's partial one.
* ``commit_epoch`` is one small transaction: check the manifest, store the
  metadata, move the last committed epoch.  Every transition reads the ``meta``
  key it changes, so FoundationDB's serializable transactions order concurrent
  committers of any number of processes.
* Reads go in pages of ~4 MB, each its own transaction.  Versions at or below a
  committed epoch do not change until gc raises the floor past it, which every
  page re-checks; so does ``gc``, which raises the floor before removing anything.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from typing import Any
from urllib.parse import parse_qs, unquote

from spate.statestore import base, encoding
from spate.statestore.errors import (
    BackendUnavailableError,
    IncompleteEpochError,
    KeyGroupOutOfRangeError,
    OutOfOrderEpochError,
    StateStoreError,
)
from spate.statestore.fdb.client import FdbClient
from spate.statestore.fdb.layout import (
    KeyRange,
    Layout,
    LogKey,
    ManifestEntry,
    Meta,
    next_must_be,
    registry_entry,
    registry_range,
)
from spate.statestore.fdb.versions import (
    BATCH_BYTES,
    Row,
    batches,
    join_version,
    live_values,
    plan_gc,
    split_version,
    versions_by_key,
)
from spate.statestore.keys import check_key_ranges, pack_key, unpack_key

DEFAULT_ROOT = "spate"
#: Log entries handled per transaction by discards and gc.
LOG_PAGE_KEYS = 1_000
MAX_METADATA_BYTES = 1_000_000
#: Tries of ``begin_epoch`` while other processes keep beginning or discarding epochs.
BEGIN_ATTEMPTS = 20


def parse_url(url: str) -> tuple[str | None, str]:
    """``(cluster file, None for the default; root subspace name)`` of an ``fdb://`` URL."""
    rest = url.removeprefix("fdb://")
    if rest == url:
        raise BackendUnavailableError(f"{url!r} is not an fdb:// URL: write fdb:// or "
                                      f"fdb:///path/to/fdb.cluster")
    path, _, query = rest.partition("?")
    options = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(options) - {"prefix"})
    if unknown:
        raise BackendUnavailableError(f"unknown option {', '.join(unknown)} in {url!r}: the "
                                      f"only option of fdb:// URLs is ?prefix=name")
    root = options.get("prefix", [DEFAULT_ROOT])[-1]
    if not root:
        raise BackendUnavailableError(f"empty ?prefix= in {url!r}: name the root subspace, "
                                      f"e.g. ?prefix={DEFAULT_ROOT}")
    return unquote(path) or None, root


def _set_cost(pair: tuple[bytes, bytes]) -> int:
    # The key counts twice: once written, once as its write-conflict range.
    return 2 * len(pair[0]) + len(pair[1])


def _clear_cost(span: KeyRange) -> int:
    return 2 * (len(span[0]) + len(span[1]))


class FdbStateStore(base.StateStore):
    """Any number of pipelines' state in one FoundationDB cluster, under one root subspace."""

    def __init__(self, url: str, *, bindings: Any = None) -> None:
        """``bindings`` stands in for the ``fdb`` module (tests); by default it is loaded."""
        self.url = url
        cluster_file, self.root = parse_url(url)
        self.client = FdbClient(cluster_file, bindings)

    def pipeline(self, tenant: str, pipeline: str) -> base.PipelineState:
        return FdbPipelineState(self, tenant, pipeline)

    def pipelines(self, tenant: str | None = None) -> list[tuple[str, str]]:
        return [registry_entry(key) for key, _ in
                self.client.stream([registry_range(self.root, tenant)])]

    def close(self) -> None:
        """Nothing to release: the bindings keep one network thread and one database
        handle per cluster file for the life of the process."""

    # Shipped to another process (a Spark task) as its URL.
    def __reduce__(self) -> tuple[Any, ...]:
        return (FdbStateStore, (self.url,))


class FdbPipelineState(base.PipelineState):
    """One pipeline's versions under its subspace of the store."""

    def __init__(self, store: FdbStateStore, tenant: str, pipeline: str) -> None:
        self.store = store
        self.client = store.client
        self.tenant = tenant
        self.pipeline = pipeline
        self.layout = Layout(store.root, tenant, pipeline)
        self.name = f"{tenant}/{pipeline}"

    @property
    def store_url(self) -> str:
        return self.store.url

    def _meta(self, tr: Any) -> Meta:
        return Meta.decode(tr.get(self.layout.meta_key).value)

    # -- reads --

    def last_committed_epoch(self) -> int | None:
        return self.client.run(lambda tr: self._meta(tr).last)

    def _resolve(self, epoch: int | None) -> int | None:
        return self.client.run(lambda tr: self._meta(tr).readable(epoch, self.name))

    def _still_readable(self, epoch: int, tr: Any) -> None:
        self._meta(tr).readable(epoch, self.name)

    def _versions(self, ranges: Sequence[KeyRange], epoch: int) -> Iterator[Row]:
        rows = self.client.stream(ranges, partial(self._still_readable, epoch))
        return ((self.layout.parse_data_key(key), value) for key, value in rows)

    def epoch_metadata(self, epoch: int | None = None) -> dict[str, Any]:
        rows = self.client.run(self._metadata_rows, epoch)
        if not rows:
            return {}
        blob = join_version([(self.layout.metadata_chunk(key), value) for key, value in rows])
        return dict(encoding.decode(blob)) if blob is not None else {}

    def _metadata_rows(self, tr: Any, epoch: int | None) -> list[tuple[bytes, bytes]]:
        wanted = self._meta(tr).readable(epoch, self.name)
        if wanted is None:
            return []
        return [(bytes(item.key), bytes(item.value))
                for item in tr.get_range(*self.layout.metadata_range(wanted))]

    def get(self, operator: str, key_group: int, user_key: base.UserKey, *,
            epoch: int | None = None) -> bytes | None:
        return self.get_many(operator, key_group, [user_key], epoch=epoch)[0]

    def get_many(self, operator: str, key_group: int, user_keys: Sequence[base.UserKey], *,
                 epoch: int | None = None) -> list[bytes | None]:
        packed = [pack_key(key) for key in user_keys]
        wanted = self._resolve(epoch)
        if wanted is None:
            return [None] * len(packed)
        # A key too long to store cannot be there (and FoundationDB would refuse the read).
        storable = sorted({key for key in packed if self.layout.fits(operator, key_group, key)})
        ranges = [self.layout.key_versions(operator, key_group, key, wanted) for key in storable]
        found = {key: value for _, _, key, value in
                 live_values(self._versions(ranges, wanted), wanted)}
        return [found.get(key) for key in packed]

    def scan(self, operator: str, key_groups: range, prefix: base.UserKey = (), *,
             epoch: int | None = None) -> Iterator[tuple[int, base.UserKey, bytes]]:
        key_prefix = pack_key(prefix) if prefix else b""
        wanted = self._resolve(epoch)
        if wanted is None:
            return iter(())
        ranges = [self.layout.group_range(operator, group, key_prefix) for group in key_groups]
        return self._scan(ranges, wanted)

    def _scan(self, ranges: Sequence[KeyRange],
              epoch: int) -> Iterator[tuple[int, base.UserKey, bytes]]:
        for _, group, key, value in live_values(self._versions(ranges, epoch), epoch):
            yield group, unpack_key(key), value

    # -- epoch transitions --

    def begin_epoch(self, epoch: int, key_group_ranges: Sequence[range]) -> None:
        check_key_ranges(key_group_ranges)
        for _ in range(BEGIN_ATTEMPTS):
            replay, last = self.client.run(self._stop_pending, epoch)
            if replay:
                return  # epoch is durable already
            self._clear_staged(self.layout.log_after(last), partial(self._halted, last))
            if self.client.run(self._start, epoch, last, list(key_group_ranges)):
                return
        raise StateStoreError(
            f"could not begin epoch {epoch} of {self.name}: other processes kept beginning or "
            f"discarding its epochs meanwhile; let one driver run the pipeline")

    def _stop_pending(self, tr: Any, epoch: int | None) -> tuple[bool, int | None]:
        """Stop the pending epoch, whose writers' next transactions then fail, and drop its
        manifest; returns (``epoch`` is a replay, the last committed epoch)."""
        meta = self._meta(tr)
        if epoch is not None and meta.last is not None:
            if epoch <= meta.last:
                return True, meta.last
            if epoch > meta.last + 1:
                raise OutOfOrderEpochError(next_must_be("begin", epoch, meta.last, self.name))
        tr.set(self.layout.meta_key, replace(meta, pending=None).encode())
        tr.clear_range(*self.layout.manifest_range())
        return False, meta.last

    def _halted(self, last: int | None, tr: Any) -> bool:
        """No other process published or began an epoch since we stopped the pending one."""
        meta = self._meta(tr)
        return meta.last == last and meta.pending is None

    def _start(self, tr: Any, epoch: int, last: int | None, ranges: list[range]) -> bool:
        meta = self._meta(tr)
        if meta.last == last and meta.pending == epoch:
            # Begun already: by this call if a commit reported an unknown result and was
            # retried; accepted only if the manifest is exactly the one asked for.
            manifest = tr.get_range(*self.layout.manifest_range(epoch))
            begun = [self.layout.manifest_entry(item.key, item.value) for item in manifest]
            return [(e.first, e.end, e.done) for e in begun] == sorted(
                (groups.start, groups.stop, False) for groups in ranges)
        leftover = list(tr.get_range(*self.layout.log_after(last), limit=1))
        if meta.last != last or meta.pending is not None or leftover:
            return False  # another process got in between: start over
        tr.set(self.layout.meta_key, replace(meta, pending=epoch).encode())
        for groups in ranges:
            entry = ManifestEntry(groups.start, groups.stop, False, None)
            tr.set(self.layout.manifest_key(epoch, groups.start), entry.encode())
        tr.set(self.layout.registry_key, b"")
        return True

    def _clear_staged(self, log: KeyRange, guard: Callable[[Any], bool],
                      operators: set[str] | None = None) -> None:
        """Remove the versions the log entries in ``log`` name (of ``operators`` only,
        when given), page by page, while ``guard(tr)`` holds."""
        begin: bytes | None = log[0]
        while begin is not None:
            begin = self.client.run(self._clear_page, (begin, log[1]), guard, operators)

    def _clear_page(self, tr: Any, log: KeyRange, guard: Callable[[Any], bool],
                    operators: set[str] | None) -> bytes | None:
        """Clear one page; returns where the next page begins (None: done)."""
        if not guard(tr):
            return None
        spent = 0
        last = None
        for item in tr.get_range(log[0], log[1], limit=LOG_PAGE_KEYS):
            last = item.key
            entry = self.layout.parse_log_key(item.key)
            if operators is not None and entry.operator not in operators:
                continue
            tr.clear_range(*self.layout.version_range(entry.operator, entry.key_group,
                                                      entry.user_key, entry.epoch))
            tr.clear(item.key)
            spent += 3 * len(item.key)
            if spent >= BATCH_BYTES:
                break
        return None if last is None else last + b"\x00"

    def writer(self, epoch: int, key_groups: range) -> base.EpochWriter:
        return base.BufferedEpochWriter(epoch, key_groups, self.write_versions,
                                        self.layout.check_key_size)

    def write_versions(self, epoch: int, key_groups: range,
                       rows: base.StagedWrites) -> None:
        """Stage one writer's versions in bounded transactions, then mark its range done."""
        attempt = os.urandom(16)
        if self.client.run(self._claim, epoch, key_groups, attempt):
            return  # a replayed epoch's writes are already durable
        guard = partial(self._owns, epoch, key_groups, attempt)
        # A crashed or retried attempt of this range may have staged part of its writes.
        # Only its operators' (several steps may each write the range in one epoch).
        operators = {operator for operator, _, _ in rows}
        self._clear_staged(self.layout.log_of_range(epoch, key_groups), guard, operators)
        for batch in batches(self._mutations(epoch, rows), _set_cost):
            if not self.client.run(self._write_batch, batch, guard):
                return
        self.client.run(self._finish, epoch, key_groups, attempt)

    def _mutations(self, epoch: int, rows: base.StagedWrites
                   ) -> Iterator[tuple[bytes, bytes]]:
        for (operator, group, key), value in rows.items():
            # The log entry first, so a partly written version is always found and cleared.
            yield self.layout.log_key(epoch, group, operator, key), b""
            for index, chunk in enumerate(split_version(value)):
                yield self.layout.data_key(operator, group, key, epoch, index), chunk

    def _manifest_entry(self, tr: Any, epoch: int, key_groups: range) -> ManifestEntry:
        key = self.layout.manifest_key(epoch, key_groups.start)
        raw = tr.get(key).value
        entry = None if raw is None else self.layout.manifest_entry(key, raw)
        if entry is None or entry.end != key_groups.stop:
            raise KeyGroupOutOfRangeError(
                f"key groups {key_groups.start}..{key_groups.stop - 1} are not a range of "
                f"epoch {epoch}'s manifest; use a range given to begin_epoch")
        return entry

    def _claim(self, tr: Any, epoch: int, key_groups: range, attempt: bytes) -> bool:
        if self._meta(tr).is_replay(epoch, "write", self.name):
            return True
        self._manifest_entry(tr, epoch, key_groups)
        entry = ManifestEntry(key_groups.start, key_groups.stop, False, attempt)
        tr.set(self.layout.manifest_key(epoch, key_groups.start), entry.encode())
        return False

    def _owns(self, epoch: int, key_groups: range, attempt: bytes, tr: Any) -> bool:
        """The epoch is still pending and the range still this attempt's (False: a replay)."""
        if self._meta(tr).is_replay(epoch, "write", self.name):
            return False
        if self._manifest_entry(tr, epoch, key_groups).attempt != attempt:
            raise StateStoreError(
                f"another writer took over key groups {key_groups.start}.."
                f"{key_groups.stop - 1} of epoch {epoch} of {self.name} (a retried or "
                f"speculative task?); this attempt's writes were dropped: let the other finish")
        return True

    def _write_batch(self, tr: Any, batch: list[tuple[bytes, bytes]],
                     guard: Callable[[Any], bool]) -> bool:
        if not guard(tr):
            return False
        for key, value in batch:
            tr.set(key, value)
        return True

    def _finish(self, tr: Any, epoch: int, key_groups: range, attempt: bytes) -> None:
        if self._owns(epoch, key_groups, attempt, tr):
            entry = ManifestEntry(key_groups.start, key_groups.stop, True, attempt)
            tr.set(self.layout.manifest_key(epoch, key_groups.start), entry.encode())

    def commit_epoch(self, epoch: int, metadata: base.EpochMetadata) -> None:
        blob = encoding.encode(dict(metadata))
        if len(blob) > MAX_METADATA_BYTES:
            raise StateStoreError(
                f"the metadata of epoch {epoch} of {self.name} takes {len(blob)} bytes; keep it "
                f"under {MAX_METADATA_BYTES} (watermarks, offsets, markers) and put bulk data "
                f"in operator state")
        self.client.run(self._publish, epoch, split_version(blob))

    def _publish(self, tr: Any, epoch: int, chunks: list[bytes]) -> None:
        meta = self._meta(tr)
        if meta.is_replay(epoch, "commit", self.name):
            return
        manifest = [self.layout.manifest_entry(item.key, item.value)
                    for item in tr.get_range(*self.layout.manifest_range(epoch))]
        missing = [f"{entry.first}..{entry.end - 1}" for entry in manifest if not entry.done]
        if missing:
            raise IncompleteEpochError(
                f"cannot publish epoch {epoch} of {self.name}: the writers of key groups "
                f"{', '.join(missing)} have not committed")
        tr.clear_range(*self.layout.metadata_range(epoch))
        for index, chunk in enumerate(chunks):
            tr.set(self.layout.metadata_key(epoch, index), chunk)
        tr.set(self.layout.meta_key, Meta(epoch, None, meta.floor).encode())
        tr.clear_range(*self.layout.manifest_range())

    def discard_uncommitted(self) -> None:
        _, last = self.client.run(self._stop_pending, None)
        self._clear_staged(self.layout.log_after(last), partial(self._halted, last))

    # -- maintenance --

    def gc(self) -> base.GcReport:
        floor = self.client.run(self._raise_floor)
        if floor is None:
            return base.GcReport(0, 0)
        removed = freed = 0
        while entries := self.client.run(self._log_page, floor):
            count, size = self._collect(entries, floor)
            removed += count
            freed += size
        return base.GcReport(removed, freed)

    def _raise_floor(self, tr: Any) -> int | None:
        """Make epochs before the last committed unreadable, before removing anything."""
        meta = self._meta(tr)
        if meta.last is None:
            return None
        tr.set(self.layout.meta_key, replace(meta, floor=meta.last).encode())
        tr.clear_range(*self.layout.metadata_below(meta.last))
        return meta.last

    def _log_page(self, tr: Any, floor: int) -> list[tuple[bytes, LogKey]]:
        return [(bytes(item.key), self.layout.parse_log_key(item.key)) for item in
                tr.get_range(*self.layout.log_through(floor), limit=LOG_PAGE_KEYS)]

    def _collect(self, entries: list[tuple[bytes, LogKey]], floor: int) -> tuple[int, int]:
        """Remove the superseded versions of the keys ``entries`` name, then the entries."""
        keys = sorted({(entry.operator, entry.key_group, entry.user_key) for _, entry in entries})
        ranges = [self.layout.key_versions(*key, floor) for key in keys]
        rows = ((self.layout.parse_data_key(key), value) for key, value in
                self.client.stream(ranges))
        clears: list[KeyRange] = []
        removed = freed = 0
        for key, versions in versions_by_key(rows):
            epochs, size = plan_gc(versions, floor)
            clears += [self.layout.version_range(*key, epoch) for epoch in epochs]
            removed += len(epochs)
            freed += size
        clears += [(log_key, log_key + b"\x00") for log_key, _ in entries]
        for batch in batches(clears, _clear_cost):
            self.client.run(self._clear_batch, batch)
        return removed, freed

    def _clear_batch(self, tr: Any, batch: list[KeyRange]) -> None:
        for begin, end in batch:
            tr.clear_range(begin, end)

    def describe(self) -> base.PipelineInfo:
        last = self.last_committed_epoch()
        if last is None:
            return base.PipelineInfo(self.tenant, self.pipeline, None, [], {})
        groups: defaultdict[str, set[int]] = defaultdict(set)
        keys: Counter[str] = Counter()
        sizes: Counter[str] = Counter()
        for operator, group, _, value in live_values(
                self._versions([self.layout.data_range()], last), last):
            groups[operator].add(group)
            keys[operator] += 1
            sizes[operator] += len(value)
        operators = [base.OperatorInfo(operator, len(groups[operator]), keys[operator],
                                       sizes[operator]) for operator in sorted(groups)]
        return base.PipelineInfo(self.tenant, self.pipeline, last, operators,
                                 self.epoch_metadata(last))

    def drop(self) -> None:
        self.client.run(self._drop)

    def _drop(self, tr: Any) -> None:
        tr.clear_range(*self.layout.pipeline_range())
        tr.clear(self.layout.registry_key)

