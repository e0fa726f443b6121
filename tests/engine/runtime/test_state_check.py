"""A run checks, before it reads any state, that its SQL can read the state it resumes
from (by :mod:`spate.engine.state_layout`, the rule the API's plan-update answers
with): SQL that cannot is refused with the operators and what changed, the state left
as it was; SQL that can resumes and finishes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from spate.engine.runtime.errors import PipelineFailedError
from spate.engine.state_layout import LAYOUT_KEY, layout_of
from spate.statestore import open_store
from tests.engine.harness import read_lines, run_pipeline

pytestmark = pytest.mark.spark

WINDOWS = """
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '200', message_count = '600',
    event_time_interval = '10000');
CREATE TABLE counts WITH (connector = 'single_file', path = '{{ OUT_DIR }}/counts.jsonl',
    format = 'json', type = 'sink');
INSERT INTO counts
SELECT w.end AS window_end, k, n
FROM (SELECT TUMBLE(INTERVAL '1' SECOND) AS w, counter % 3 AS k, count(*) AS n
      FROM ticks GROUP BY 1, 2);
"""
WIDER = WINDOWS.replace("'1' SECOND", "'2' SECOND")
ADDED_COLUMN = WINDOWS.replace("SELECT w.end AS window_end, k, n",
                               "SELECT w.start AS window_start, w.end AS window_end, k, n")


def test_a_run_resumes_only_from_state_its_sql_can_read(spark: SparkSession, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OUT_DIR", str(tmp_path / "out"))
    state_url = f"sqlite:///{tmp_path / 'state.db'}"
    run_pipeline(spark, WINDOWS, tmp_path / "first", state_url=state_url, stop_after_epochs=1)
    store = open_store(state_url)
    try:
        state = store.pipeline("default", "test")
        committed = state.last_committed_epoch()
        layout = layout_of(state.epoch_metadata().get(LAYOUT_KEY))
    finally:
        store.close()
    assert committed is not None and layout is not None and list(layout) == ["q0_window"]
    assert not state_finished(state_url)

    with pytest.raises(PipelineFailedError) as refused:
        run_pipeline(spark, WIDER, tmp_path / "wider", state_url=state_url)
    assert ("q0_window (TUMBLE 2 s by k: count(*) AS n): its window changed: TUMBLE 1 s → "
            "TUMBLE 2 s") in str(refused.value)
    assert last_epoch(state_url) == committed  # nothing was read or written

    run_pipeline(spark, ADDED_COLUMN, tmp_path / "added", state_url=state_url)
    assert state_finished(state_url)
    rows = [json.loads(line) for line in read_lines(tmp_path / "out" / "counts.jsonl")]
    assert sum(row["n"] for row in rows) == 600  # no window counted twice, none lost
    assert any("window_start" in row for row in rows)


def last_epoch(state_url: str) -> int | None:
    store = open_store(state_url)
    try:
        return store.pipeline("default", "test").last_committed_epoch()
    finally:
        store.close()


def state_finished(state_url: str) -> bool:
    store = open_store(state_url)
    try:
        return bool(store.pipeline("default", "test").epoch_metadata().get("finished"))
    finally:
        store.close()
