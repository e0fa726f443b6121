"""The UDF file and the SQL ``docs/udfs.md`` shows are real: the file declares the
UDFs it says, its functions compute what their names promise, and the SQL plans
with them (over a table with the columns it reads)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa

from spate.engine.explain import explain_plan
from spate.engine.planner import plan_pipeline
from spate.engine.udf import load_udfs

PAGE = Path(__file__).resolve().parents[2] / "docs" / "udfs.md"
#: The table the page's SQL reads, with the columns it uses.
EVENTS = ("CREATE TABLE events (page TEXT, clicks BIGINT, views BIGINT, price DOUBLE, "
          "latency_ms DOUBLE, ts TIMESTAMP NOT NULL, WATERMARK FOR ts) WITH ("
          "connector = 'single_file', type = 'source', path = 'events.jsonl', format = 'json');\n")


def fenced(language: str) -> list[str]:
    blocks = re.findall(r"^```(\w*)\n(.*?)^```", PAGE.read_text(encoding="utf-8"),
                        re.MULTILINE | re.DOTALL)
    return [text for info, text in blocks if info == language]


def test_the_page_shows_one_udf_file_and_sql_using_it() -> None:
    assert len(fenced("python")) == 1 and fenced("sql")


def test_the_udf_file_declares_its_three_kinds() -> None:
    registry = load_udfs(fenced("python")[0])
    kinds = {name: registry.get(name).kind for name in ("ratio", "scaled", "spread")}
    assert kinds == {"ratio": "scalar", "scaled": "vectorized", "spread": "aggregate"}


def test_the_udfs_compute_what_they_say() -> None:
    namespace: dict[str, Any] = {}
    # the page's own code, run here as its author would (Spate itself never runs it to plan)
    exec(compile(fenced("python")[0], str(PAGE), "exec"), namespace)
    assert namespace["ratio"](1, 4) == 0.25 and namespace["ratio"](1, None) is None
    scaled = namespace["scaled"](pa.array([1.0, 2.5]), pa.array([2.0, 2.0]))
    assert scaled.to_pylist() == [2.0, 5.0]
    assert namespace["spread"]([3.0, 1.0, 7.5]) == 6.5 and namespace["spread"]([]) == 0.0


def test_the_sql_plans_with_the_udfs() -> None:
    registry = load_udfs(fenced("python")[0])
    [sql] = fenced("sql")
    text = explain_plan(plan_pipeline(EVENTS + sql, udfs=registry, check_inputs=False))
    assert "RATIO(clicks, views)" in text and "SCALED(price, 1.2e0)" in text
    assert "TUMBLE 1 min AS w by page: collect_list(STRUCT(latency_ms))" in text
    assert "SPREAD(collect_list(STRUCT(latency_ms))) AS jitter" in text
