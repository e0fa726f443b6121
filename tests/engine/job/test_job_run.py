"""A bounded pipeline run by the job process: events in order with honest figures, the
right output, exit 0; and the refusals that happen before Spark starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spate.engine.job.cluster import EMBEDDED_STATE_ON_CLUSTER
from tests.engine.job.support import epochs, make_spec, operator, start_job

pytestmark = pytest.mark.e2e

# 30 rows, one a second, keys 0..2; read ten per epoch.
BOUNDED_SQL = """
CREATE TABLE readings (k BIGINT, v BIGINT, ts TIMESTAMP NOT NULL,
                       WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'single_file', path = '{{ IN }}', format = 'json', type = 'source',
      max_lines_per_batch = '10');
CREATE TABLE totals WITH (connector = 'single_file', path = '{{ OUT }}', format = 'json',
                          type = 'sink');
INSERT INTO totals
SELECT k, w.start AS window_start, n, total
FROM (SELECT k, TUMBLE(INTERVAL '10' SECOND) AS w, count(*) AS n, sum(v) AS total
      FROM readings GROUP BY k, w);
"""


def _write_input(path: Path) -> None:
    rows = [{"k": i % 3, "v": i, "ts": f"2024-01-01T00:00:{i:02d}Z"} for i in range(30)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _expected_output() -> list[dict[str, object]]:
    expected = []
    for start in (0, 10, 20):
        for k in range(3):
            values = [i for i in range(start, start + 10) if i % 3 == k]
            expected.append({"k": k, "window_start": f"2024-01-01T00:00:{start:02d}.000000Z",
                             "n": len(values), "total": sum(values)})
    return expected


@pytest.mark.spark
def test_a_bounded_pipeline_reports_each_epoch_and_finishes(tmp_path: Path) -> None:
    _write_input(tmp_path / "in.jsonl")
    out = tmp_path / "out" / "totals.jsonl"
    spec = make_spec(tmp_path, BOUNDED_SQL,
                     variables={"IN": str(tmp_path / "in.jsonl"), "OUT": str(out)})
    # The job fills {{ OUT }} from its spec, never from its environment.
    job = start_job(spec, tmp_path, env={"OUT": str(tmp_path / "from-environment.jsonl")})
    assert job.finish() == 0, job.log()[-3000:]

    kinds = [e["type"] for e in job.events if e["type"] != "heartbeat"]
    assert kinds == ["status", "epoch", "epoch", "epoch", "status"], job.events
    assert job.statuses() == ["running", "finished"]
    assert job.of_type("heartbeat"), "no heartbeat"

    reports = epochs(job.events)
    assert [e["epoch"] for e in reports] == [0, 1, 2]
    assert [e["rows_in"] for e in reports] == [10, 10, 10]
    assert sum(e["rows_out"] for e in reports) == 9
    assert reports[0]["watermark_us"] == 1_704_067_208_000_000  # 00:00:09 - 1 s
    assert [e["finished"] for e in reports] == [False, False, True]
    assert reports[0]["state_bytes"] > 0, "a stateful epoch staged no state"
    for event in reports:
        assert 0 < event["busy_ratio"] <= 1
        assert event["duration_ms"] > 0 and event["committed_at_ms"] >= job.events[0]["at_ms"]
        assert event["rows_late"] == 0 and event["rows_dropped"] == 0
        source = operator(event, "source:readings")
        assert {k: source[k] for k in ("operator", "kind", "rows_out")} == {
            "operator": "source:readings", "kind": "source", "rows_out": 10}
        assert source["rows_out_per_s"] > 0 and "busy_ratio" not in source
        window = operator(event, "totals")
        assert (window["kind"], window["rows_in"]) == ("window", 10)
        assert window["rows_out"] == event["rows_out"]
        # The window's own time (its state tasks) and the sink's write, each a share of
        # the run's time: no more than the job's.
        assert 0 < window["busy_s"] <= event["duration_ms"] / 1000
        assert 0 < window["busy_ratio"] <= 1 and window["rows_in_per_s"] > 0
        sink = operator(event, "sink:totals")
        assert sink["rows_in"] == event["rows_out"]
        # Written every epoch, rows or none: the sink's job is what runs the state tasks.
        assert 0 < sink["busy_s"] <= event["duration_ms"] / 1000

    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(lines, key=lambda r: (r["window_start"], r["k"])) == _expected_output()
    assert not (tmp_path / "from-environment.jsonl").exists()


def test_sql_that_does_not_plan_fails_with_its_line_and_column(tmp_path: Path) -> None:
    sql = ("CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '20');\n"
           "INSERT INTO nowhere SELECT counter FROM impulse;\n")
    job = start_job(make_spec(tmp_path, sql), tmp_path)
    assert job.finish() == 1
    errors = job.of_type("error")
    assert len(errors) == 1 and "Traceback" in errors[0]["detail"]
    message = "invalid SQL at line 2:13: unknown table 'nowhere'"
    assert errors[0]["message"] == message
    assert job.statuses() == ["failed"]
    assert job.of_type("status")[-1]["message"] == message
    assert job.events[-1]["type"] == "status"


def test_embedded_state_with_a_cluster_master_is_refused_before_connecting(
        tmp_path: Path) -> None:
    sql = ("CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '20');\n"
           "CREATE TABLE out WITH (connector = 'blackhole');\n"
           "INSERT INTO out SELECT counter FROM impulse;\n")
    # Nothing listens on that port: the job must refuse before trying to reach it.
    spec = make_spec(tmp_path, sql, spark_master="spark://127.0.0.1:7077")
    job = start_job(spec, tmp_path)
    assert job.finish(timeout_s=60) == 1
    assert job.statuses() == ["failed"]
    assert job.of_type("status")[-1]["message"] == EMBEDDED_STATE_ON_CLUSTER
    assert "spark session ready" not in job.log()
