"""Identifiers for rows the API exposes: random, URL-safe, and sortable by creation time.

An id is 26 characters of lower-case Crockford base32: 48 bits of milliseconds
since the epoch, then 80 random bits. Ordering by id is ordering by creation,
which is what keyset pagination walks; the random part makes ids unguessable
across tenants. Within one process, ids made in the same millisecond still
increase (the random part of the previous id plus one).
"""

from __future__ import annotations

import re
import secrets
import threading
import time

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"
ID_LENGTH = 26
ID_PATTERN = re.compile(f"^[{_ALPHABET}]{{{ID_LENGTH}}}$")
_RANDOM_BITS = 80

_lock = threading.Lock()
_last = 0


def new_id() -> str:
    """A fresh id, greater than every id this process made before."""
    global _last
    with _lock:
        value = (time.time_ns() // 1_000_000) << _RANDOM_BITS | secrets.randbits(_RANDOM_BITS)
        if value <= _last:
            value = _last + 1
        _last = value
    chars = []
    for _ in range(ID_LENGTH):
        chars.append(_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def is_id(text: str) -> bool:
    """Whether ``text`` has the shape of an id (it may still name nothing)."""
    return ID_PATTERN.fullmatch(text) is not None
