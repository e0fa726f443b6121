"""Placing rows by key-group range: each task's rows land in its own partition,
and a step that aggregates routed rows hands them to its tasks with one shuffle."""

from __future__ import annotations

from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spate.engine.runtime.tasks import (
    KEY_GROUP,
    ROUTING_COLUMNS,
    TaskRouting,
    route,
    spark_int_hash,
)

RANGES = [range(0, 5), range(5, 6), range(6, 64)]


def _exchanges(frame: DataFrame) -> int:
    """Shuffles ``frame``'s plan runs (a cached relation's own plan has run already)."""
    plan = frame._jdf.queryExecution().executedPlan().toString()  # noqa: SLF001
    return plan.split("InMemoryRelation")[0].count("Exchange ")


def _key_groups(spark: Any) -> DataFrame:
    return spark.range(0, 640).select((F.col("id") % 64).cast("int").alias(KEY_GROUP),
                                      (F.col("id") % 7).alias("v"))


def test_each_tasks_rows_and_tick_land_in_its_own_partition(spark: Any) -> None:
    routing = TaskRouting(RANGES)
    placed = route(_key_groups(spark), routing) \
        .select(KEY_GROUP, ROUTING_COLUMNS[0], F.spark_partition_id().alias("p")).collect()
    assert len(placed) == 640 + len(RANGES)  # every row, and one tick per task
    for row in placed:
        task = row[ROUTING_COLUMNS[0]]
        assert row["p"] == task
        if row[KEY_GROUP] is not None:
            assert row[KEY_GROUP] in RANGES[task]
    ticks = sorted(row["p"] for row in placed if row[KEY_GROUP] is None)
    assert ticks == [0, 1, 2]


def test_routing_again_places_rows_alike_with_what_it_built_once(spark: Any) -> None:
    """Each epoch routes a new batch: the routing columns and tick rows are built on the
    first and reused (each built column costs calls into the driver's JVM)."""
    routing = TaskRouting(RANGES)
    placements = []
    for _ in range(2):
        placed = route(_key_groups(spark), routing) \
            .select(KEY_GROUP, F.spark_partition_id().alias("p")).collect()
        placements.append(sorted((row[KEY_GROUP] is None, row[KEY_GROUP] or -1, row["p"])
                                 for row in placed))
    assert placements[0] == placements[1]
    assert routing.columns() is routing.columns()
    assert routing.ticks(spark) is routing.ticks(spark)
    assert routing.ticks(spark.newSession()) is not routing.ticks(spark)


def test_an_aggregate_of_routed_rows_keeps_their_placement_with_one_shuffle(spark: Any) -> None:
    routing = TaskRouting(RANGES)
    routed = route(_key_groups(spark), routing)
    partials = routed.groupBy(KEY_GROUP, "v", *ROUTING_COLUMNS).agg(F.count(F.lit(1)).alias("n"))
    assert _exchanges(partials) == 1
    cached = partials.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        # What the tasks run on: the cached partials, partitions as placed.
        placed = cached.select(KEY_GROUP, ROUTING_COLUMNS[0],
                               F.spark_partition_id().alias("p"))
        assert _exchanges(placed) == 0
        rows = placed.collect()
        assert {(r["p"], r[ROUTING_COLUMNS[0]]) for r in rows} == {(0, 0), (1, 1), (2, 2)}
        assert all(r[KEY_GROUP] is None or r[KEY_GROUP] in RANGES[r["p"]] for r in rows)
    finally:
        cached.unpersist()


def test_the_routes_hash_as_sparks_own_hash_function_does(spark: Any) -> None:
    # Negative and large values too: Spark's hash of an INT over its four bytes.
    values = [0, 1, 2, 41, 42, 1000, -1, -2**31, 2**31 - 1, 123456789]
    frame = spark.createDataFrame([(v,) for v in values], "v INT")
    hashed = {row["v"]: row["h"] for row in frame.select("v", F.hash("v").alias("h")).collect()}
    assert {v: spark_int_hash(v) for v in values} == hashed
