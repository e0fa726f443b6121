"""The batched lookup join over Arrow batches (cache, one fetch per batch, INNER/LEFT)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
import redis
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, ColumnDef
from spate.engine.connectors.core.lookup import CacheSettings
from spate.engine.runtime.lookup import LookupCache, LookupJoiner
from tests.engine.lookup.support import PgTable, lookup_table
from tests.engine.lookup.test_cache import Clock

COLUMNS = (ColumnDef("id", T.StringType()), ColumnDef("name", T.StringType()))


def _redis_joiner(redis_url: str, prefix: str, cache: LookupCache | None) -> LookupJoiner:
    table = lookup_table("redis", COLUMNS, ("id",), address=redis_url, format="json",
                         key__prefix=prefix)
    return LookupJoiner(CONNECTORS["redis"].create_lookup(table), cache)


def _batch(keys: list[str | None]) -> pa.RecordBatch:
    return pa.record_batch({"n": list(range(len(keys))), "key": pa.array(keys, pa.string())})


def _pairs(left: pa.Table, right: pa.Table) -> list[tuple[int, str | None]]:
    return sorted(zip(left.column("n").to_pylist(), right.column("name").to_pylist(),
                      strict=True))


@pytest.mark.parametrize("keep_unmatched", [True, False])
def test_rows_are_matched_by_key(redis_url: str, redis_prefix: str,
                                 redis_client: redis.Redis, keep_unmatched: bool) -> None:
    redis_client.set(f"{redis_prefix}a", json.dumps({"name": "alice"}))
    redis_client.set(f"{redis_prefix}b", json.dumps({"name": "bob"}))
    joiner = _redis_joiner(redis_url, redis_prefix, None)
    left, right = joiner.join(_batch(["a", "x", None, "b", "a"]), ["key"], keep_unmatched)
    matched = [(0, "alice"), (3, "bob"), (4, "alice")]
    unmatched = [(1, None), (2, None)]
    assert _pairs(left, right) == sorted(matched + (unmatched if keep_unmatched else []))
    # The key of an unmatched row is NULL on the right, as in SQL.
    assert right.column("id").null_count == (2 if keep_unmatched else 0)
    assert joiner.fetched_keys == 3  # the distinct non-NULL keys: a, x, b
    joiner.source.close()


def test_the_cache_serves_repeated_keys_until_their_ttl(
        redis_url: str, redis_prefix: str, redis_client: redis.Redis) -> None:
    redis_client.set(f"{redis_prefix}a", json.dumps({"name": "alice"}))
    clock = Clock()
    cache = LookupCache(CacheSettings(max_bytes=1_000_000, ttl_s=30), timer=clock)
    joiner = _redis_joiner(redis_url, redis_prefix, cache)
    joiner.join(_batch(["a", "b"]), ["key"], True)
    assert (joiner.fetched_keys, cache.misses, cache.hits) == (2, 2, 0)
    # The store changes, but cached rows (and the cached absence of b) are served.
    redis_client.set(f"{redis_prefix}a", json.dumps({"name": "ann"}))
    redis_client.set(f"{redis_prefix}b", json.dumps({"name": "bob"}))
    left, right = joiner.join(_batch(["a", "b", "a"]), ["key"], True)
    assert _pairs(left, right) == [(0, "alice"), (1, None), (2, "alice")]
    assert (joiner.fetched_keys, cache.hits) == (2, 2)
    clock.now += 31
    left, right = joiner.join(_batch(["a", "b"]), ["key"], True)
    assert _pairs(left, right) == [(0, "ann"), (1, "bob")]
    assert joiner.fetched_keys == 4
    joiner.source.close()


def test_without_a_cache_every_batch_fetches(redis_url: str, redis_prefix: str,
                                             redis_client: redis.Redis) -> None:
    redis_client.set(f"{redis_prefix}a", json.dumps({"name": "alice"}))
    joiner = _redis_joiner(redis_url, redis_prefix, None)
    joiner.join(_batch(["a"]), ["key"], False)
    redis_client.set(f"{redis_prefix}a", json.dumps({"name": "ann"}))
    left, right = joiner.join(_batch(["a"]), ["key"], False)
    assert _pairs(left, right) == [(0, "ann")]
    joiner.source.close()


def test_composite_postgres_keys(postgres_url: str, pg_table: PgTable) -> None:
    name = pg_table("region text, id int, name text, PRIMARY KEY (region, id)",
                    [("eu", 1, "a"), ("us", 1, "b")])
    columns = (ColumnDef("region", T.StringType()), ColumnDef("id", T.IntegerType()),
               ColumnDef("name", T.StringType()))
    table = lookup_table("postgres", columns, ("region", "id"), url=postgres_url, table=name)
    cache = LookupCache(CacheSettings(max_bytes=1_000_000))
    joiner = LookupJoiner(CONNECTORS["postgres"].create_lookup(table), cache)
    batch = pa.record_batch({"n": [0, 1, 2, 3], "r": ["eu", "us", "eu", None],
                             "i": pa.array([1, 1, 2, 1], pa.int32())})
    for _ in range(2):
        left, right = joiner.join(batch, ["r", "i"], True)
        assert _pairs(left, right) == [(0, "a"), (1, "b"), (2, None), (3, None)]
    assert (cache.misses, cache.hits) == (3, 3)
    joiner.source.close()
