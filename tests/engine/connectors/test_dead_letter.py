"""bad_data = 'dead_letter': undecodable records written to a sink table with the
epoch, through the real Redis (docs/sql/connectors.md#dead-letters)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from pyspark.sql import SparkSession

from spate.engine.planner import plan_pipeline
from spate.engine.planner.errors import PlanningError
from spate.engine.runtime.runner import EpochReport
from tests.conftest import redis_key_prefix
from tests.engine.harness import run_pipeline


@pytest.fixture
def prefix(redis_url: str) -> Iterator[str]:
    yield from redis_key_prefix(redis_url)


def _source(redis_url: str, stream: str, extra: str = "") -> str:
    return (f"CREATE TABLE events (id BIGINT NOT NULL, name TEXT) WITH (connector = 'redis', "
            f"type = 'source', address = '{redis_url}', stream = '{stream}', format = 'json', "
            f"'source.offset' = 'earliest', bad_data = 'dead_letter'{extra});\n")


def _sink(redis_url: str, name: str, key: str) -> str:
    return (f"CREATE TABLE {name} WITH (connector = 'redis', type = 'sink', "
            f"address = '{redis_url}', format = 'json', target = 'list', "
            f"'target.key_prefix' = '{key}');\n")


def test_undecodable_records_go_to_the_dead_letter_table(spark: SparkSession, tmp_path: Path,
                                                         redis_url: str, prefix: str) -> None:
    client = redis.Redis.from_url(redis_url)
    stream = f"{prefix}in"
    client.xadd(stream, {"value": json.dumps({"id": 1, "name": "a"})}, id="1000-0")
    client.xadd(stream, {"value": b"{not json\xff"}, id="2000-0")
    client.xadd(stream, {"value": json.dumps({"name": "no id"})}, id="3000-0")
    client.xadd(stream, {"other": "x"}, id="4000-0")
    client.xadd(stream, {"value": json.dumps({"id": 5, "name": "e"})}, id="5000-0")
    sql = (_source(redis_url, stream, ", 'dead_letter.table' = 'bad'")
           + _sink(redis_url, "out", f"{prefix}out") + _sink(redis_url, "bad", f"{prefix}bad")
           + "INSERT INTO out SELECT id, name FROM events;\n")
    reports: list[EpochReport] = []
    counters = run_pipeline(spark, sql, tmp_path, timeout_s=120, reports=reports,
                            stop_when=lambda: client.llen(f"{prefix}out") >= 2
                            and client.llen(f"{prefix}bad") >= 3)
    rows = [json.loads(v) for v in client.lrange(f"{prefix}out", 0, -1)]
    assert rows == [{"id": 1, "name": "a"}, {"id": 5, "name": "e"}]
    letters = sorted((json.loads(v) for v in client.lrange(f"{prefix}bad", 0, -1)),
                     key=lambda r: r["position"])
    assert [(r["source"], r["position"]) for r in letters] == [
        ("events", "2000-0"), ("events", "3000-0"), ("events", "4000-0")]
    assert base64.b64decode(letters[0]["record"]) == b"{not json\xff"
    assert "JSON" in letters[0]["error"]
    assert "column 'id' is NOT NULL" in letters[1]["error"]
    assert letters[2]["record"] is None and "has no field 'value'" in letters[2]["error"]
    assert all(r["at"] for r in letters)
    assert sum(r.rows_dead_lettered for r in reports) == 3
    assert counters["rows_dead_lettered"] == 3
    assert sum(r.rows_dropped for r in reports) == 3  # the job's metrics count them
    client.close()


@pytest.mark.parametrize(("tail", "message"), [
    ("", "needs option 'dead_letter.table'"),
    (", 'dead_letter.table' = 'nowhere'", "must name a sink table .* there is none"),
    (", 'dead_letter.table' = 'other'", "other is not a sink"),
    (", 'dead_letter.table' = 'out'", "no INSERT may write it too"),
])
def test_the_dead_letter_table_is_checked_at_plan_time(tail: str, message: str) -> None:
    sql = (_source("redis://127.0.0.1:6379/0", "s", tail) + _sink("redis://h", "out", "o")
           + "CREATE TABLE other (v TEXT) WITH (connector = 'redis', type = 'source', "
           "address = 'redis://h', stream = 'x', format = 'json');\n"
           "INSERT INTO out SELECT id, name FROM events;\n")
    with pytest.raises(PlanningError, match=message):
        plan_pipeline(sql)


def test_other_connectors_refuse_dead_letters_for_now() -> None:
    sql = ("CREATE TABLE k (v TEXT) WITH (connector = 'kafka', type = 'source', "
           "bootstrap_servers = 'h:9092', topic = 't', format = 'json', "
           "bad_data = 'dead_letter', 'dead_letter.table' = 'bad');\n"
           + _sink("redis://h", "bad", "b") + _sink("redis://h", "out", "o")
           + "INSERT INTO out SELECT v FROM k;\n")
    with pytest.raises(PlanningError, match="not supported by kafka sources yet"):
        plan_pipeline(sql)
