"""``GENERATED ALWAYS AS (expr) [STORED]``: a virtual column over a source's columns."""

from __future__ import annotations

import pytest

from spate.engine.planner import plan_pipeline

SOURCE = ("CREATE TABLE s (v TEXT, n BIGINT, w TEXT GENERATED ALWAYS AS (upper(v)){stored}) "
          "WITH (connector = 'single_file', path = 's.jsonl', format = 'json', type = 'source');"
          " SELECT w, n FROM s WHERE w <> 'X';")


@pytest.mark.parametrize("stored", ["", " STORED"])
def test_generated_column_with_or_without_stored(stored: str) -> None:
    plan = plan_pipeline(SOURCE.format(stored=stored))
    table = plan.tables["s"]
    assert table.generated == {"w": "CAST(UPPER(v) AS STRING)"}
    assert table.visible_columns == ["v", "n", "w"]
    assert plan.queries[0].output_columns == ("w", "n")
