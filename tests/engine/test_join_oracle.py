"""Oracle test: random inputs on two sources through a windowed join (see
docs/sql/joins.md) of their TUMBLE/HOP aggregates give, as a multiset, the same rows as
DuckDB computing that join in batch over the same data."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.engine.harness import run_pipeline

pytestmark = pytest.mark.spark

BASE = datetime(2024, 1, 1, tzinfo=UTC)
BASE_US = int(BASE.timestamp() * 1_000_000)

PIPELINE = """
CREATE TABLE lefts (k BIGINT, v BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{dir}/lefts.jsonl', format = 'json', type = 'source',
      max_lines_per_batch = '{left_batch}');
CREATE TABLE rights (k BIGINT, v BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{dir}/rights.jsonl', format = 'json', type = 'source',
      max_lines_per_batch = '{right_batch}');
CREATE TABLE out WITH (connector = 'single_file', path = '{dir}/out.jsonl', format = 'json',
                       type = 'sink');
INSERT INTO out
SELECT unix_micros(coalesce(a.w.start, b.w.start)) AS ws, a.k AS ka, a.n AS na, a.total AS ta,
       b.k AS kb, b.n AS nb, b.total AS tb
FROM (SELECT k, {window} AS w, count(*) AS n, sum(v) AS total FROM lefts GROUP BY k, w) AS a
{kind} JOIN
     (SELECT k, {window} AS w, count(*) AS n, sum(v) AS total FROM rights GROUP BY k, w) AS b
ON a.k = b.k{extra};
"""
OUTPUT = ("ws", "ka", "na", "ta", "kb", "nb", "tb")

#: (Spate's window call, its slide and width in microseconds)
WINDOWS = [("TUMBLE(INTERVAL '5' SECOND)", 5_000_000, 5_000_000),
           ("HOP(INTERVAL '2' SECOND, INTERVAL '6' SECOND)", 2_000_000, 6_000_000)]
#: Extra ON terms, written the same in both dialects.
EXTRA_TERMS = ["", " AND a.total >= b.total", " AND a.n + b.n > 2"]

Row = tuple[int, int, int]  # key, value, event time (ms after BASE)

# Half-second steps so rows often fall on window boundaries; sorted per source
# (in event-time order, the watermark makes no row late).
rows = st.lists(st.tuples(st.integers(0, 2), st.integers(-3, 5),
                          st.integers(0, 50).map(lambda step: step * 500)),
                max_size=12).map(lambda drawn: sorted(drawn, key=lambda r: r[2]))


def _write_source(path: Path, source: list[Row]) -> None:
    with path.open("w") as handle:
        for k, v, ms in source:
            ts = (BASE + timedelta(milliseconds=ms)).isoformat().replace("+00:00", "Z")
            handle.write(json.dumps({"k": k, "v": v, "ts": ts}) + "\n")


def _oracle(lefts: list[Row], rights: list[Row], kind: str, extra: str, slide_us: int,
            width_us: int) -> Counter[tuple[object, ...]]:
    """The windowed join in DuckDB: each side aggregated per (key, window start)."""
    db = duckdb.connect()
    for name, source in (("lefts", lefts), ("rights", rights)):
        db.execute(f"CREATE TABLE {name} (k BIGINT, v BIGINT, t BIGINT)")  # t: micros
        if source:
            db.executemany(f"INSERT INTO {name} VALUES (?, ?, ?)",
                           [(k, v, BASE_US + ms * 1000) for k, v, ms in source])
    windowed = """
        SELECT k, start AS ws, count(*) AS n, sum(v) AS total
        FROM (SELECT *, unnest(range(t - t % {slide} - {width} + {slide},
                                     t - t % {slide} + 1, {slide})) AS start FROM {table})
        GROUP BY k, start"""
    sides = {side: windowed.format(slide=slide_us, width=width_us, table=table)
             for side, table in (("a", "lefts"), ("b", "rights"))}
    sql = f"""
        SELECT coalesce(a.ws, b.ws), a.k, a.n, a.total, b.k, b.n, b.total
        FROM ({sides["a"]}) AS a {kind} JOIN ({sides["b"]}) AS b
        ON a.ws = b.ws AND a.k = b.k{extra}"""
    return Counter(tuple(row) for row in db.execute(sql).fetchall())


@pytest.mark.parametrize("kind", ["INNER", "LEFT", "RIGHT", "FULL OUTER"])
@settings(max_examples=3, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lefts=rows, rights=rows, window=st.sampled_from(WINDOWS),
       extra=st.sampled_from(EXTRA_TERMS), left_batch=st.integers(2, 6),
       right_batch=st.integers(2, 6))
def test_windowed_join_matches_duckdb(kind, lefts, rights, window, extra, left_batch,  # type: ignore[no-untyped-def]
                                      right_batch, spark, tmp_path_factory) -> None:
    workdir = tmp_path_factory.mktemp("join_oracle")
    _write_source(workdir / "lefts.jsonl", lefts)
    _write_source(workdir / "rights.jsonl", rights)
    call, slide_us, width_us = window
    sql = PIPELINE.format(dir=workdir, left_batch=left_batch, right_batch=right_batch,
                          window=call, kind=kind, extra=extra)
    counters = run_pipeline(spark, sql, workdir)
    lines = (workdir / "out.jsonl").read_text().splitlines()
    got = Counter(tuple(json.loads(line)[c] for c in OUTPUT) for line in lines)
    assert counters.get("rows_late", 0) == 0
    assert got == _oracle(lefts, rights, kind, extra, slide_us, width_us)
