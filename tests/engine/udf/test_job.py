"""A job gets its UDFs as source text in its spec: a bad file is refused before
Spark starts, and a raising UDF fails the job naming the UDF and its traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spate.engine.job.spec import JobSpec
from tests.engine.job.support import make_spec, start_job

pytestmark = pytest.mark.e2e

UDFS = """\
from spate.engine.udf import udf


@udf
def inverse(n: int) -> float:
    return 1 / n
"""
SQL = """
CREATE TABLE t (n BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{{ IN }}', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT inverse(n) AS i FROM t;
"""


def test_a_spec_round_trips_its_udf_source(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, SQL, udf_source=UDFS, udf_filename="mine.py")
    again = JobSpec.from_json(spec.to_json())
    assert (again.udf_source, again.udf_filename) == (UDFS, "mine.py")


def test_a_bad_udf_file_is_refused_before_spark_starts(tmp_path: Path) -> None:
    spec = make_spec(tmp_path, SQL, udf_source=UDFS.replace("-> float", ""),
                     udf_filename="mine.py", variables={"IN": "in.jsonl"})
    job = start_job(spec, tmp_path)
    assert job.finish(timeout_s=120) == 1
    assert job.statuses() == ["failed"]
    assert job.of_type("status")[-1]["message"] == (
        "invalid UDF file: mine.py:5:5: UDF 'inverse' has no return type hint (-> T); "
        "supported: bool, int, float, str, bytes, datetime, date, Decimal, list[T], "
        "Optional[T] (or T | None)")
    assert "spark session ready" not in job.log()


def test_udf_files_of_the_service_are_read_with_the_spec_and_refused_by_file(
        tmp_path: Path) -> None:
    files = [{"filename": "inverse.py", "source": UDFS},
             {"filename": "again.py", "source": UDFS.replace("inverse", "Inverse")}]
    spec = make_spec(tmp_path, SQL, udf_files=files, variables={"IN": "in.jsonl"})
    assert JobSpec.from_json(spec.to_json()).udf_files == files
    job = start_job(spec, tmp_path)
    assert job.finish(timeout_s=120) == 1
    assert job.of_type("status")[-1]["message"] == (
        "invalid UDF file: again.py:5:5: UDF 'inverse' is also defined in inverse.py "
        "(line 5); a name may be declared once")
    assert "spark session ready" not in job.log()


@pytest.mark.spark
def test_a_raising_udf_fails_the_job_with_its_name_and_traceback(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps({"n": n, "ts": f"2024-01-01T00:00:0{n}Z"}) + "\n"
                            for n in (2, 1, 0)))
    spec = make_spec(tmp_path, SQL, udf_source=UDFS, udf_filename="mine.py",
                     variables={"IN": str(data)})
    job = start_job(spec, tmp_path)
    assert job.finish() == 1, job.log()[-3000:]
    assert job.statuses() == ["running", "failed"]
    message = "UDF 'inverse' failed: ZeroDivisionError: division by zero"
    assert job.of_type("status")[-1]["message"] == message
    (error,) = job.of_type("error")
    assert f'{message}\n  File "mine.py", line 6, in inverse\n    return 1 / n' in error["detail"]
