"""Generator sources in the runtime: their offsets come from the offsets committed
before and the batch's logged trigger time (the same on a replay), and a pipeline
waits for their next row rather than running empty epochs."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from spate.engine.planner import plan_pipeline
from spate.engine.runtime.generators import POLL_OTHERS_S, Generators
from spate.engine.runtime.offsets import OFFSETS_KEY, BatchEpochs, CheckpointFolder

START_MS = 1_700_000_000_000
TICKS = "CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '10');\n"
FILE = ("CREATE TABLE lines WITH (connector = 'single_file', path = '{path}', "
        "format = 'raw_string', type = 'source');\n")


def _log_batch(checkpoint: Path, batch_id: int, timestamp_ms: int, offsets: list[Any]) -> None:
    """What Spark logs before it runs a batch: version, metadata, one offset per source."""
    folder = checkpoint / "offsets"
    folder.mkdir(parents=True, exist_ok=True)
    metadata = {"batchWatermarkMs": 0, "batchTimestampMs": timestamp_ms, "conf": {}}
    lines = ["v1", json.dumps(metadata), *(json.dumps(o) for o in offsets)]
    (folder / str(batch_id)).write_text("\n".join(lines) + "\n")


def _epochs(checkpoint: Path, stored: dict[str, Any], base: int = 0) -> BatchEpochs:
    plan = plan_pipeline(TICKS + "SELECT counter FROM ticks;")
    batches = BatchEpochs(CheckpointFolder(str(checkpoint)), ("ticks",), base,
                          stored_offsets=stored)
    batches.computed = Generators(plan.sources, 1).advancers()
    return batches


def test_an_epochs_offset_follows_the_last_committed_one_and_the_logged_batch_time(
        tmp_path: Path) -> None:
    tick = {"offset": 1, "timestamp": 1000}
    _log_batch(tmp_path, 0, START_MS, [tick])
    _log_batch(tmp_path, 1, START_MS + 2_000, [tick])
    batches = _epochs(tmp_path, {})
    first = batches.batch_offsets(0)["ticks"]
    # a fresh source starts its schedule at the first batch's time: row 0 is due then
    assert first == (None, {"start_ns": START_MS * 10**6, "next": 1, "eof": False})
    # 2 s later at 10 rows/s: rows 1 to 20; the tick Spark logged is not stored
    second = batches.batch_offsets(1)["ticks"]
    assert second == (first[1], dict(first[1], next=21))
    assert batches.metadata(1)[OFFSETS_KEY] == {"ticks": second[1]}


def test_a_replayed_batch_gets_the_offset_it_had(tmp_path: Path) -> None:
    """A crash before the commit: the next run resumes from the stored offsets and
    Spark replays the logged batch, whose time is in the log, not the clock's."""
    stored = {"ticks": {"start_ns": START_MS * 10**6, "next": 7, "eof": False}}
    _log_batch(tmp_path, 2, START_MS + 700, [{"offset": 3, "timestamp": 3000}])
    _log_batch(tmp_path, 3, START_MS + 1_500, [{"offset": 4, "timestamp": 4000}])
    planned = _epochs(tmp_path, stored, base=10).batch_offsets(13)
    replayed = _epochs(tmp_path, stored, base=10).batch_offsets(13)
    assert planned == replayed == {"ticks": (stored["ticks"], dict(stored["ticks"], next=16))}


def test_a_pipeline_of_generators_waits_until_the_next_row_is_due() -> None:
    generators = Generators(plan_pipeline(TICKS + "SELECT counter FROM ticks;").sources, 1)
    generators._ends = {"ticks": {"start_ns": START_MS * 10**6, "next": 5, "eof": False}}
    # row 5 is due 0.5 s after the start
    assert generators.wait_s(rows_in=1, now_ms=START_MS + 200) == 0.301
    assert generators.wait_s(rows_in=1, now_ms=START_MS + 900) == 0.0
    generators._ends = {"ticks": {"start_ns": START_MS * 10**6, "next": 5, "eof": True}}
    assert generators.wait_s(rows_in=0, now_ms=START_MS) == 0.0  # ended: nothing to wait for


def test_beside_other_sources_only_an_epoch_without_rows_waits(tmp_path: Path) -> None:
    sql = TICKS + FILE.format(path=tmp_path / "in.txt") + (
        "SELECT counter FROM ticks;\nSELECT value FROM lines;\n")
    generators = Generators(plan_pipeline(sql, check_inputs=False).sources, 1)
    assert not generators.only
    generators._ends = {"ticks": {"start_ns": START_MS * 10**6, "next": 50, "eof": False}}
    assert generators.wait_s(rows_in=3, now_ms=START_MS) == 0.0  # the file may hold more
    assert generators.wait_s(rows_in=0, now_ms=START_MS) == POLL_OTHERS_S  # row 50: 5 s away
    assert generators.wait_s(rows_in=0, now_ms=START_MS + 4_800) == 0.201


#: Only generators, a stateless query, a sink that needs no Python per row.
GENERATORS_ONLY = """
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '200', message_count = '600');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter * 2 AS doubled FROM ticks WHERE subtask_index = 0;
"""


def _descendants(root: psutil.Process) -> list[str]:
    """The command names of ``root``'s descendants (those still there to be asked)."""
    names = []
    for child in root.children(recursive=True):
        try:
            command = child.cmdline()
        except psutil.Error:
            continue
        if command:
            names.append(Path(command[0]).name)
    return names


@pytest.mark.e2e
def test_a_pipeline_reading_only_generators_starts_no_python_worker(tmp_path: Path) -> None:
    """Its JVM starts no Python process: no data source reader, no worker reading rows
    (a Python data source would start both, and keep its workers for the next batch)."""
    pipeline = tmp_path / "ticks.sql"
    pipeline.write_text(GENERATORS_ONLY)
    run = subprocess.Popen([sys.executable, "-m", "spate.api.cli", "run", "--parallelism", "2",
                            str(pipeline)], cwd=tmp_path, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    seen: set[str] = set()
    try:
        root = psutil.Process(run.pid)
        while run.poll() is None:
            with contextlib.suppress(psutil.Error):
                seen.update(_descendants(root))
            time.sleep(0.1)
    finally:
        if run.poll() is None:
            run.kill()
        out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    assert "finished" in out + err
    assert "java" in seen, "the run's JVM was never seen: nothing was sampled"
    assert not [name for name in seen if name.startswith("python")], seen
