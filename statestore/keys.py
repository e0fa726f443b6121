"""User-key encoding and key groups.

User keys are tuples of scalars (``int``, ``str``, ``bytes``, ``float``,
``bool``, ``None``, nested tuples).  They are encoded with FoundationDB's tuple
layer, which every backend shares: the encoding is order-preserving and a
tuple's encoding is a byte prefix of the encoding of any tuple extending it, so
prefix scans are byte-range scans on every backend.

A pipeline's keys are spread over a fixed number of *key groups*
(:data:`DEFAULT_KEY_GROUPS`).  A task owns a contiguous range of groups;
changing the parallelism only changes the ranges, never where a key lives.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from fdb import tuple as fdb_tuple

from spate.statestore.base.store import UserKey
from spate.statestore.errors import StateStoreError

#: Key groups per pipeline unless configured otherwise.  128 allows any
#: parallelism up to 128 with at most one group of imbalance between tasks,
#: and keeps per-group bookkeeping (manifests, cache entries) small.
DEFAULT_KEY_GROUPS = 128
#: Upper bound on key groups; a group index must fit comfortably in manifests.
MAX_KEY_GROUPS = 32768


def pack_key(user_key: Sequence[Any]) -> bytes:
    """The order-preserving byte encoding of a user key."""
    try:
        return bytes(fdb_tuple.pack(tuple(_normalise(v) for v in user_key)))
    except (ValueError, TypeError) as error:
        raise StateStoreError(
            f"cannot encode state key {user_key!r}: keys hold int, str, bytes, float, bool, "
            f"None or tuples of them ({error})"
        ) from error


def unpack_key(raw: bytes) -> UserKey:
    """The user key of :func:`pack_key`'s bytes."""
    return tuple(fdb_tuple.unpack(raw))


def prefix_bounds(prefix: Sequence[Any]) -> tuple[bytes, bytes | None]:
    """``[start, stop)`` of the encoded keys that start with ``prefix`` (stop None: no bound)."""
    if not prefix:
        return b"", None
    start = pack_key(prefix)
    # No encoded element starts with 0xff, so this bounds every extension of start.
    return start, start + b"\xff"


def _normalise(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_normalise(v) for v in value)
    return value


def key_group_of(user_key: Sequence[Any], num_key_groups: int = DEFAULT_KEY_GROUPS) -> int:
    """The key group of a user key: a stable hash (never Python's salted ``hash``)."""
    digest = hashlib.blake2b(pack_key(user_key), digest_size=8).digest()
    return int.from_bytes(digest, "big") % num_key_groups


def check_key_groups(num_key_groups: int) -> None:
    if not 1 <= num_key_groups <= MAX_KEY_GROUPS:
        raise StateStoreError(
            f"the number of key groups must be between 1 and {MAX_KEY_GROUPS}, "
            f"not {num_key_groups}")


def split_key_groups(num_key_groups: int, parallelism: int) -> list[range]:
    """Contiguous ranges, one per task, covering ``range(num_key_groups)`` exactly once.

    Range sizes differ by at most one group.
    """
    check_key_groups(num_key_groups)
    if not 1 <= parallelism <= num_key_groups:
        raise StateStoreError(
            f"parallelism must be between 1 and the number of key groups "
            f"({num_key_groups}), not {parallelism}")
    base, extra = divmod(num_key_groups, parallelism)
    ranges = []
    start = 0
    for task in range(parallelism):
        stop = start + base + (1 if task < extra else 0)
        ranges.append(range(start, stop))
        start = stop
    return ranges


def check_key_ranges(ranges: Sequence[range]) -> None:
    """Manifest ranges must be non-empty, ascending, disjoint, and inside the group space."""
    previous_stop = 0
    for groups in sorted(ranges, key=lambda r: r.start):
        if groups.step != 1 or len(groups) == 0 or groups.start < previous_stop \
                or groups.stop > MAX_KEY_GROUPS:
            raise StateStoreError(
                f"key-group ranges must be non-empty, contiguous and disjoint: "
                f"{[(r.start, r.stop) for r in ranges]}")
        previous_stop = groups.stop


def owner_of(key_group: int, num_key_groups: int, parallelism: int) -> int:
    """The task (0-based) whose range holds ``key_group``."""
    for task, groups in enumerate(split_key_groups(num_key_groups, parallelism)):
        if key_group in groups:
            return task
    raise StateStoreError(f"key group {key_group} is outside 0..{num_key_groups - 1}")
