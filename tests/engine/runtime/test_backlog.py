"""Which sources a run asks for its backlog (:mod:`spate.engine.runtime.backlog`): those
whose connector can tell; a run without one measures nothing (no offsets read per epoch).
A folder's backlog is its unread bytes, counted as rows at the rate read so far."""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql import SparkSession

from spate.engine.planner import plan_pipeline
from spate.engine.runtime.backlog import BacklogGauge
from spate.engine.runtime.reports import EpochReport
from tests.engine.harness import run_pipeline

SINK = """CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT * FROM src;"""


def test_a_run_of_sources_that_cannot_tell_measures_nothing() -> None:
    plan = plan_pipeline("CREATE TABLE src WITH (connector = 'impulse', event_rate = '10');\n"
                         + SINK)
    gauge = BacklogGauge(plan, 1)
    gauge.read_up_to({"src": {"counter": 5}})
    assert not gauge.measures and gauge.rows is None


def test_a_kafka_source_is_asked() -> None:
    plan = plan_pipeline("CREATE TABLE src (v TEXT) WITH (connector = 'kafka', type = 'source', "
                         "bootstrap_servers = '127.0.0.1:9', topic = 't', format = 'json');\n"
                         + SINK)
    assert BacklogGauge(plan, 1).measures


def _files(folder: Path, names: list[str], first_ns: int) -> list[int]:
    """Ten JSON lines per file, each file a second newer than the one before; their sizes."""
    sizes = []
    for i, name in enumerate(names):
        path = folder / name
        path.write_text("".join(f'{{"id": {n}}}\n' for n in range(10)))
        stamp = first_ns + i * 1_000_000_000
        os.utime(path, ns=(stamp, stamp))
        sizes.append(path.stat().st_size)
    return sizes


def test_a_folder_tells_bytes_counted_as_rows_at_the_rate_read_so_far(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    plan = plan_pipeline(
        f"CREATE TABLE src (id BIGINT) WITH (connector = 'filesystem', type = 'source', "
        f"path = '{folder}', format = 'json', 'source.mode' = 'continuous', "
        "'source.poll_interval' = '1 us');\n" + SINK)
    gauge = BacklogGauge(plan, 1)
    assert gauge.measures
    start = {"mtime": -1, "names": [], "files": 0, "bytes": 0, "eof": False}
    read_sizes = _files(folder, ["a.json", "b.json"], 10**18)
    end = {"mtime": 10**18 + 10**9, "names": ["b.json"], "files": 2, "bytes": sum(read_sizes),
           "eof": False}
    gauge.read_up_to({"src": start})  # nothing read from it yet: no rate to count by
    gauge.measure()
    assert gauge.rows is None
    gauge.read_up_to({"src": end}, {"src": (20, start)})  # 2 files, 20 rows read
    gauge.measure()
    assert gauge.rows == 0, "every listed file is read"
    _files(folder, ["c.json", "d.json", "e.json"], 10**18 + 5 * 10**9)
    gauge.measure()
    assert gauge.rows == 30, "three more files of ten rows each"


def test_a_run_over_a_folder_reports_its_unread_files_as_rows(spark: SparkSession,
                                                              tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    _files(folder, [f"{i}.json" for i in range(6)], 10**18)
    reports: list[EpochReport] = []
    run_pipeline(spark, f"""
CREATE TABLE src (id BIGINT) WITH (connector = 'filesystem', type = 'source',
    path = '{folder}', format = 'json', 'source.mode' = 'continuous',
    'source.max_files_per_batch' = '1');
""" + SINK, tmp_path / "run", reports=reports, stop_after_epochs=4)
    told = [report.backlog for report in reports if report.backlog is not None]
    # Measured off the epochs' path, from the latest epoch's end: a file of ten rows a
    # batch leaves 50, 40, ... rows.
    assert told and all(rows % 10 == 0 and 0 < rows <= 50 for rows in told), told
