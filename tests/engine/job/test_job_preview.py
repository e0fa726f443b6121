"""A preview job: rows go to the channel as events, it stops at its row limit, and the
pipeline's real sink is never written."""

from __future__ import annotations

from pathlib import Path

import pytest

from spate.engine.job.spec import PREVIEW
from spate.statestore import open_store
from tests.engine.job.support import make_spec, start_job

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

PREVIEW_SQL = """
CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '40');
CREATE TABLE out WITH (connector = 'single_file', path = '{{ OUT }}', format = 'json',
                       type = 'sink');
INSERT INTO out
SELECT counter, CAST('2024-01-01 00:00:00' AS TIMESTAMP) + counter * INTERVAL '1' SECOND AS at
FROM impulse;
"""
LIMIT = 60


def test_a_preview_publishes_rows_up_to_its_limit_and_writes_no_sink(tmp_path: Path) -> None:
    out = tmp_path / "real-sink.jsonl"
    spec = make_spec(tmp_path, PREVIEW_SQL, kind=PREVIEW, preview_row_limit=LIMIT,
                     pipeline_id="preview-job-1", variables={"OUT": str(out)})
    job = start_job(spec, tmp_path)
    assert job.finish() == 0, job.log()[-3000:]

    assert job.statuses() == ["running", "finished"]
    assert "row limit of 60" in job.of_type("status")[-1]["message"]
    batches = job.of_type("rows")
    # One event per epoch that had rows (how many depends on how fast Spark started).
    assert batches and [b["epoch"] for b in batches] == sorted({b["epoch"] for b in batches})
    assert {b["sink"] for b in batches} == {"out"}
    rows = [row for batch in batches for row in batch["rows"]]
    # Exactly the limit, the last batch truncated; timestamps as ISO-8601 strings.
    assert [r["counter"] for r in rows] == list(range(LIMIT))
    assert rows[2] == {"counter": 2, "at": "2024-01-01T00:00:02.000000Z"}
    assert not out.exists(), "a preview wrote to the real sink"
    # Its state went to the store under the preview's own pipeline id.
    with open_store(spec.state_url) as store:
        assert store.pipelines("tenant-a") == [("tenant-a", "preview-job-1")]
