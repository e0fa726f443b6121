"""A pipeline resumes from its state store alone: its Spark checkpoint folder is deleted
between runs and each run gets a new, empty one, yet the output equals an
uninterrupted run's (no duplicates, no gaps), end of input included.  A checkpoint
folder of another run, and state without stored offsets, are refused."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.engine.runtime.errors import PipelineFailedError
from spate.engine.runtime.offsets import CheckpointFolder
from spate.engine.runtime.reports import EpochReport
from spate.statestore import open_store
from tests.engine.harness import read_lines, run_pipeline

pytestmark = pytest.mark.spark

NEXMARK = """
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '1000', runtime = '6',
    rate_limited = 'false', max_events_per_batch = '1000',
    'nexmark.base_time_ms' = '1700000000000');
CREATE TABLE counts WITH (connector = 'single_file', path = '{{ OUT_DIR }}/counts.jsonl',
    format = 'json', type = 'sink');
CREATE TABLE big_bids WITH (connector = 'single_file', path = '{{ OUT_DIR }}/big_bids.jsonl',
    format = 'json', type = 'sink');
INSERT INTO counts
SELECT bucket, w.end AS window_end, n
FROM (SELECT bid.auction % 5 AS bucket, TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n
      FROM nexmark WHERE bid IS NOT NULL GROUP BY 1, 2);
INSERT INTO big_bids
SELECT bid.auction AS auction, bid.bidder AS bidder, bid.price AS price
FROM nexmark WHERE bid IS NOT NULL AND bid.price % 13 = 0;
"""

#: A short single_file source (ends in its first epoch) beside a longer nexmark one.
TWO_SOURCES = """
CREATE TABLE clicks (user_id BIGINT, ts TIMESTAMP NOT NULL,
                     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'single_file', path = '{{ IN_DIR }}/clicks.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '1000');
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '1000', runtime = '4',
    rate_limited = 'false', max_events_per_batch = '1000',
    'nexmark.base_time_ms' = '1700000000000');
CREATE TABLE click_counts WITH (connector = 'single_file',
    path = '{{ OUT_DIR }}/click_counts.jsonl', format = 'json', type = 'sink');
CREATE TABLE people WITH (connector = 'single_file', path = '{{ OUT_DIR }}/people.jsonl',
    format = 'json', type = 'sink');
INSERT INTO click_counts
SELECT user_id, w.end AS window_end, n
FROM (SELECT user_id, TUMBLE(INTERVAL '2' SECOND) AS w, count(*) AS n
      FROM clicks GROUP BY 1, 2);
INSERT INTO people
SELECT person.id AS id, person.state AS state FROM nexmark WHERE person IS NOT NULL;
"""

#: Only a single_file source, read in many small epochs.
ONE_FILE = """
CREATE TABLE clicks (user_id BIGINT, ts TIMESTAMP NOT NULL,
                     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'single_file', path = '{{ IN_DIR }}/clicks.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '60');
CREATE TABLE click_counts WITH (connector = 'single_file',
    path = '{{ OUT_DIR }}/click_counts.jsonl', format = 'json', type = 'sink');
CREATE TABLE odd_users WITH (connector = 'single_file', path = '{{ OUT_DIR }}/odd_users.jsonl',
    format = 'json', type = 'sink');
INSERT INTO click_counts
SELECT user_id, w.end AS window_end, n
FROM (SELECT user_id, TUMBLE(INTERVAL '2' SECOND) AS w, count(*) AS n
      FROM clicks GROUP BY 1, 2);
INSERT INTO odd_users SELECT user_id, ts FROM clicks WHERE user_id % 2 = 1;
"""

IMPULSE = """
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '100', message_count = '300',
    event_time_interval = '1000000');
CREATE TABLE out WITH (connector = 'single_file', path = '{{ OUT_DIR }}/ticks.jsonl',
    format = 'json', type = 'sink');
INSERT INTO out SELECT counter, subtask_index FROM ticks;
"""


def _write_clicks(directory: Path, lines: int) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    rows = [{"user_id": i % 7, "ts": f"2024-01-01T00:{i // 60 % 60:02d}:{i % 60:02d}"}
            for i in range(lines)]
    (directory / "clicks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


class Runs:
    """Runs of one pipeline: each run has its own checkpoint folder, all share one state."""

    def __init__(self, spark: SparkSession, sql: str, root: Path,
                 monkeypatch: pytest.MonkeyPatch) -> None:
        self.spark, self.sql, self.root = spark, sql, root
        self.out = root / "out"
        self.state_url = f"sqlite:///{root / 'state.db'}"
        self.count = 0
        monkeypatch.setenv("OUT_DIR", str(self.out))

    def run(self, *, parallelism: int = 1, stop_after_epochs: int | None = None,
            checkpoint_of: Path | None = None) -> list[EpochReport]:
        """One run; ``checkpoint_of``: reuse that earlier run's folder, else a new one."""
        self.count += 1
        workdir = checkpoint_of or self.root / f"run{self.count}"
        workdir.mkdir(parents=True, exist_ok=True)
        reports: list[EpochReport] = []
        run_pipeline(self.spark, self.sql, workdir, parallelism=parallelism,
                     state_url=self.state_url, reports=reports,
                     stop_after_epochs=stop_after_epochs)
        return reports

    def checkpoint(self, run: int) -> Path:
        return self.root / f"run{run}" / "checkpoint"


