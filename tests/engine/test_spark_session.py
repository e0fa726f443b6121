"""The settings Spate's sessions run with (spate.engine.spark)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.engine.spark import hosted_session
from tests.engine.connectors.support import run_stream

pytestmark = pytest.mark.spark

_RAW = "org.apache.hadoop.fs.RawLocalFileSystem"


def _session_file_system(session: SparkSession) -> str:
    """The class of the file system a session's reads and checkpoints get for file:."""
    jvm = session.sparkContext._jvm  # noqa: SLF001 - Hadoop's API has no Python side
    assert jvm is not None
    conf = session._jsparkSession.sessionState().newHadoopConf()  # noqa: SLF001
    path = jvm.org.apache.hadoop.fs.Path("file:///")
    return str(path.getFileSystem(conf).getClass().getName())


def test_checkpoints_are_written_without_a_process_per_file(spark: SparkSession,
                                                            tmp_path: Path) -> None:
    """A session's checkpoint logs go through the raw local file system (no link
    checks by ``readlink`` processes, no checksum files); the application's own local
    file system stays the checksummed one that ``FileSystem.getLocal`` casts to."""
    for session in (spark, hosted_session(spark)):
        assert _session_file_system(session) == _RAW
    jvm = spark.sparkContext._jvm  # noqa: SLF001
    assert jvm is not None
    local = jvm.org.apache.hadoop.fs.FileSystem.getLocal(
        spark.sparkContext._jsc.hadoopConfiguration())  # noqa: SLF001
    assert local.getClass().getName() != _RAW  # a LocalFileSystem: the cast held
    stream = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5).load()
    run = run_stream(stream.limit(10), tmp_path / "checkpoint", available_now=False,
                     timeout_s=10)
    assert run.batches
    written = [p.name for p in (tmp_path / "checkpoint").rglob("*") if p.is_file()]
    assert "0" in written and not [name for name in written if name.endswith(".crc")]
