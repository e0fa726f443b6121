"""Pipelines calling Python UDFs, run on the shared SparkSession: scalar UDFs
with the NULL rules, a vectorized UDF, aggregate UDFs in TUMBLE and HOP windows,
and a UDF that raises — the epoch fails whole, and a run after fixing the UDF
writes the complete output exactly once."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from spate.engine.runtime.errors import PipelineFailedError
from spate.engine.udf import UdfRegistry, load_udfs
from spate.statestore import open_store
from tests.engine.harness import run_pipeline

pytestmark = pytest.mark.spark

UDFS = textwrap.dedent("""\
    from datetime import datetime
    from typing import Optional

    import pyarrow as pa
    import pyarrow.compute as pc

    from spate.engine.udf import udaf, udf, vectorized_udf


    @udf
    def ratio(a: int, b: Optional[int]) -> Optional[float]:
        if b is None:
            return -1.0
        return None if b == 0 else a / b


    @udf
    def shout(s: str) -> str:
        return s.upper() + "!"


    @udf
    def stamp(t: datetime) -> str:
        return t.isoformat()


    @vectorized_udf(args=[float, float], returns=float)
    def product(x: pa.Array, y: pa.Array) -> pa.Array:
        return pc.multiply(x, y)


    @udaf
    def spread(values: list[int]) -> int:
        return max(values) - min(values)


    @udaf
    def tally(values: list[Optional[int]], labels: list[str]) -> str:
        return ",".join(f"{label}={value}" for value, label in sorted(
            zip(values, labels), key=lambda pair: pair[1]))
    """)


def source(path: Path, extra: str = "") -> str:
    return (f"CREATE TABLE t (n BIGINT, d BIGINT, s TEXT, ts TIMESTAMP NOT NULL, "
            f"WATERMARK FOR ts) WITH (connector = 'single_file', path = '{path}', "
            f"format = 'json', type = 'source'{extra});\n")


def sink(name: str, path: Path) -> str:
    return (f"CREATE TABLE {name} WITH (connector = 'single_file', path = '{path}', "
            "format = 'json', type = 'sink');\n")


def write_rows(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def udfs() -> UdfRegistry:
    return load_udfs(UDFS, "udfs.py")


def test_scalar_and_vectorized_udfs_follow_the_null_rules(spark: Any, tmp_path: Path,
                                                          udfs: UdfRegistry) -> None:
    data = write_rows(tmp_path / "in.jsonl", [
        {"n": 6, "d": 3, "s": "ab", "ts": "2024-01-01T00:00:01Z"},
        {"n": None, "d": 2, "s": None, "ts": "2024-01-01T00:00:02Z"},
        {"n": 5, "d": None, "s": "x", "ts": "2024-01-01T00:00:03Z"},
        {"n": 4, "d": 0, "s": "", "ts": "2024-01-01T00:00:04Z"},
    ])
    out = tmp_path / "out.jsonl"
    run_pipeline(spark, source(data) + sink("out", out) + """
        INSERT INTO out SELECT n, ratio(n, d) AS r, shout(s) AS u, stamp(ts) AS t,
                               product(n, d) AS p
        FROM t;""", tmp_path, udfs=udfs)
    rows = sorted(read_rows(out), key=lambda row: row["t"])
    assert rows == [
        # a plain parameter's NULL gives NULL without a call; an Optional one gets None
        {"n": 6, "r": 2.0, "u": "AB!", "t": "2024-01-01T00:00:01", "p": 18.0},
        {"n": None, "r": None, "u": None, "t": "2024-01-01T00:00:02", "p": None},
        {"n": 5, "r": -1.0, "u": "X!", "t": "2024-01-01T00:00:03", "p": None},
        {"n": 4, "r": None, "u": "!", "t": "2024-01-01T00:00:04", "p": 0.0},
    ]


# Keys 0/1 alternate; n = i * i; one row a second from 00:00:00.
AGG_ROWS = [{"n": i * i, "d": i % 2, "s": f"r{i}", "ts": f"2024-01-01T00:00:{i:02d}Z"}
            for i in range(12)]


def _expected(windows: list[tuple[int, int, int]]) -> list[dict[str, Any]]:
    """The output rows of windows ``(key, start s, end s)`` over AGG_ROWS."""
    expected = []
    for key, start, end in windows:
        rows = [i for i in range(max(start, 0), min(end, 12)) if i % 2 == key]
        if not rows:
            continue
        values = [i * i for i in rows]
        tally = ",".join(f"r{i}={i * i}" for i in sorted(rows, key=lambda i: f"r{i}"))
        expected.append({"d": key, "window_end": f"2024-01-01T00:00:{end:02d}.000000Z",
                         "sp": max(values) - min(values), "n": len(rows), "ta": tally})
    return sorted(expected, key=lambda row: (row["window_end"], row["d"]))


def _sliding(width: int, slide: int) -> list[tuple[int, int, int]]:
    return [(key, start, start + width) for start in range(slide - width, 12, slide)
            for key in (0, 1)]


@pytest.mark.parametrize(("window", "windows"), [
    ("TUMBLE(INTERVAL '4' SECOND)", _sliding(4, 4)),
    ("HOP(INTERVAL '2' SECOND, INTERVAL '6' SECOND)", _sliding(6, 2)),
    # a key's rows are 2 s apart: one session per key, ending 3 s after its last row
    ("SESSION(INTERVAL '3' SECOND)", [(0, 0, 13), (1, 1, 14)]),
])
def test_aggregate_udfs_in_windows(spark: Any, tmp_path: Path, udfs: UdfRegistry,
                                   window: str, windows: list[tuple[int, int, int]]) -> None:
    data = write_rows(tmp_path / "in.jsonl", AGG_ROWS)
    out = tmp_path / "out.jsonl"
    # Three rows an epoch: windows fill over several epochs and fire later.
    run_pipeline(spark, source(data, ", max_lines_per_batch = '3'") + sink("out", out) + f"""
        INSERT INTO out
        SELECT d, w.end AS window_end, sp, n, ta
        FROM (SELECT d, {window} AS w, spread(n) AS sp, count(*) AS n, tally(n, s) AS ta
              FROM t GROUP BY d, w);""", tmp_path, udfs=udfs)
    rows = sorted(read_rows(out), key=lambda row: (row["window_end"], row["d"]))
    assert rows == _expected(windows)


RISKY = textwrap.dedent("""\
    from spate.engine.udf import udf


    @udf
    def risky(v: int) -> int:
        if v == {bad}:
            raise ValueError(f"cannot take {{v}}")
        return v * 10
    """)


def test_a_raising_udf_fails_its_epoch_whole_and_a_fixed_rerun_is_exactly_once(
        spark: Any, tmp_path: Path) -> None:
    data = write_rows(tmp_path / "in.jsonl", [
        {"n": i, "d": i % 2, "s": "", "ts": f"2024-01-01T00:00:{i:02d}Z"} for i in range(8)])
    totals, scaled = tmp_path / "totals.jsonl", tmp_path / "scaled.jsonl"
    # Two rows an epoch. Epoch 2 (rows 4, 5) fires window [0, 4) into ``totals``
    # first, then ``risky`` raises at row 5 while ``scaled`` is written.
    sql = (source(data, ", max_lines_per_batch = '2'") + sink("totals", totals)
           + sink("scaled", scaled) + """
        INSERT INTO totals SELECT d, w.end AS window_end, c, total
        FROM (SELECT d, TUMBLE(INTERVAL '4' SECOND) AS w, count(*) AS c, sum(n) AS total
              FROM t GROUP BY d, w);
        INSERT INTO scaled SELECT n, risky(n) AS r FROM t;""")
    with pytest.raises(PipelineFailedError) as caught:
        run_pipeline(spark, sql, tmp_path, udfs=load_udfs(RISKY.format(bad=5), "risky.py"))
    lines = str(caught.value).splitlines()
    assert lines[0] == "UDF 'risky' failed: ValueError: cannot take 5"
    assert lines[1:3] == ['  File "risky.py", line 7, in risky',
                          '    raise ValueError(f"cannot take {v}")']
    store = open_store(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        assert store.pipeline("default", "test").last_committed_epoch() == 1
    finally:
        store.close()

    run_pipeline(spark, sql, tmp_path, udfs=load_udfs(RISKY.format(bad=-1), "risky.py"))
    assert sorted(read_rows(scaled), key=lambda row: row["n"]) == [
        {"n": i, "r": i * 10} for i in range(8)]
    assert sorted(read_rows(totals), key=lambda row: (row["window_end"], row["d"])) == [
        {"d": d, "window_end": f"2024-01-01T00:00:0{end}.000000Z", "c": 2,
         "total": sum(i for i in range(end - 4, end) if i % 2 == d)}
        for end in (4, 8) for d in (0, 1)]
