"""Output column names: a join's columns of the same name are renamed as DataFusion
renames them (``counter:1``); any other repeated name is a located error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.engine.planner import PlanningError, plan_pipeline
from tests.engine.harness import run_pipeline

TICKS = """
CREATE TABLE a WITH (connector = 'impulse', event_rate = '1000', message_count = '4');
CREATE TABLE b WITH (connector = 'impulse', event_rate = '1000', message_count = '3');
"""


def _columns(query: str) -> tuple[str, ...]:
    return plan_pipeline(TICKS + query).queries[0].output_columns


def test_star_over_a_join_renames_the_later_columns() -> None:
    assert _columns("SELECT * FROM a JOIN b ON a.counter = b.counter;") == (
        "counter", "subtask_index", "counter:1", "subtask_index:1")
    assert _columns("SELECT b.*, a.counter FROM a JOIN b ON a.counter = b.counter;") == (
        "counter", "subtask_index", "counter:1")


def test_a_taken_name_is_skipped() -> None:
    assert _columns('SELECT a.counter, a.subtask_index AS "counter:1", b.counter '
                    "FROM a JOIN b ON a.counter = b.counter;") == (
        "counter", "counter:1", "counter:2")


def test_renamed_columns_are_read_by_their_new_name() -> None:
    assert _columns('SELECT "counter:1" AS right_counter FROM (SELECT * FROM a JOIN b '
                    "ON a.counter = b.counter);") == ("right_counter",)


@pytest.mark.parametrize("items, column", [
    ("a.counter, a.counter", 19),                    # one column twice
    ("a.counter AS n, b.counter AS n", 24),          # two aliases
    ("a.subtask_index AS counter, b.counter", 36),   # an alias and a column
])
def test_other_repeated_names_are_errors(items: str, column: int) -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(TICKS + f"SELECT {items} FROM a JOIN b ON a.counter = b.counter;")
    assert "appears twice; give each an alias" in caught.value.message
    assert (caught.value.line, caught.value.column) == (4, column)  # the second item


@pytest.mark.spark
def test_renamed_columns_reach_the_sink(spark: SparkSession, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    sql = TICKS + f"""
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
                       type = 'sink');
CREATE VIEW pairs AS SELECT * FROM a JOIN b ON a.counter = b.counter;
INSERT INTO out SELECT "counter:1" * 10 AS tens, * FROM pairs;"""
    run_pipeline(spark, sql, tmp_path)
    rows = sorted((json.loads(line) for line in out.read_text().splitlines()),
                  key=lambda row: row["counter"])
    assert rows == [{"tens": 10 * n, "counter": n, "subtask_index": 0, "counter:1": n,
                     "subtask_index:1": 0} for n in range(3)]
