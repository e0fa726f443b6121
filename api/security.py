"""API keys and roles: issuing, parsing, hashing and comparing keys.

A key reads ``spate_<id>_<secret>``: the id is the key's public identifier
(the api-keys resource uses it), the secret is 43 random base62 characters
(about 256 bits). Only the SHA-256 of the whole key is stored.

Why SHA-256 and not scrypt or bcrypt: those are slow on purpose to protect
low-entropy, human-chosen passwords from offline guessing. A 256-bit random
secret cannot be guessed however fast the hash is, and a deliberately slow hash
on every request would hand attackers a cheap way to exhaust the API's CPU.
Digests are compared with :func:`hmac.compare_digest`, in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string
from dataclasses import dataclass
from enum import StrEnum

from spate.api.ids import ID_LENGTH, new_id

KEY_PREFIX = "spate"
SECRET_CHARS = 43
_SECRET_ALPHABET = string.ascii_letters + string.digits
_KEY_PATTERN = re.compile(
    rf"^{KEY_PREFIX}_([0-9a-z]{{{ID_LENGTH}}})_([0-9A-Za-z]{{{SECRET_CHARS}}})$"
)
#: How much of the secret the listing shows, to tell keys apart at a glance.
VISIBLE_SECRET_CHARS = 4


class Role(StrEnum):
    """What a tenant key may do: admin includes developer, which includes viewer;
    billing is a viewer that may also read usage and bills and set the budget (what a
    finance team needs, without changing pipelines); admin includes billing too."""

    ADMIN = "admin"  # everything, including managing API keys
    DEVELOPER = "developer"  # create, change and delete pipelines
    VIEWER = "viewer"  # read only
    BILLING = "billing"  # read only, plus usage, invoices and the budget

    def allows(self, required: Role) -> bool:
        return required in _INCLUDED[self]


_INCLUDED = {
    Role.VIEWER: {Role.VIEWER},
    Role.DEVELOPER: {Role.VIEWER, Role.DEVELOPER},
    Role.BILLING: {Role.VIEWER, Role.BILLING},
    Role.ADMIN: set(Role),
}


@dataclass(frozen=True)
class IssuedKey:
    """A freshly issued key; ``token`` is shown to its owner once and never stored."""

    key_id: str
    token: str
    secret_sha256: str

    @property
    def display_prefix(self) -> str:
        return display_prefix(self.token)


def issue_key(key_id: str | None = None) -> IssuedKey:
    """A new key; pass ``key_id`` to rotate an existing key's secret."""
    key_id = key_id or new_id()
    secret = "".join(secrets.choice(_SECRET_ALPHABET) for _ in range(SECRET_CHARS))
    token = f"{KEY_PREFIX}_{key_id}_{secret}"
    return IssuedKey(key_id=key_id, token=token, secret_sha256=hash_token(token))


def parse_key_id(token: str) -> str | None:
    """The id of a well-formed key, or None when ``token`` is not shaped like one."""
    match = _KEY_PATTERN.fullmatch(token)
    return match.group(1) if match else None


def hash_token(token: str) -> str:
    """The stored form of a key: hex SHA-256 of the whole token."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def token_matches(token: str, stored_sha256: str) -> bool:
    """Constant-time check of ``token`` against a stored digest."""
    return hmac.compare_digest(hash_token(token), stored_sha256)


def display_prefix(token: str) -> str:
    """``spate_<id>_`` plus the first few secret characters: safe to list."""
    head, _, secret = token.rpartition("_")
    return f"{head}_{secret[:VISIBLE_SECRET_CHARS]}"
