"""``spate run`` through its command line: bad SQL, bad input, preview output.

Planning must not need Spark: those tests run the CLI with ``JAVA_HOME``
pointing nowhere, so any attempt to start Spark would fail differently.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
SOURCE = """CREATE TABLE t (k BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = '{path}', format = 'json', type = 'source'{extra});
"""


def _spate(*args: str, cwd: Path, no_java: bool = False) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if no_java:
        env["JAVA_HOME"] = str(cwd / "no-java-here")
        env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                      if not (Path(p) / "java").exists())
    return subprocess.run([sys.executable, "-m", "spate.api.cli", "run", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def _write_input(tmp_path: Path) -> Path:
    data = tmp_path / "in.jsonl"
    data.write_text('{"k": 1, "ts": "2024-01-01T00:00:01Z"}\n'
                    '{"k": 2, "ts": "2024-01-01T00:00:02Z"}\n'
                    '{"k": 3, "ts": \n'
                    '{"k": 4, "ts": "2024-01-01T00:00:04Z"}\n')
    return data


def test_bad_sql_reports_file_line_column_and_exits_2_without_spark(tmp_path: Path) -> None:
    pipeline = tmp_path / "bad.sql"
    pipeline.write_text("CREATE TABLE t WITH (connector = 'impulse', event_rate = '10');\n"
                        "\n"
                        "SELECT counter FROM t WHERE (;\n")
    result = _spate(str(pipeline), cwd=tmp_path, no_java=True)
    assert result.returncode == 2, result.stderr
    assert result.stderr == (f"{pipeline}:3:30: error: syntax error: expected an expression "
                             "after '(', found the end of the statement\n")
    assert result.stdout == ""


def test_unknown_column_is_located(tmp_path: Path) -> None:
    pipeline = tmp_path / "typo.sql"
    pipeline.write_text(SOURCE.format(path="in.jsonl", extra="") + "SELECT kk FROM t;\n")
    result = _spate(str(pipeline), cwd=tmp_path, no_java=True)
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"{pipeline}:3:8: error: unknown column 'kk' (did you mean 'k'?); available: k, ts")


def test_explain_needs_no_spark(tmp_path: Path) -> None:
    pipeline = tmp_path / "explain.sql"
    pipeline.write_text(SOURCE.format(path="in.jsonl", extra="") + """
SELECT w.end AS window_end, n
FROM (SELECT TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n FROM t GROUP BY w);
""")
    result = _spate("--explain", str(pipeline), cwd=tmp_path, no_java=True)
    assert result.returncode == 0, result.stderr
    assert "[spate]" in result.stdout and "TUMBLE" in result.stdout
    assert "[spark]" in result.stdout


@pytest.mark.spark
def test_malformed_json_fails_the_pipeline_naming_file_and_line(tmp_path: Path) -> None:
    data = _write_input(tmp_path)
    pipeline = tmp_path / "strict.sql"
    pipeline.write_text(SOURCE.format(path=data, extra="") + "SELECT k FROM t;\n")
    result = _spate(str(pipeline), cwd=tmp_path)
    assert result.returncode == 1
    assert f"bad record in {data} at line 3" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("error: pipeline failed:")


@pytest.mark.spark
def test_dropped_records_are_counted_and_preview_prints_rows(tmp_path: Path) -> None:
    data = _write_input(tmp_path)
    pipeline = tmp_path / "lenient.sql"
    pipeline.write_text(SOURCE.format(path=data, extra=", bad_data = 'drop'")
                        + "SELECT k * 10 AS k10 FROM t;\n")
    result = _spate(str(pipeline), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(json.loads(line)["k10"] for line in result.stdout.splitlines()) == [10, 20, 40]
    summary = result.stderr.strip().splitlines()[-1]
    assert summary.startswith("finished: ")
    counters = json.loads(summary.removeprefix("finished: "))
    assert (counters["rows_in"], counters["rows_dropped"], counters["rows_out"]) == (3, 1, 3)


@pytest.mark.spark
def test_preview_of_updating_rows_prints_changes(tmp_path: Path) -> None:
    data = _write_input(tmp_path)
    pipeline = tmp_path / "updating.sql"
    pipeline.write_text(SOURCE.format(path=data, extra=", bad_data = 'drop', "
                                                       "max_lines_per_batch = '1'")
                        + "SELECT k % 2 AS parity, count(*) AS n FROM t GROUP BY k % 2;\n")
    result = _spate(str(pipeline), "--update-flush-interval-ms", "0", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"op": "c", "parity": 1, "n": 1}, {"op": "c", "parity": 0, "n": 1},
        {"op": "u", "parity": 0, "n": 2}]


@pytest.mark.spark
def test_a_run_prints_no_jvm_or_spark_start_up_banner(tmp_path: Path) -> None:
    pipeline = tmp_path / "small.sql"
    pipeline.write_text("CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '100', "
                        "message_count = '3');\n"
                        "CREATE TABLE out WITH (connector = 'stdout', format = 'json');\n"
                        "INSERT INTO out SELECT counter FROM ticks;\n")
    result = _spate(str(pipeline), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == 3
    for banner in ("WARNING: Using incubator modules", "Setting default log level",
                   "To adjust logging level"):
        assert banner not in result.stderr, result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith("finished: ")


def _wait_for_lines(path: Path, count: int, process: subprocess.Popen[str],
                    timeout_s: float = 300.0) -> None:
    """Wait for output (a patient deadline: Spark starts slowly on a loaded machine)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= count:
            return
        assert process.poll() is None, process.communicate()[1]
        time.sleep(0.1)
    raise AssertionError(f"{path} never reached {count} lines")


def _stop(process: subprocess.Popen[str]) -> dict[str, int]:
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr
    summary = stderr.strip().splitlines()[-1]
    assert summary.startswith("stopped: "), stderr
    return json.loads(summary.removeprefix("stopped: "))  # type: ignore[no-any-return]


@pytest.mark.spark
def test_sigterm_stops_an_unbounded_pipeline_after_a_commit_and_it_resumes(
        tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    pipeline = tmp_path / "endless.sql"
    pipeline.write_text(f"""
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '200');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
                       type = 'sink');
INSERT INTO out SELECT counter, subtask_index FROM ticks;
""")
    env = dict(os.environ)
    args = [sys.executable, "-m", "spate.api.cli", "run", str(pipeline), "-p", "2"]
    first = subprocess.Popen(args, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    _wait_for_lines(out, 50, first)
    counters = _stop(first)
    lines = out.read_text().splitlines()
    # Every written line was committed: none belongs to an epoch cut short.
    assert len(lines) == counters["rows_out"] == counters["rows_in"]

    second = subprocess.Popen(args, cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True)
    _wait_for_lines(out, len(lines) + 50, second)
    resumed = _stop(second)
    more = out.read_text().splitlines()
    assert more[:len(lines)] == lines
    assert len(more) == resumed["rows_out"] > counters["rows_out"]
    rows = [json.loads(line) for line in more]
    # Counters 0, 1, 2, ... once each, subtask n mod 2 emitting n: nothing lost or
    # repeated across the restart.
    assert sorted(r["counter"] for r in rows) == list(range(len(rows)))
    assert all(r["subtask_index"] == r["counter"] % 2 for r in rows)
