"""API keys: their shape, what is stored, and how they are checked."""

from __future__ import annotations

import hashlib

import pytest

from spate.api.ids import is_id
from spate.api.security import Role, display_prefix, issue_key, parse_key_id, token_matches


def test_issued_key_has_the_documented_shape_and_stores_only_a_digest() -> None:
    issued = issue_key()
    prefix, key_id, secret = issued.token.split("_")
    assert prefix == "spate" and key_id == issued.key_id and is_id(key_id)
    assert len(secret) == 43 and secret.isalnum()
    assert issued.secret_sha256 == hashlib.sha256(issued.token.encode()).hexdigest()
    assert secret not in issued.secret_sha256
    assert parse_key_id(issued.token) == issued.key_id


def test_keys_are_unique_and_rotation_keeps_the_id() -> None:
    first, second = issue_key(), issue_key()
    assert first.token != second.token and first.key_id != second.key_id
    rotated = issue_key(first.key_id)
    assert rotated.key_id == first.key_id and rotated.token != first.token


def test_token_matches_only_its_own_digest() -> None:
    issued = issue_key()
    assert token_matches(issued.token, issued.secret_sha256)
    assert not token_matches(issued.token[:-1] + ("A" if issued.token[-1] != "A" else "B"),
                             issued.secret_sha256)
    assert not token_matches(issue_key().token, issued.secret_sha256)


@pytest.mark.parametrize("token", [
    "", "spate", "spate__", "bearer spate_x_y", "spate_01m82jh63y3yjkvhbt69sdwqpn_short",
    "spate_01M82JH63Y3YJKVHBT69SDWQPN_" + "a" * 43,
    "spate_01m82jh63y3yjkvhbt69sdwqpn_" + "a" * 42 + "-",
    "other_01m82jh63y3yjkvhbt69sdwqpn_" + "a" * 43,
])
def test_malformed_tokens_have_no_key_id(token: str) -> None:
    assert parse_key_id(token) is None


def test_display_prefix_shows_the_id_and_four_secret_characters() -> None:
    issued = issue_key()
    shown = display_prefix(issued.token)
    assert shown == issued.token[: len("spate_") + 26 + 1 + 4]


def test_roles_include_the_ones_below() -> None:
    assert Role.ADMIN.allows(Role.DEVELOPER) and Role.ADMIN.allows(Role.VIEWER)
    assert Role.DEVELOPER.allows(Role.VIEWER) and not Role.DEVELOPER.allows(Role.ADMIN)
    assert not Role.VIEWER.allows(Role.DEVELOPER)
