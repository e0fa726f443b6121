"""The lookup step on Spark: mapInArrow doing the lookups on executors."""

from __future__ import annotations

import json
import secrets

import pytest
import redis
from pyspark.sql import SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import ColumnDef, TableConfig
from spate.engine.planner.plan import LookupJoin
from spate.engine.runtime.lookup import lookup_join
from tests.engine.lookup.support import PgTable, lookup_table

pytestmark = pytest.mark.spark


def _spec(table: TableConfig, outputs: tuple[str, ...], keep_unmatched: bool) -> LookupJoin:
    return LookupJoin(operator_id="q0_lookup", output_view="unused", input_sql="unused",
                      table=table, key_inputs=("k",), outputs=outputs,
                      keep_unmatched=keep_unmatched)


@pytest.mark.parametrize("keep_unmatched", [False, True])
def test_redis_lookup_step(spark: SparkSession, redis_url: str, redis_prefix: str,
                           redis_client: redis.Redis, keep_unmatched: bool) -> None:
    redis_client.set(f"{redis_prefix}7", json.dumps({"name": "seven", "score": 0.5}))
    columns = (ColumnDef("id", T.LongType()), ColumnDef("name", T.StringType()),
               ColumnDef("score", T.DoubleType()))
    table = lookup_table("redis", columns, ("id",), address=redis_url, format="json",
                         key__prefix=redis_prefix, lookup__cache__max_bytes=100_000)
    step = _spec(table, ("c_id", "c_name", "c_score"), keep_unmatched)
    left = spark.createDataFrame([(1, 7), (2, 8), (3, None), (4, 7)], "n INT, k BIGINT")
    rows = sorted(tuple(r) for r in lookup_join(left, step, secrets.token_hex(8)).collect())
    matched = [(1, 7, 7, "seven", 0.5), (4, 7, 7, "seven", 0.5)]
    unmatched = [(2, 8, None, None, None), (3, None, None, None, None)]
    assert rows == sorted(matched + (unmatched if keep_unmatched else []))


def test_postgres_lookup_step_keeps_timestamps(spark: SparkSession, postgres_url: str,
                                               pg_table: PgTable) -> None:
    name = pg_table("code text PRIMARY KEY, opened timestamp",
                    [("a", "2024-05-01 12:00:00")])
    columns = (ColumnDef("code", T.StringType()), ColumnDef("opened", T.TimestampType()))
    table = lookup_table("postgres", columns, ("code",), url=postgres_url, table=name)
    step = _spec(table, ("code", "opened"), True)
    left = spark.sql("SELECT 'a' AS k, TIMESTAMP'2024-05-01 12:00:01' AS ts "
                     "UNION ALL SELECT 'b', TIMESTAMP'2024-05-01 12:00:02'")
    joined = lookup_join(left, step, secrets.token_hex(8)).selectExpr(
        "k", "CAST(opened AS STRING) AS opened", "ts > opened AS later")
    assert sorted(tuple(r) for r in joined.collect()) == [
        ("a", "2024-05-01 12:00:00", True), ("b", None, None)]
