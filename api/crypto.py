"""Connection secrets encrypted at rest with Fernet (AES-128-CBC + HMAC-SHA256).

The key comes from ``SPATE_SECRET_KEY``. Without one (the embedded default)
a key is generated on first use and kept in ``<data dir>/secret.key`` with
mode 0600, so secrets survive restarts of the same installation. Each secret
option is encrypted on its own, so replacing one never needs the others
decrypted. A token that does not open with the configured key is a
:class:`SecretKeyMismatchError`, whose message says what to do and never
carries the ciphertext or the key.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
from functools import cached_property
from pathlib import Path

from cryptography.fernet import Fernet, InvalidToken
from pydantic import SecretStr

logger = logging.getLogger(__name__)

KEY_FILE_NAME = "secret.key"
#: Where the embedded default keeps its data when no data directory is configured.
DEFAULT_DATA_DIR = Path(".spate")
GENERATE_HINT = ("python -c 'from cryptography.fernet import Fernet; "
                 "print(Fernet.generate_key().decode())'")


class SecretKeyMismatchError(RuntimeError):
    """A stored secret was encrypted with another key than the configured one."""


def check_fernet_key(key: str) -> None:
    """Raise ValueError (without the key in it) unless ``key`` is a Fernet key."""
    try:
        Fernet(key.encode("ascii"))
    except (ValueError, UnicodeError):
        raise ValueError("secret_key must be a Fernet key: 32 random bytes in url-safe "
                         f"base64 (44 characters); generate one with: {GENERATE_HINT}") from None


def load_or_create_key_file(path: Path) -> bytes:
    """The key in ``path``, created (mode 0600) with a new random key if absent."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        key = path.read_bytes().strip()
        check_fernet_key(key.decode("ascii", errors="replace"))
        return key
    key = Fernet.generate_key()
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(key + b"\n")
    logger.warning("generated a new secret key for connection secrets", extra={"path": str(path)})
    return key


class SecretBox:
    """Encrypts and decrypts secret option values with one Fernet key."""

    def __init__(self, key: SecretStr | None, data_dir: Path = DEFAULT_DATA_DIR) -> None:
        self._key = key
        self.key_file = data_dir / KEY_FILE_NAME

    @cached_property
    def _key_bytes(self) -> bytes:
        # Read on first use, so an API that never stores a secret never writes a key file.
        if self._key is not None:
            return self._key.get_secret_value().encode("ascii")
        self.key_file.parent.mkdir(parents=True, exist_ok=True)
        return load_or_create_key_file(self.key_file)

    @cached_property
    def _fernet(self) -> Fernet:
        return Fernet(self._key_bytes)

    def derive(self, purpose: str) -> bytes:
        """A secret for ``purpose`` derived from the key (HMAC-SHA256), so deployments
        need one key for every secret they make."""
        return hmac.new(self._key_bytes, purpose.encode(), hashlib.sha256).digest()

    def encrypt(self, value: str) -> str:
        return self._fernet.encrypt(value.encode("utf-8")).decode("ascii")

    def decrypt(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode("ascii")).decode("utf-8")
        except (InvalidToken, UnicodeError):
            raise SecretKeyMismatchError(
                "stored connection secrets cannot be decrypted with the configured key: "
                "restore the SPATE_SECRET_KEY (or secret.key file) they were stored with, or "
                "set the secrets again") from None

    def encrypt_all(self, values: dict[str, str]) -> dict[str, str]:
        return {name: self.encrypt(value) for name, value in values.items()}

    def decrypt_all(self, tokens: dict[str, str]) -> dict[str, str]:
        return {name: self.decrypt(token) for name, token in tokens.items()}
