"""1M rows written as parquet to S3 (moto's server) against a bare boto3 upload loop.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_s3_parquet.py -s``

The pipeline: an ``impulse`` source of ``EVENTS`` rows, four computed columns,
into a ``filesystem`` sink writing parquet under an ``s3://`` prefix, exactly
once (multipart uploads completed after each epoch's commit). The ceiling: the
same bytes (every file the pipeline wrote, read back) uploaded again by a
plain ``put_object`` loop on the same server, same file sizes. What a Spark user
would write without Hadoop's S3 connector (which this machine cannot fetch) is
measured too: the same rows and columns from ``spark.range``, written by Spark's
own parquet writer to a local folder, then uploaded by boto3. The same
pipeline into ``blackhole`` first shows how much of the time is the engine's
(query start, generating and projecting the rows) rather than the sink's. Events/s and
bytes/s of both go to ``results.json`` under ``s3_parquet``; BENCHMARKS.md
quotes them. The test checks every row arrived; it asserts nothing about speed.
"""

from __future__ import annotations

import io
import os
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from tests.benchmarks.workloads import save_result
from tests.engine.connectors.filesystem.s3_support import S3Server, serve_s3
from tests.engine.harness import run_pipeline

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.e2e]

EVENTS = int(os.environ.get("SPATE_BENCH_S3_EVENTS", "1000000"))


@pytest.fixture(scope="module")
def s3() -> Iterator[S3Server]:
    yield from serve_s3()


def _sql(s3: S3Server, bucket: str, blackhole: bool = False) -> str:
    options = ", ".join(f"'{k}' = '{v}'" for k, v in
                        s3.options(f"s3://{bucket}/bench").items())
    sink = "connector = 'blackhole'" if blackhole else f"""connector = 'filesystem', \
type = 'sink', format = 'parquet', 'rolling_policy.file_size' = '16MB', {options}"""
    return f"""
CREATE TABLE ticks (counter BIGINT NOT NULL, subtask_index BIGINT NOT NULL)
WITH (connector = 'impulse', event_rate = '100000000', message_count = '{EVENTS}');
CREATE TABLE out WITH ({sink});
INSERT INTO out SELECT counter, counter * 3 AS tripled, counter % 1000 AS bucket,
                       CAST(counter AS TEXT) AS label FROM ticks;
"""


def test_s3_parquet_sink_against_a_boto3_upload_loop(spark: SparkSession, s3: S3Server,
                                                     tmp_path: Path) -> None:
    bucket = s3.create_bucket()
    blackhole_s = 0.0
    for attempt in range(2):  # the same pipeline into blackhole (the first run warms up)
        started = time.perf_counter()
        run_pipeline(spark, _sql(s3, bucket, blackhole=True),
                     tmp_path / f"blackhole{attempt}", timeout_s=1800)
        blackhole_s = time.perf_counter() - started
    started = time.perf_counter()
    run_pipeline(spark, _sql(s3, bucket), tmp_path / "s3", timeout_s=1800)
    pipeline_s = time.perf_counter() - started
    client = s3.client()
    keys = s3.keys(bucket)
    files = [s3.get(bucket, key) for key in keys]
    rows = sum(pq.read_metadata(io.BytesIO(data)).num_rows for data in files)
    assert rows == EVENTS
    total = sum(len(data) for data in files)
    started = time.perf_counter()
    for index, data in enumerate(files):
        client.put_object(Bucket=bucket, Key=f"loop/{index}.parquet", Body=data)
    loop_s = time.perf_counter() - started
    spark_user_s = _spark_user(spark, s3, bucket, tmp_path / "spark-user")
    result = {
        "events": EVENTS, "files": len(files), "bytes": total,
        "pipeline_s": round(pipeline_s, 2), "loop_s": round(loop_s, 2),
        "blackhole_s": round(blackhole_s, 2),
        "pipeline_events_per_s": round(EVENTS / pipeline_s),
        "pipeline_bytes_per_s": round(total / pipeline_s),
        "loop_events_per_s": round(EVENTS / loop_s),
        "loop_bytes_per_s": round(total / loop_s),
        "ratio": round(loop_s / pipeline_s, 3),
        "spark_user_s": round(spark_user_s, 2),
        "spark_user_events_per_s": round(EVENTS / spark_user_s),
        "ratio_to_spark_user": round(spark_user_s / pipeline_s, 3),
    }
    save_result("s3_parquet", result)
    print(result)


def _spark_user(spark: SparkSession, s3: S3Server, bucket: str, folder: Path) -> float:
    """Seconds for Spark's native parquet writer (to a local folder) plus a boto3
    upload of its files: the same rows and columns as the pipeline's."""
    client = s3.client()
    started = time.perf_counter()
    spark.range(EVENTS).selectExpr(
        "id AS counter", "id * 3 AS tripled", "id % 1000 AS bucket",
        "CAST(id AS STRING) AS label").write.parquet(str(folder))
    for path in sorted(folder.glob("*.parquet")):
        client.put_object(Bucket=bucket, Key=f"spark-user/{path.name}",
                          Body=path.read_bytes())
    return time.perf_counter() - started
