"""Windows over a JSON file, whole processes: `spate run` against a Spark user's job
and a Flink SQL user's.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_json_windows.py -s``

The input: ``LINES`` JSON lines (1,000,000 by default) of ``{"k", "v", "ts"}``,
1,000 keys drawn at random, event time advancing 3 ms a line (about 333
events a second of event time, 3,000 seconds in all).  Each query counts rows
per key in ``HOP(1 s slide, width)`` windows for the widths of ``WIDTHS``,
and per key in ``TUMBLE(60 s)``.

* Spate: ``spate run -p 2`` of a ``single_file`` source (declared watermark,
  250,000 lines an epoch) into ``blackhole``, in its own process, JVM start
  included, with the driver's class archive in place (``python -m
  spate.engine.jvm_archive``, made first if missing, as an installation would).
* Native: what a Spark user writes — ``spark.read.json`` with the schema given,
  ``groupBy(k, window(ts, width, 1 s)).count()``, written to Spark's ``noop``
  sink — in its own process, ``local[2]``, same JVM settings.
* Flink: what a Flink SQL user writes (:mod:`tests.benchmarks.flink_json_windows`:
  the filesystem source, the window TVF, parallelism 2) in its own process, on
  PyFlink from the ``apache-flink`` package.  That package pins its own numpy and
  pyarrow, so it lives in a separate environment: ``SPATE_BENCH_FLINK_PYTHON``
  names its Python, or the benchmark makes one under ``test-artifacts/flink``
  (``pip install apache-flink``) the first time.

Per run, wall time and CPU seconds by process kind (JVM, Python workers,
driver: :mod:`tests.benchmarks.process_cpu`).  Results go to ``results.json``
under ``json_windows`` and to ``docs/benchmarks/json_windows.png``; BENCHMARKS.md
quotes them.  The test checks Spate read every line and emitted as many
windows as native Spark; it asserts nothing about speed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import matplotlib
import pytest

from tests.benchmarks.process_cpu import Measured, run_measured
from tests.benchmarks.workloads import RESULTS_DIR, save_result

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # noqa: E402  (after choosing the file backend)

pytestmark = [pytest.mark.benchmark, pytest.mark.e2e, pytest.mark.timeout(7200)]

LINES = int(os.environ.get("SPATE_BENCH_JSON_LINES", "1000000"))
KEYS = 1_000
WIDTHS = [int(w) for w in os.environ.get("SPATE_BENCH_JSON_WIDTHS", "1,10,60,120,720").split(",")]
#: Each run is profiled apart (``SPATE_BENCH_PROFILE``, :func:`run_measured`).
PROFILES_ITS_RUNS = True
NATIVE = Path(__file__).with_name("native_json_windows.py")
FLINK = Path(__file__).with_name("flink_json_windows.py")
FLINK_ENV = Path(__file__).resolve().parents[2] / "test-artifacts" / "flink"


def _write_input(path: Path) -> None:
    draw = random.Random(7)
    start = datetime(2024, 1, 1, tzinfo=UTC)
    with path.open("w") as out:
        for line in range(LINES):
            ts = start + timedelta(milliseconds=3 * line)
            out.write(f'{{"k":{draw.randrange(KEYS)},"v":{line % 97},'
                      f'"ts":"{ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}"}}\n')


def _spate_sql(data: Path, window: str) -> str:
    return f"""
