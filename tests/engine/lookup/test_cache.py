"""The per-process lookup cache: byte bound, TTL per entry, hit and miss counts."""

from __future__ import annotations

import pytest

from spate.engine.connectors.core.lookup import CacheSettings
from spate.engine.runtime.lookup import LookupCache


class Clock:
    """A hand-moved monotonic clock, so expiry is tested without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_hits_and_misses_are_counted_and_absent_keys_are_cached() -> None:
    cache = LookupCache(CacheSettings(max_bytes=100_000))
    cache.put(("a",), ("a", "alice"))
    cache.put(("b",), None)  # looked up, no row
    found, missing = cache.get_many([("a",), ("b",), ("c",)])
    assert found == {("a",): ("a", "alice"), ("b",): None}
    assert missing == [("c",)]
    assert (cache.hits, cache.misses) == (2, 1)


def test_each_entry_expires_its_ttl_after_it_was_cached() -> None:
    clock = Clock()
    cache = LookupCache(CacheSettings(max_bytes=100_000, ttl_s=10.0), timer=clock)
    cache.put((1,), (1, "one"))
    clock.now += 6
    cache.put((2,), (2, "two"))
    clock.now += 5  # 11 s after the first entry, 5 s after the second
    found, missing = cache.get_many([(1,), (2,)])
    assert found == {(2,): (2, "two")} and missing == [(1,)]
    assert len(cache) == 1
    clock.now += 5
    assert cache.get_many([(2,)]) == ({}, [(2,)])
    assert len(cache) == 0 and cache.bytes_used == 0


def test_bytes_bound_evicts_the_least_recently_used_entries() -> None:
    cache = LookupCache(CacheSettings(max_bytes=2_000))
    row = ("x" * 300,)
    for i in range(20):
        cache.put((i,), row)
        cache.get_many([(0,)])  # key 0 stays recently used
    assert cache.bytes_used <= 2_000
    assert 1 < len(cache) < 20
    found, _ = cache.get_many([(0,), (19,), (1,)])
    assert set(found) == {(0,), (19,)}


def test_an_entry_larger_than_the_cache_is_not_kept() -> None:
    cache = LookupCache(CacheSettings(max_bytes=500))
    cache.put(("small",), ("s",))
    cache.put(("big",), ("y" * 1_000,))
    assert cache.get_many([("big",), ("small",)]) == ({("small",): ("s",)}, [("big",)])


def test_a_disabled_cache_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="disabled"):
        LookupCache(CacheSettings(max_bytes=0))
