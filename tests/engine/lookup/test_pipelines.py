"""Whole pipelines with lookup joins, run on the shared SparkSession against the real
Redis and PostgreSQL servers: INNER and LEFT, single and composite keys, a lookup
feeding a TUMBLE aggregate, secrets from the environment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis

from tests.engine.harness import read_lines, run_pipeline
from tests.engine.lookup.support import PgTable

pytestmark = pytest.mark.spark

ORDERS = [
    {"id": 1, "cid": 10, "region": "eu", "ts": "2024-01-01T00:00:01Z"},
    {"id": 2, "cid": 11, "region": "eu", "ts": "2024-01-01T00:00:02Z"},
    {"id": 3, "cid": 99, "region": "eu", "ts": "2024-01-01T00:00:03Z"},
    {"id": 4, "cid": None, "region": "us", "ts": "2024-01-01T00:00:04Z"},
    {"id": 5, "cid": 10, "region": "us", "ts": "2024-01-01T00:00:05Z"},
    {"id": 6, "cid": 10, "region": "eu", "ts": "2024-01-01T00:01:05Z"},
]


def _orders(tmp_path: Path) -> str:
    path = tmp_path / "orders.json"
    path.write_text("".join(json.dumps(row) + "\n" for row in ORDERS))
    return (f"CREATE TABLE orders (id BIGINT, cid BIGINT, region TEXT, ts TIMESTAMP NOT NULL, "
            f"WATERMARK FOR ts) WITH (connector = 'single_file', type = 'source', "
            f"path = '{path}', format = 'json');\n")


def _sink(tmp_path: Path, name: str) -> str:
    return (f"CREATE TABLE {name} WITH (connector = 'single_file', type = 'sink', "
            f"path = '{tmp_path / name}.json', format = 'json');\n")


def _rows(tmp_path: Path, name: str) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in read_lines(tmp_path / f"{name}.json")]
    return sorted(rows, key=lambda r: (r.get("id", 0), json.dumps(r, sort_keys=True)))


def test_redis_inner_and_left_lookups(spark: Any, tmp_path: Path, redis_url: str,
                                      redis_prefix: str, redis_client: redis.Redis) -> None:
    redis_client.set(f"{redis_prefix}10", json.dumps({"name": "ann", "tier": "gold"}))
    redis_client.set(f"{redis_prefix}11", json.dumps({"name": "bob"}))
    sql = (_orders(tmp_path) + _sink(tmp_path, "inner_out") + _sink(tmp_path, "left_out")
           + "CREATE TEMPORARY TABLE customers (id TEXT PRIMARY KEY, name TEXT NOT NULL, "
           f"tier TEXT) WITH (connector = 'redis', address = '{redis_url}', format = 'json', "
           f"'key.prefix' = '{redis_prefix}', 'lookup.cache.max_bytes' = 100000, "
           "'lookup.cache.ttl' = INTERVAL '1' MINUTE);\n"
           "INSERT INTO inner_out SELECT o.id, c.name, coalesce(c.tier, 'none') AS tier "
           "FROM orders o JOIN customers c ON c.id = o.cid;\n"
           "INSERT INTO left_out SELECT o.id, c.id AS customer, c.name FROM orders AS o "
           "LEFT OUTER JOIN customers AS c ON o.cid = c.id WHERE o.region = 'eu';\n")
    run_pipeline(spark, sql, tmp_path)
    assert _rows(tmp_path, "inner_out") == [
        {"id": 1, "name": "ann", "tier": "gold"}, {"id": 2, "name": "bob", "tier": "none"},
        {"id": 5, "name": "ann", "tier": "gold"}, {"id": 6, "name": "ann", "tier": "gold"}]
    assert _rows(tmp_path, "left_out") == [
        {"id": 1, "customer": "10", "name": "ann"}, {"id": 2, "customer": "11", "name": "bob"},
        {"id": 3, "customer": None, "name": None}, {"id": 6, "customer": "10", "name": "ann"}]


def test_postgres_lookups_with_a_composite_key_and_a_window(
        spark: Any, tmp_path: Path, postgres_url: str, pg_table: PgTable,
        monkeypatch: pytest.MonkeyPatch) -> None:
    table = pg_table("cid bigint, region text, name text, active boolean, "
                     "PRIMARY KEY (cid, region)",
                     [(10, "eu", "ann", True), (10, "us", "ann-us", True),
                      (11, "eu", "bob", False)])
    monkeypatch.setenv("SPATE_TEST_LOOKUP_URL", postgres_url)
    sql = (_orders(tmp_path) + _sink(tmp_path, "left_out") + _sink(tmp_path, "per_minute")
           + "CREATE TEMPORARY TABLE accounts (cid BIGINT PRIMARY KEY, region TEXT PRIMARY KEY, "
           "name TEXT) WITH (connector = 'postgres', url = '{{ SPATE_TEST_LOOKUP_URL }}', "
           f"query = 'SELECT cid, region, name FROM {table} WHERE active');\n"
           "INSERT INTO left_out SELECT o.id, a.name FROM orders o LEFT JOIN accounts a "
           "ON a.cid = o.cid AND a.region = lower(o.region);\n"
           "INSERT INTO per_minute SELECT TUMBLE(INTERVAL '1' MINUTE) AS w, a.name, "
           "count(*) AS orders FROM orders o JOIN accounts a ON a.region = o.region AND "
           "a.cid = o.cid GROUP BY w, a.name;\n")
    run_pipeline(spark, sql, tmp_path)
    assert _rows(tmp_path, "left_out") == [
        {"id": 1, "name": "ann"}, {"id": 2, "name": None}, {"id": 3, "name": None},
        {"id": 4, "name": None}, {"id": 5, "name": "ann-us"}, {"id": 6, "name": "ann"}]
    counts = [(r["w"]["start"][:19], r["name"], r["orders"])
              for r in _rows(tmp_path, "per_minute")]
    assert sorted(counts) == [("2024-01-01T00:00:00", "ann", 1),
                              ("2024-01-01T00:00:00", "ann-us", 1),
                              ("2024-01-01T00:01:00", "ann", 1)]
    with psycopg.connect(postgres_url) as connection:  # the lookups changed nothing
        assert connection.execute(f"SELECT count(*) FROM {table}").fetchone() == (3,)