CREATE TABLE events (k BIGINT, v BIGINT, ts TIMESTAMP NOT NULL,
                     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'single_file', path = '{data}', format = 'json', type = 'source',
      max_lines_per_batch = 250000);
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT k, {window} AS w, count(*) AS n FROM events GROUP BY k, w;
"""


def _run_spate(data: Path, window: str, folder: Path, name: str) -> tuple[Measured, dict]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "query.sql").write_text(_spate_sql(data, window))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    spate = shutil.which("spate")
    assert spate is not None, "the spate command is not installed"
    measured = run_measured([spate, "run", "-p", "2", "query.sql"], folder, env,
                            profile_name=f"spate_{name}")
    assert measured.returncode == 0, measured.stderr[-2000:]
    finished = [line for line in measured.stderr.splitlines() if line.startswith("finished: ")]
    return measured, json.loads(finished[-1].removeprefix("finished: "))


def _run_native(data: Path, width_s: int, slide_s: int, folder: Path, name: str
                ) -> tuple[Measured, int]:
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    measured = run_measured([sys.executable, str(NATIVE), str(data), str(width_s),
                             str(slide_s)], folder, env, profile_name=f"native_{name}")
    assert measured.returncode == 0, measured.stderr[-2000:]
    return measured, int(measured.stdout.split()[-1])


def _flink_python() -> str:
    """The Python of an environment with PyFlink (made on first use)."""
    named = os.environ.get("SPATE_BENCH_FLINK_PYTHON")
    if named:
        return named
    python = FLINK_ENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(FLINK_ENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "apache-flink"],
                       check=True, timeout=1800)
    return str(python)


def _run_flink(python: str, data: Path, width_s: int, slide_s: int,
               folder: Path) -> tuple[Measured, int]:
    measured = run_measured([python, str(FLINK), str(data), str(width_s), str(slide_s)],
                            folder, dict(os.environ))
    assert measured.returncode == 0, measured.stderr[-2000:]
    counts = [line for line in measured.stdout.splitlines() if line.startswith("windows")]
    # The print sink's row of the count: "windows> +I[1234]" (or "windows:1> +I[1234]").
    return measured, int(counts[-1].rsplit("[", 1)[1].rstrip("]"))


def test_json_windows_against_spark_and_flink_users_jobs(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "spate.engine.jvm_archive"], check=True,
                   capture_output=True, timeout=600)
    flink_python = _flink_python()
    data = tmp_path / "events.jsonl"
    _write_input(data)
    queries = [(f"hop_{w}", f"HOP(INTERVAL '1' SECOND, INTERVAL '{w}' SECOND)", w, 1)
               for w in WIDTHS]
    queries.append(("tumble_60", "TUMBLE(INTERVAL '60' SECOND)", 60, 60))
    results = {}
    for name, window, width_s, slide_s in queries:
        native, native_rows = _run_native(data, width_s, slide_s, tmp_path, name)
        flink, flink_rows = _run_flink(flink_python, data, width_s, slide_s, tmp_path)
        spate, counts = _run_spate(data, window, tmp_path / name, name)
        assert counts["rows_in"] == LINES
        assert counts["rows_out"] == native_rows, f"{name}: windows differ from Spark's"
        assert flink_rows == native_rows, f"{name}: Flink's windows differ from Spark's"
        results[name] = {
            "width_s": width_s, "slide_s": slide_s, "windows": native_rows,
            "native_s": round(native.wall_s, 1), "flink_s": round(flink.wall_s, 1),
            "spate_s": round(spate.wall_s, 1),
            "spate_vs_native": round(native.wall_s / spate.wall_s, 2),
            "spate_vs_flink": round(flink.wall_s / spate.wall_s, 2),
            "native_cpu_s": native.cpu_s, "flink_cpu_s": flink.cpu_s, "spate_cpu_s": spate.cpu_s,
        }
        print(name, json.dumps(results[name]))
    save_result("json_windows", {"lines": LINES, "keys": KEYS, "queries": results})
    _plot(results)


def _plot(results: dict[str, dict]) -> None:
    names = list(results)
    figure, axis = plt.subplots(figsize=(7.5, 3.6))
    positions = range(len(names))
    axis.bar([p - 0.27 for p in positions], [results[n]["native_s"] for n in names], 0.27,
             label="native Spark (spark.read.json + window)")
    axis.bar(list(positions), [results[n]["flink_s"] for n in names], 0.27,
             label="Flink SQL (window TVF, parallelism 2)")
    axis.bar([p + 0.27 for p in positions], [results[n]["spate_s"] for n in names], 0.27,
             label="Spate (spate run -p 2)")
    axis.set_xticks(list(positions), [n.replace("_", " ") for n in names])
    axis.set_ylabel("seconds, whole process (lower is better)")
    axis.set_title(f"{LINES:,} JSON lines, {KEYS:,} keys: count per key and window")
    axis.legend()
    figure.tight_layout()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    figure.savefig(RESULTS_DIR / "json_windows.png", dpi=110)
