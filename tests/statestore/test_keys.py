"""Key encoding and key groups."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spate.statestore import StateStoreError, key_group_of, owner_of, pack_key, split_key_groups
from spate.statestore.keys import prefix_bounds, unpack_key

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63), st.text(max_size=8),
                    st.binary(max_size=8), st.floats(allow_nan=False))
user_keys = st.lists(scalars, max_size=4).map(tuple)


@given(user_keys)
def test_keys_round_trip(key: tuple[object, ...]) -> None:
    assert unpack_key(pack_key(key)) == key


@given(st.lists(st.tuples(st.integers(), st.text(max_size=5)), min_size=2, max_size=20))
def test_encoding_preserves_order(keys: list[tuple[int, str]]) -> None:
    assert sorted(keys) == sorted(keys, key=pack_key)


@given(user_keys, user_keys)
def test_prefix_bounds_hold_exactly_the_extensions(prefix: tuple[object, ...],
                                                   rest: tuple[object, ...]) -> None:
    start, stop = prefix_bounds(prefix)
    packed = pack_key(prefix + rest)
    assert start <= packed and (stop is None or packed < stop)


def test_prefix_bounds_exclude_other_keys() -> None:
    start, stop = prefix_bounds(("user", 1))
    assert stop is not None
    for other in [("user", 2), ("user",), ("user", 0, "x"), ("users", 1)]:
        packed = pack_key(other)
        assert not start <= packed < stop, other


def test_unencodable_key_is_a_clear_error() -> None:
    with pytest.raises(StateStoreError, match="cannot encode state key"):
        pack_key((object(),))


@given(st.integers(1, 4096), st.data())
def test_split_covers_every_group_exactly_once(groups: int, data: st.DataObject) -> None:
    parallelism = data.draw(st.integers(1, groups))
    ranges = split_key_groups(groups, parallelism)
    assert len(ranges) == parallelism
    assert [g for r in ranges for g in r] == list(range(groups))
    sizes = [len(r) for r in ranges]
    assert max(sizes) - min(sizes) <= 1
    task = data.draw(st.integers(0, parallelism - 1))
    assert all(owner_of(g, groups, parallelism) == task for g in ranges[task])


def test_split_rejects_impossible_parallelism() -> None:
    with pytest.raises(StateStoreError, match="between 1 and the number of key groups"):
        split_key_groups(8, 9)
    with pytest.raises(StateStoreError):
        split_key_groups(0, 1)


def test_key_group_is_stable_across_processes() -> None:
    """Python salts hash() per process; the key-group hash must not change."""
    keys = [("auction", 17), ("person", "alice"), (None, 3.5)]
    script = ("import sys; from statestore import key_group_of; "
              f"print([key_group_of(k, 128) for k in {keys!r}])")
    outputs = {subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env={"PYTHONHASHSEED": seed}, check=True).stdout
               for seed in ("1", "2", "3")}
    assert outputs == {f"{[key_group_of(k, 128) for k in keys]}\n"}
    assert all(0 <= key_group_of(k, 128) < 128 for k in keys)