def _reference(spark: SparkSession, sql: str, root: Path,
               monkeypatch: pytest.MonkeyPatch) -> tuple[Path, list[EpochReport]]:
    runs = Runs(spark, sql, root, monkeypatch)
    reports = runs.run()
    assert reports[-1].finished
    return runs.out, reports


def _assert_same_output(resumed: Path, reference: Path, names: list[str]) -> None:
    for name in names:
        expected = read_lines(reference / name)
        assert expected, f"the reference run wrote no {name}"
        got = read_lines(resumed / name)
        assert got == expected, f"{name}: {len(got)} lines, expected {len(expected)}"


def test_nexmark_resumes_from_state_with_a_new_checkpoint(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reference, full = _reference(spark, NEXMARK, tmp_path / "reference", monkeypatch)
    assert len(full) >= 6

    runs = Runs(spark, NEXMARK, tmp_path / "resumed", monkeypatch)
    first = runs.run(parallelism=1, stop_after_epochs=2)
    assert not first[-1].finished
    shutil.rmtree(runs.checkpoint(1))
    second = runs.run(parallelism=2, stop_after_epochs=2)
    assert not second[-1].finished
    shutil.rmtree(runs.checkpoint(2))
    third = runs.run(parallelism=3)
    assert third[-1].finished

    epochs = [r.epoch for r in first + second + third]
    assert epochs == list(range(len(epochs))), "epochs must continue across the resumes"
    # Each event was read once: no batch re-read after a resume, none skipped.
    assert sum(r.rows_in for r in first + second + third) == sum(r.rows_in for r in full)
    _assert_same_output(runs.out, reference, ["counts.jsonl", "big_bids.jsonl"])


def test_a_single_file_source_resumes_from_state(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("IN_DIR", str(tmp_path / "in"))
    _write_clicks(tmp_path / "in", 300)
    reference, full = _reference(spark, ONE_FILE, tmp_path / "reference", monkeypatch)
    assert len(full) >= 5

    runs = Runs(spark, ONE_FILE, tmp_path / "resumed", monkeypatch)
    first = runs.run(stop_after_epochs=2)
    assert not first[-1].finished
    # The new folder is not empty: it logged a batch it never ran, planned from the
    # start of the file (an old, abandoned folder).  That batch is discarded, not
    # replayed from where the state stands.
    shutil.rmtree(runs.checkpoint(1))
    stale = runs.checkpoint(2) / "offsets"
    stale.mkdir(parents=True)
    (runs.checkpoint(2) / "metadata").write_text('{"id":"0b5e7c1e-3f0a-4c55-9a43-4d1e7a3b2c10"}')
    lines = (tmp_path / "in" / "clicks.jsonl").read_bytes().splitlines(keepends=True)
    logged = {"line": 30, "byte": sum(len(line) for line in lines[:30]), "eof": False}
    (stale / "0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":0,"conf":{}}\n'
                             f"{json.dumps(logged)}\n")
    second = runs.run()
    assert second[-1].finished
    assert second[0].epoch == first[-1].epoch + 1
    assert sum(r.rows_in for r in first + second) == 300
    _assert_same_output(runs.out, reference, ["click_counts.jsonl", "odd_users.jsonl"])


def test_two_sources_and_an_ended_one_resume_from_state(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The offsets of several sources go back to the right source, and a source that
    had ended before the stop is neither re-read nor waited for."""
    monkeypatch.setenv("IN_DIR", str(tmp_path / "in"))
    _write_clicks(tmp_path / "in", 300)
    reference, full = _reference(spark, TWO_SOURCES, tmp_path / "reference", monkeypatch)

    runs = Runs(spark, TWO_SOURCES, tmp_path / "resumed", monkeypatch)
    first = runs.run(stop_after_epochs=2)
    assert not first[-1].finished
    clicks_read = sum(o.rows_out or 0 for r in first for o in r.operators
                      if o.operator == "source:clicks")
    assert clicks_read == 300, "the file should have ended before the stop"
    shutil.rmtree(runs.checkpoint(1))
    second = runs.run(parallelism=2)
    assert second[-1].finished
    assert all(o.rows_out == 0 for r in second for o in r.operators
               if o.operator == "source:clicks"), "the ended file was read again"
    assert sum(r.rows_in for r in first + second) == sum(r.rows_in for r in full)
    _assert_same_output(runs.out, reference, ["click_counts.jsonl", "people.jsonl"])


def test_impulse_resumes_at_its_stored_counter(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = Runs(spark, IMPULSE, tmp_path, monkeypatch)
    # Its first epoch admits the rows due when the query starts: about one.
    first = runs.run(stop_after_epochs=1)
    assert not first[-1].finished
    shutil.rmtree(runs.checkpoint(1))
    second = runs.run()
    assert second[-1].finished
    rows = [json.loads(line) for line in read_lines(runs.out / "ticks.jsonl")]
    assert sorted(r["counter"] for r in rows) == list(range(300))


def test_a_checkpoint_of_python_generator_sources_is_resumed_from_state(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run of an older Spate, whose impulse source was a Python data source, logged the
    source's own offsets in Spark's checkpoint: the ticks now in its place cannot read
    them, so the run resumes from the state store, exactly once."""
    runs = Runs(spark, IMPULSE, tmp_path, monkeypatch)
    assert not runs.run(stop_after_epochs=1)[-1].finished
    with open_store(runs.state_url) as store:
        stored = store.pipeline("default", "test").epoch_metadata()["offsets"]["ticks"]
    offsets = runs.checkpoint(1) / "offsets"
    for logged in offsets.glob("[0-9]*"):
        lines = logged.read_text().splitlines()
        logged.write_text("\n".join([*lines[:-1], json.dumps(stored)]) + "\n")
        (offsets / f".{logged.name}.crc").unlink(missing_ok=True)
    second = runs.run(checkpoint_of=runs.checkpoint(1).parent)
    assert second[-1].finished
    rows = [json.loads(line) for line in read_lines(runs.out / "ticks.jsonl")]
    assert sorted(r["counter"] for r in rows) == list(range(300))


#: Paced in real time (event time = when a row became due): 20 s of ticks at 100/s, so
#: that three runs, each started and stopped after one epoch, fall within it.
PACED_TICKS = """
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '100', message_count = '2000');
CREATE TABLE counts WITH (connector = 'single_file', path = '{{ OUT_DIR }}/counts.jsonl',
    format = 'json', type = 'sink');
INSERT INTO counts
SELECT w.start AS window_start, n, max_counter
FROM (SELECT TUMBLE(INTERVAL '500' MILLISECOND) AS w, count(*) AS n,
             max(counter) AS max_counter FROM ticks GROUP BY 1);
"""


def test_an_impulse_source_rescaled_mid_stream_keeps_every_window_whole(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rescaled 1 → 2 → 3 → 1 while it runs, the source's schedule does not move: every
    half-second window between the first and the last holds exactly 50 ticks, and
    there are as many ticks as were asked for, none twice (a per-subtask schedule
    went quiet for as long as it had run, then crowded the windows after a rescale)."""
    runs = Runs(spark, PACED_TICKS, tmp_path, monkeypatch)
    for parallelism in (1, 2, 3):
        reports = runs.run(parallelism=parallelism, stop_after_epochs=1)
        assert not reports[-1].finished, "the rescales must fall while it runs"
        shutil.rmtree(runs.checkpoint(runs.count))
    assert runs.run(parallelism=1)[-1].finished
    windows = sorted((row["window_start"], row["n"], row["max_counter"]) for row in
                     map(json.loads, read_lines(runs.out / "counts.jsonl")))
    assert sum(n for _, n, _ in windows) == 2000
    assert windows[-1][2] == 1999
    assert [n for _, n, _ in windows[1:-1]] == [50] * (len(windows) - 2), windows
    assert len({start for start, _, _ in windows}) == len(windows), "a window twice"


def test_a_checkpoint_of_another_run_is_refused(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = Runs(spark, NEXMARK, tmp_path, monkeypatch)
    runs.run(stop_after_epochs=2)
    runs.run(stop_after_epochs=1)  # a new folder: resumes from the state, epochs go on
    stale = runs.checkpoint(1)
    assert CheckpointFolder(str(stale)).committed_batches(), "run 1 left no committed batch"
    with pytest.raises(PipelineFailedError, match="belongs to another run") as refused:
        runs.run(checkpoint_of=stale.parent)
    assert "resumes from its state" in str(refused.value)

    # Over an empty state store, a folder with committed batches is refused too.
    elsewhere = Runs(spark, NEXMARK, tmp_path / "elsewhere", monkeypatch)
    with pytest.raises(PipelineFailedError, match="whose state is not in the state store"):
        elsewhere.run(checkpoint_of=stale.parent)


def test_state_without_stored_offsets_needs_its_checkpoint(
        spark: SparkSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = Runs(spark, NEXMARK, tmp_path, monkeypatch)
    with open_store(runs.state_url) as store:  # what an older Spate committed
        state = store.pipeline("default", "test")
        state.begin_epoch(0, [])
        state.commit_epoch(0, {"watermarks": None, "sinks": {}, "counters": {},
                               "finished": False})
    with pytest.raises(PipelineFailedError, match="without source offsets"):
        runs.run()

