"""How the FoundationDB backend stores versions, and the pure logic over stored rows.

A version is stored as one or more chunks, each value at most
:data:`CHUNK_BYTES` (FoundationDB refuses values over 100,000 bytes).  Chunk 0
starts with a header: the kind (a value or a deletion marker) and how many
chunks the version has, so a reader can tell a whole version from a damaged
one.  A deletion marker is a single chunk holding only the header.

Everything here is free of I/O so it can be tested without a cluster: splitting
and joining chunks, picking each key's newest version at or below an epoch from
an ordered run of rows, planning garbage collection, and cutting a stream of
mutations into transactions under a byte budget.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TypeVar

from spate.statestore.errors import CorruptValueError
from spate.statestore.fdb.layout import DataKey

#: Largest stored value: under FoundationDB's 100,000-byte value limit.
CHUNK_BYTES = 90_000
#: Mutation bytes per write transaction: well under the 10 MB transaction limit, and
#: small enough to commit in far less than the 5 s a transaction may live.
BATCH_BYTES = 2_000_000

_HEADER = struct.Struct(">BI")
_DELETED = 0
_VALUE = 1

Row = tuple[DataKey, bytes]
Item = TypeVar("Item")


def split_version(value: bytes | None) -> list[bytes]:
    """The chunks storing ``value`` (``None``: a deletion marker)."""
    if value is None:
        return [_HEADER.pack(_DELETED, 1)]
    first = CHUNK_BYTES - _HEADER.size
    rest = value[first:]
    count = 1 + -(-len(rest) // CHUNK_BYTES)
    chunks = [_HEADER.pack(_VALUE, count) + value[:first]]
    chunks += [rest[i:i + CHUNK_BYTES] for i in range(0, len(rest), CHUNK_BYTES)]
    return chunks


def join_version(chunks: Sequence[tuple[int, bytes]]) -> bytes | None:
    """The value stored as ``(chunk index, bytes)`` in order; ``None`` for a deletion marker."""
    if not chunks or chunks[0][0] != 0 or len(chunks[0][1]) < _HEADER.size:
        raise _damaged("its first chunk is missing or truncated")
    kind, count = _HEADER.unpack_from(chunks[0][1])
    if kind not in (_DELETED, _VALUE):
        raise _damaged(f"it has an unknown kind {kind}")
    if [index for index, _ in chunks] != list(range(count)):
        raise _damaged(f"it should have {count} chunks but has {len(chunks)}")
    if kind == _DELETED:
        return None
    return chunks[0][1][_HEADER.size:] + b"".join(part for _, part in chunks[1:])


def _damaged(why: str) -> CorruptValueError:
    return CorruptValueError(f"a state value stored in FoundationDB is damaged ({why}): "
                             f"restore the store or restart the pipeline without state")


def live_values(rows: Iterable[Row], as_of: int) -> Iterator[tuple[str, int, bytes, bytes]]:
    """``(operator, group, user key, value)`` of each key's newest version at or below
    ``as_of`` that is not a deletion, from rows in key order."""
    identity: tuple[str, int, bytes] | None = None
    epoch: int | None = None
    chunks: list[tuple[int, bytes]] = []
    for key, value in rows:
        if key.identity != identity:
            yield from _live(identity, chunks)
            identity, epoch, chunks = key.identity, None, []
        if key.epoch > as_of:
            continue  # staged by an uncommitted epoch, or newer than asked
        if key.epoch != epoch:
            # Rows come by ascending epoch, so a later version replaces the candidate.
            epoch, chunks = key.epoch, []
        chunks.append((key.chunk, value))
    yield from _live(identity, chunks)


def _live(identity: tuple[str, int, bytes] | None,
          chunks: list[tuple[int, bytes]]) -> Iterator[tuple[str, int, bytes, bytes]]:
    if identity is None or not chunks:
        return
    value = join_version(chunks)
    if value is not None:
        yield (*identity, value)


@dataclass(frozen=True)
class VersionInfo:
    """What gc needs to know of one stored version."""

    epoch: int
    deleted: bool
    value_bytes: int


def versions_by_key(rows: Iterable[Row]) -> Iterator[tuple[tuple[str, int, bytes],
                                                            list[VersionInfo]]]:
    """Each user key's versions, from rows in key order."""
    identity: tuple[str, int, bytes] | None = None
    versions: list[VersionInfo] = []
    epoch = 0
    chunks: list[tuple[int, bytes]] = []
    for key, value in rows:
        if (key.identity, key.epoch) != (identity, epoch) and identity is not None:
            versions.append(_info(epoch, chunks))
            chunks = []
            if key.identity != identity:
                yield identity, versions
                versions = []
        identity, epoch = key.identity, key.epoch
        chunks.append((key.chunk, value))
    if identity is not None:
        versions.append(_info(epoch, chunks))
        yield identity, versions


def _info(epoch: int, chunks: list[tuple[int, bytes]]) -> VersionInfo:
    value = join_version(chunks)
    return VersionInfo(epoch, value is None, 0 if value is None else len(value))


def plan_gc(versions: Sequence[VersionInfo], floor: int) -> tuple[list[int], int]:
    """Epochs of one key's versions that gc removes at ``floor``, and their value bytes.

    Every version at or below the floor but the newest is superseded; the newest
    goes too when it is a deletion marker, since nothing older remains to hide.
    """
    kept = sorted((v for v in versions if v.epoch <= floor), key=lambda v: v.epoch)
    if not kept:
        return [], 0
    removed = kept if kept[-1].deleted else kept[:-1]
    return [v.epoch for v in removed], sum(v.value_bytes for v in removed)


def batches(items: Iterable[Item], cost: Callable[[Item], int],
            budget: int = BATCH_BYTES) -> Iterator[list[Item]]:
    """``items`` in order, cut into lists costing at most ``budget`` each (an item costing
    more than the budget travels alone)."""
    batch: list[Item] = []
    spent = 0
    for item in items:
        price = cost(item)
        if batch and spent + price > budget:
            yield batch
            batch, spent = [], 0
        batch.append(item)
        spent += price
    if batch:
        yield batch
