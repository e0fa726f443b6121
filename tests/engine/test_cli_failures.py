"""``spate run`` with a real Spark: a pipeline that plans but that Spark's analysis
refuses when the query starts is reported as one located line, never a plan dump or
a Java stack trace.

The planner checks names, struct fields, indexes and sink types; it does not
type-check every function's arguments, so ``array_max`` of a struct still
reaches Spark, whose ``[DATATYPE_MISMATCH…]`` error is the case here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

PIPELINE = """CREATE TABLE a (id BIGINT, info STRUCT<a BIGINT, b TEXT>, ts TIMESTAMP NOT NULL,
                WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{path}', format = 'json', type = 'source');
SELECT id,
       array_max(info) AS top FROM a;
"""
#: What a plan dump, a Python traceback or a JVM stack trace would show.
NOISE = ("+-", "=== Streaming Query ===", "Traceback", "at org.apache", "py4j",
         "Exception", "Project [", "SQLSTATE")


def test_a_spark_analysis_error_is_one_located_line(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text('{"id": 1, "info": {"a": 1, "b": "x"}, "ts": "2024-01-01T00:00:01Z"}\n')
    pipeline = tmp_path / "typed.sql"
    pipeline.write_text(PIPELINE.format(path=data))
    result = subprocess.run(
        [sys.executable, "-m", "spate.api.cli", "run", str(pipeline),
         "--state", f"sqlite:///{tmp_path / 'state.db'}",
         "--checkpoint", str(tmp_path / "checkpoint")],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 1, result.stderr
    assert result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"{pipeline}:5:8: error: pipeline failed: "
                           "[DATATYPE_MISMATCH.UNEXPECTED_INPUT_TYPE] Cannot resolve "
                           '"array_max(info)"'), line
    assert not [word for word in NOISE if word in result.stderr], result.stderr
