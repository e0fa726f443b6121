"""An epoch's sinks are written at once (``epoch.concurrently``): each in a thread that
carries the epoch's Spark job properties, every result in order, the first error raised."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.engine.runtime.epoch import concurrently
from tests.engine.harness import read_lines, run_pipeline


def test_the_calls_run_at_the_same_time_and_return_in_order() -> None:
    # Each call waits for the other to have started: one after another, the first times out.
    both = threading.Barrier(2, timeout=30)

    def call(value: int) -> int:
        both.wait()
        return value * 10

    assert concurrently([lambda: call(1), lambda: call(2)]) == [10, 20]


def test_the_first_error_in_order_is_raised_once_every_call_ended() -> None:
    ended = []

    def fails(message: str) -> int:
        raise ValueError(message)

    def succeeds() -> int:
        ended.append(True)
        return 1

    with pytest.raises(ValueError, match="first"):
        concurrently([succeeds, lambda: fails("first"), lambda: fails("second"), succeeds])
    assert ended == [True, True]


@pytest.mark.spark
def test_the_threads_jobs_carry_the_callers_job_group(spark: SparkSession) -> None:
    context = spark.sparkContext
    context.setJobGroup("spate-epoch-group", "an epoch's jobs")
    try:
        seen = concurrently([lambda: context.getLocalProperty("spark.jobGroup.id")] * 2)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
    assert seen == ["spate-epoch-group", "spate-epoch-group"]


@pytest.mark.spark
def test_a_pipeline_writes_each_of_its_sinks_every_row(spark: SparkSession,
                                                       tmp_path: Path) -> None:
    sinks = ["evens", "odds", "all"]
    sql = "CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '10000', " \
          "message_count = '3000');\n"
    wheres = {"evens": "counter % 2 = 0", "odds": "counter % 2 = 1", "all": "true"}
    for name in sinks:
        sql += (f"CREATE TABLE {name} WITH (connector = 'single_file', type = 'sink', "
                f"path = '{tmp_path / name}.jsonl', format = 'json');\n"
                f"INSERT INTO {name} SELECT counter FROM ticks WHERE {wheres[name]};\n")
    run_pipeline(spark, sql, tmp_path / "work", parallelism=2)
    counters = {name: sorted(int(line.split(":")[1].rstrip("}"))
                             for line in read_lines(tmp_path / f"{name}.jsonl"))
                for name in sinks}
    assert counters == {"evens": list(range(0, 3000, 2)), "odds": list(range(1, 3000, 2)),
                        "all": list(range(3000))}
