"""Versioned value encoding."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.statestore import CorruptValueError
from spate.statestore.encoding import COMPRESS_FROM_BYTES, decode, encode

values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.text(),
              st.binary(), st.floats(allow_nan=False)),
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=20)


@given(values)
def test_values_round_trip(value: object) -> None:
    assert decode(encode(value)) == value


def test_version_1_values_still_read() -> None:
    """Values written before the checksummed format keep reading."""
    written_by_version_1 = b"\x01" + msgpack.packb([[3, 7], {"n": 2}], use_bin_type=True)
    assert decode(written_by_version_1) == [[3, 7], {"n": 2}]


def test_large_values_are_compressed() -> None:
    value = ["same words again"] * 2000
    raw = encode(value)
    assert len(raw) < len(msgpack.packb(value)) / 5
    assert len(raw) < COMPRESS_FROM_BYTES * 2
    assert decode(raw) == value


@pytest.mark.parametrize("damage", [
    lambda raw: raw[:-1] + bytes([raw[-1] ^ 0x40]),  # a flipped bit
    lambda raw: raw[:3],                              # truncated header
    lambda raw: b"",                                  # empty
    lambda raw: b"\x09" + raw[1:],                    # unknown version
    lambda raw: b"\x01\xc1",                          # version 1, invalid msgpack
])
def test_corrupt_values_raise_a_typed_error(damage) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CorruptValueError, match="restore|upgrade"):
        decode(damage(encode({"panes": [1, 2, 3]})))
