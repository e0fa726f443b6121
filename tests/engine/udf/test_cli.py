"""``spate run --udf``: UDF errors located in the UDF file or the SQL without
starting Spark, and a pipeline calling a UDF printing its rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.test_cli import _spate

pytestmark = pytest.mark.e2e

UDFS = """\
from typing import Optional

from spate.engine.udf import udf


@udf
def half(n: int) -> Optional[float]:
    return n / 2 if n % 2 == 0 else None
"""
SQL = """CREATE TABLE t (k BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
SELECT k, {call} AS h FROM t;
"""


def _files(tmp_path: Path, udfs: str = UDFS, call: str = "half(k)") -> tuple[Path, Path]:
    (tmp_path / "udfs.py").write_text(udfs)
    (tmp_path / "q.sql").write_text(SQL.format(call=call))
    return tmp_path / "q.sql", tmp_path / "udfs.py"


def test_a_bad_udf_file_is_located_and_exits_2_without_spark(tmp_path: Path) -> None:
    sql, udfs = _files(tmp_path, UDFS.replace("(n: int)", "(n)"))
    result = _spate(str(sql), "--udf", str(udfs), cwd=tmp_path, no_java=True)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"{udfs}:7:10: error: parameter 'n' of UDF 'half' has "
                                    "no type hint")


def test_a_bad_udf_call_is_located_in_the_sql(tmp_path: Path) -> None:
    sql, udfs = _files(tmp_path, call="half(k, k)")
    result = _spate(str(sql), "--udf", str(udfs), cwd=tmp_path, no_java=True)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"{sql}:3:11: error: scalar UDF half(n: int) -> "
                                    "Optional[float] takes 1 argument(s), got 2")


def test_without_the_udf_file_the_udf_is_unknown(tmp_path: Path) -> None:
    sql, _ = _files(tmp_path)
    result = _spate(str(sql), cwd=tmp_path, no_java=True)
    assert result.returncode == 2
    assert "unknown function 'half'" in result.stderr


@pytest.mark.spark
def test_a_pipeline_calls_its_udf(tmp_path: Path) -> None:
    sql, udfs = _files(tmp_path)
    (tmp_path / "in.jsonl").write_text("".join(
        json.dumps({"k": k, "ts": f"2024-01-01T00:00:0{k}Z"}) + "\n" for k in range(4)))
    result = _spate(str(sql), "--udf", str(udfs), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = sorted((json.loads(line) for line in result.stdout.splitlines()),
                  key=lambda row: row["k"])
    assert rows == [{"k": 0, "h": 0.0}, {"k": 1, "h": None}, {"k": 2, "h": 1.0},
                    {"k": 3, "h": None}]
