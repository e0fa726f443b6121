"""An epoch writes each of its sinks every row its queries send there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.engine.harness import read_lines, run_pipeline


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
    counters = {name: sorted(json.loads(line)["counter"]
                             for line in read_lines(tmp_path / f"{name}.jsonl"))
                for name in sinks}
    assert counters == {"evens": list(range(0, 3000, 2)), "odds": list(range(1, 3000, 2)),
                        "all": list(range(3000))}
