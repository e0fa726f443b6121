"""Oracle test: random event streams through Spate's window operators equal
the same aggregation computed in batch by DuckDB over the same data."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.harness import run_pipeline

pytestmark = pytest.mark.spark

BASE = datetime(2024, 1, 1, tzinfo=UTC)
DISORDER_MS = 3000

PIPELINE = """
CREATE TABLE events (k BIGINT, v BIGINT, ts TIMESTAMP NOT NULL,
                     WATERMARK FOR ts AS ts - INTERVAL '4' SECOND)
WITH (connector = 'single_file', path = '{dir}/events.jsonl', format = 'json', type = 'source',
      max_lines_per_batch = '{batch}');
CREATE TABLE out WITH (connector = 'single_file', path = '{dir}/out.jsonl', format = 'json',
                       type = 'sink');
INSERT INTO out
SELECT k, unix_micros(w.start) AS ws, unix_micros(w.end) AS we, n, total, low, high, kinds,
       fkinds
FROM (SELECT k, {window} AS w, count(*) AS n, sum(v) AS total, min(v) AS low, max(v) AS high,
             count(DISTINCT v) AS kinds, count(DISTINCT CAST(v AS DOUBLE) / 2) AS fkinds
      FROM events GROUP BY k, w);
"""

ORACLE_AGGS = "count(*) AS n, sum(v) AS total, min(v) AS low, max(v) AS high, " \
              "count(DISTINCT v) AS kinds, count(DISTINCT CAST(v AS DOUBLE) / 2) AS fkinds"


def _oracle(rows: list[tuple[int, int, int]], window: tuple[str, int, int]) -> set[tuple]:  # type: ignore[type-arg]
    db = duckdb.connect()
    db.execute("CREATE TABLE events (k BIGINT, v BIGINT, t BIGINT)")  # t: micros
    if rows:
        db.executemany("INSERT INTO events VALUES (?, ?, ?)", rows)
    kind, a, b = window
    if kind == "session":
        gap = a
        sql = f"""
        WITH marked AS (
          SELECT *, CASE WHEN t - lag(t) OVER (PARTITION BY k ORDER BY t) < {gap} THEN 0 ELSE 1
                   END AS new_session FROM events),
        numbered AS (SELECT *, sum(new_session) OVER (PARTITION BY k ORDER BY t
                     ROWS UNBOUNDED PRECEDING) AS sid FROM marked)
        SELECT k, min(t), max(t) + {gap}, {ORACLE_AGGS} FROM numbered GROUP BY k, sid"""
    else:
        slide, width = a, b
        sql = f"""
        WITH starts AS (
          SELECT e.*, s.start FROM events e,
          LATERAL (SELECT unnest(range(t - t % {slide} - {width} + {slide},
                                       t - t % {slide} + 1, {slide})) AS start) s)
        SELECT k, start, start + {width}, {ORACLE_AGGS} FROM starts GROUP BY k, start"""
    return {tuple(r) for r in db.execute(sql).fetchall()}


events = st.lists(st.tuples(st.integers(0, 3), st.integers(-3, 3), st.integers(0, 60_000)),
                  min_size=1, max_size=60)
windows = st.sampled_from([
    ("TUMBLE(INTERVAL '5' SECOND)", ("hop", 5_000_000, 5_000_000)),
    ("HOP(INTERVAL '2' SECOND, INTERVAL '6' SECOND)", ("hop", 2_000_000, 6_000_000)),
    ("SESSION(INTERVAL '3' SECOND)", ("session", 3_000_000, 0)),
])


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(raw=events, window=windows, batch=st.integers(3, 40), seed=st.randoms())
def test_windows_match_duckdb(raw, window, batch, seed, spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    workdir = tmp_path_factory.mktemp("oracle")
    ordered = sorted(raw, key=lambda r: r[2])
    # bounded disorder, smaller than the watermark delay: no row may be late
    shuffled = sorted(ordered, key=lambda r: r[2] + seed.randint(0, DISORDER_MS))
    with open(workdir / "events.jsonl", "w") as handle:
        for k, v, ms in shuffled:
            ts = (BASE + timedelta(milliseconds=ms)).isoformat().replace("+00:00", "Z")
            handle.write(json.dumps({"k": k, "v": v, "ts": ts}) + "\n")
    sql_window, spec = window
    counters = run_pipeline(spark, PIPELINE.format(dir=workdir, batch=batch, window=sql_window),
                            workdir)
    got = set()
    for line in (workdir / "out.jsonl").read_text().splitlines():
        r = json.loads(line)
        got.add((r["k"], r["ws"], r["we"], r["n"], r["total"], r["low"], r["high"], r["kinds"],
                 r["fkinds"]))
    base_us = int(BASE.timestamp() * 1_000_000)
    expected = _oracle([(k, v, base_us + ms * 1000) for k, v, ms in shuffled], spec)
    assert counters.get("rows_late", 0) == 0
    assert got == expected
