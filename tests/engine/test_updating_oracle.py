"""Oracle test: a random change stream (debezium_json) through Spate's updating
aggregates, written as debezium_json changes and applied to a table, equals the
same queries computed in batch by DuckDB over the final table — whatever the
epoch sizes and the flush interval."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.harness import run_pipeline

pytestmark = pytest.mark.spark

PIPELINE = """
CREATE TABLE items (id BIGINT PRIMARY KEY, k BIGINT, v BIGINT)
WITH (connector = 'single_file', path = '{dir}/items.jsonl', format = 'debezium_json',
      type = 'source', max_lines_per_batch = '{batch}');
CREATE TABLE groups WITH (connector = 'single_file', path = '{dir}/groups.jsonl',
                          format = 'debezium_json', type = 'sink');
CREATE TABLE sizes WITH (connector = 'single_file', path = '{dir}/sizes.jsonl',
                         format = 'debezium_json', type = 'sink');
INSERT INTO groups
SELECT k, count(*) AS n, count(v) AS nv, sum(v) AS total, min(v) AS low, max(v) AS high,
       count(DISTINCT v) AS kinds, min(CAST(v AS DOUBLE) / 4) AS flow,
       max(CAST(v AS DOUBLE) / 4) AS fhigh, count(DISTINCT CAST(v AS DOUBLE) / 4) AS fkinds,
       min(CAST(v AS TEXT)) AS tlow, max(CAST(v AS TEXT)) AS thigh,
       count(DISTINCT CAST(v AS TEXT)) AS tkinds
FROM items WHERE v IS NULL OR v > -3 GROUP BY k HAVING count(*) > 1;
INSERT INTO sizes
SELECT n, count(*) AS groups, sum(total) AS total, min(total) AS bottom, max(total) AS top,
       round(var_pop(total), 4) AS spread
FROM (SELECT k, count(*) AS n, sum(v) AS total FROM items GROUP BY k) GROUP BY n;
"""

GROUPS = """SELECT k, count(*), count(v), sum(v), min(v), max(v), count(DISTINCT v),
min(CAST(v AS DOUBLE) / 4), max(CAST(v AS DOUBLE) / 4), count(DISTINCT CAST(v AS DOUBLE) / 4),
min(CAST(v AS TEXT)), max(CAST(v AS TEXT)), count(DISTINCT CAST(v AS TEXT))
FROM items WHERE v IS NULL OR v > -3 GROUP BY k HAVING count(*) > 1"""
SIZES = """SELECT n, count(*), sum(total), min(total), max(total), round(var_pop(total), 4)
FROM (SELECT k, count(*) AS n, sum(v) AS total FROM items GROUP BY k) GROUP BY n"""


def _changes(operations: list[tuple[int, int, int | None]]) -> tuple[list[str], dict[int, Any]]:
    """Envelopes for (id, k, v) operations: a new id is created, a known one updated,
    or deleted when k is 0.  Returns the lines and the final table."""
    table: dict[int, dict[str, Any]] = {}
    lines = []
    for item, k, v in operations:
        before = table.get(item)
        if before is not None and k == 0:
            op, after = "d", None
            del table[item]
        elif k == 0:
            continue
        else:
            after = {"id": item, "k": k, "v": v}
            op = "u" if before is not None else "c"
            table[item] = after
        lines.append(json.dumps({"before": before, "after": after, "op": op}))
    return lines, table


def _applied(path: Path, columns: list[str]) -> Counter[tuple[Any, ...]]:
    """The rows left after applying a debezium_json change file in order."""
    rows: Counter[tuple[Any, ...]] = Counter()
    for line in path.read_text().splitlines() if path.exists() else []:
        change = json.loads(line)
        if change["before"] is not None:
            old = tuple(change["before"][c] for c in columns)
            assert rows[old] > 0, f"withdraws a row that is not there: {change}"
            rows[old] -= 1
        if change["after"] is not None:
            rows[tuple(change["after"][c] for c in columns)] += 1
    return +rows


operations = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 3),
                                st.one_of(st.none(), st.integers(-4, 4))),
                      min_size=1, max_size=40)


@settings(max_examples=6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=operations, batch=st.integers(2, 15), flush_ms=st.sampled_from([0, 600_000]))
def test_applied_changes_equal_duckdb(ops, batch, flush_ms, spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    workdir = tmp_path_factory.mktemp("updating_oracle")
    lines, table = _changes(ops)
    (workdir / "items.jsonl").write_text("".join(line + "\n" for line in lines))
    run_pipeline(spark, PIPELINE.format(dir=workdir, batch=batch), workdir,
                 update_flush_interval_ms=flush_ms)
    db = duckdb.connect()
    db.execute("CREATE TABLE items (id BIGINT, k BIGINT, v BIGINT)")
    if table:
        db.executemany("INSERT INTO items VALUES (?, ?, ?)",
                       [(r["id"], r["k"], r["v"]) for r in table.values()])
    # every aggregate of this query runs in columns: min, max and count(DISTINCT v) over
    # updating input keep multisets of values (of floats and text as well)
    groups = ["k", "n", "nv", "total", "low", "high", "kinds", "flow", "fhigh", "fkinds",
              "tlow", "thigh", "tkinds"]
    assert _applied(workdir / "groups.jsonl", groups) == Counter(
        tuple(r) for r in db.execute(GROUPS).fetchall())
    # min, max and var_pop over the inner aggregate's changes: multisets and moments,
    # in columns
    sizes = ["n", "groups", "total", "bottom", "top", "spread"]
    assert _applied(workdir / "sizes.jsonl", sizes) == Counter(
        tuple(r) for r in db.execute(SIZES).fetchall())
