"""Placing rows by key-group range: each task's rows land in its own partition,
and a step that aggregates routed rows hands them to its tasks with one shuffle.
Running them: no job of their own, each task's stats known once a job read its rows."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.runtime.tasks import (
    KEY_GROUP,
    ROUTING_COLUMNS,
    TaskEpoch,
    TaskReports,
    TaskRouting,
    TaskStats,
    route,
    run_ranges,
    spark_int_hash,
)
from spate.statestore import CachedPipelineState, EpochWriter, open_store, ship
from tests.engine.harness import spark_jobs

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


def _odd_rows(rows: pa.Table, state: CachedPipelineState, writer: EpochWriter,
              epoch: TaskEpoch, stats: TaskStats) -> pa.Table:
    """A range's work for the tests below: takes every row in, returns the odd ``v``."""
    del state, writer, epoch
    stats.rows_in = rows.num_rows
    return rows.filter(pc.equal(pc.bit_wise_and(rows.column("v"), 1), 1))


_ODD_SCHEMA = T.StructType([T.StructField(KEY_GROUP, T.IntegerType()),
                            T.StructField("v", T.LongType())])


def _epoch(tmp_path: Path) -> tuple[Any, TaskEpoch]:
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    state = store.pipeline("t", "p")
    state.begin_epoch(0, RANGES)
    return state, TaskEpoch(ship(state), "t", "p", secrets.token_hex(4), 0, None,
                            tuple((r.start, r.stop) for r in RANGES), 0, 0)


def test_the_range_tasks_run_inside_the_job_that_reads_their_rows(spark: Any,
                                                                   tmp_path: Path) -> None:
    """No job of their own: the first reader's job runs them, and their stats come with
    it; every range's writer has committed, so the epoch commits."""
    state, epoch = _epoch(tmp_path)
    reports = TaskReports(spark)
    with spark_jobs(spark) as at_the_call:
        rows, stats = run_ranges(_key_groups(spark), _odd_rows, epoch, _ODD_SCHEMA,
                                 TaskRouting(RANGES), None, reports)
    assert at_the_call == []
    with spark_jobs(spark) as reading:
        assert sorted(r["v"] for r in rows.collect()) == sorted(
            v % 7 for v in range(640) if v % 7 % 2 == 1)
        total = stats.get()
    assert len(reading) == 1
    assert total.rows_in == 640 and total.rows_out == len([v for v in range(640) if v % 7 % 2])
    state.commit_epoch(0, {})
    rows.unpersist()


def test_tasks_no_job_ran_run_when_their_stats_are_asked_for(spark: Any, tmp_path: Path) -> None:
    """A reader that stops early (a preview's limit) leaves tasks unrun: asking for the
    stats runs them, and each task counts once."""
    state, epoch = _epoch(tmp_path)
    reports = TaskReports(spark)
    rows, stats = run_ranges(_key_groups(spark), _odd_rows, epoch, _ODD_SCHEMA,
                             TaskRouting(RANGES), None, reports)
    rows.limit(1).collect()
    assert stats.get().rows_in == 640
    assert reports.accumulator.value == {}  # taken: a long run's reports do not pile up
    state.commit_epoch(0, {})
    rows.unpersist()
