"""Scaling of stateful queries with executor cores: Spate and native Spark, each with 1
and with 2 cores, on local Spark (``local[1]`` vs ``local[2]``) and on a standalone
cluster of two 1-core workers (the application given 1 core, then 2).

"One core" is the whole process tree pinned to one CPU with ``taskset``
(``local[1]`` alone leaves the JVM's other threads, the Python workers and the
driver the machine's second CPU); on the cluster each worker, with its
executor, is pinned to a CPU of its own.  Stateful operators run in Spark
tasks, one per key-group range, so a second core should nearly halve an
epoch's work; the driver only begins, runs and commits
epochs, so its CPU time should stay a small share of the epochs' wall time.
Every run is a process of its own (:mod:`tests.benchmarks.scaling_job`): a
SparkSession keeps its master for life.  Figures go to ``results.json`` under
``scaling_local`` and ``scaling_standalone``, the plots to ``scaling_local.png``
and ``scaling_standalone.png``; nothing is asserted about speed.

    SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_scaling.py -s
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import matplotlib
import pytest

from tests.benchmarks.scaling_job import QUERIES
from tests.benchmarks.workloads import RESULTS_DIR, save_result
from tests.conftest import ThrowawayPostgres
from tests.scheduler.clusters import (
    kill_daemons,
    spark_env,
    start_master,
    start_worker,
    wait_for_workers,
)

matplotlib.use("Agg")
from matplotlib import pyplot as plt  # noqa: E402  (after choosing the file backend)

pytestmark = [pytest.mark.benchmark, pytest.mark.spark, pytest.mark.timeout(7200)]

REPOSITORY = Path(__file__).resolve().parents[2]
#: Events per run: each Spate run takes tens of seconds on one core.
EVENTS = {"hop60": 600_000, "q4": 150_000, "q7": 150_000, "updating100k": 400_000}
CORES = (1, 2)


def run_job(master: str, engine: str, query: str, cores: int, state_url: str,
            conf: dict[str, str] | None = None) -> dict[str, Any]:
    command = [sys.executable, "-m", "tests.benchmarks.scaling_job", master, engine, query,
               str(EVENTS[query]), str(cores), state_url, json.dumps(conf or {})]
    if master.startswith("local"):
        # local[1] alone is not one core: the JVM's other threads, the Python workers
        # and the driver would use the other.  The whole process tree gets ``cores``.
        command = ["taskset", "-c", ",".join(str(c) for c in range(cores)), *command]
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True,
                          timeout=1800, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["rows_in"] >= EVENTS[query], f"{engine} {query} read too little: {result}"
    print(f"{master:>24} {engine:>6} {query:>13} {cores} core(s): "
          f"{result['events'] / result['seconds']:>9,.0f} ev/s, driver CPU "
          f"{result['driver_cpu_s']:.1f} s of {result['seconds']:.1f} s", flush=True)
    return result


def measure(master_of: dict[int, str], state_url: str, key: str,
            conf_of: dict[int, dict[str, str]] | None = None) -> list[dict[str, Any]]:
    """Run every query on both engines with 1 and 2 cores; the rows are saved under
    ``key`` as they come (a long run cut short keeps what it measured)."""
    rows: list[dict[str, Any]] = []
    for query in EVENTS:
        spec = QUERIES[query]
        for engine in ("spate", "native"):
            if engine == "native" and spec.native is None:
                continue
            runs = {cores: run_job(master_of[cores], engine, query, cores, state_url,
                                   (conf_of or {}).get(cores)) for cores in CORES}
            one, two = runs[1], runs[2]
            row = {"query": query, "engine": engine, "events": EVENTS[query],
                   "seconds": {str(c): runs[c]["seconds"] for c in CORES},
                   "events_per_s": {str(c): EVENTS[query] / runs[c]["seconds"] for c in CORES},
                   "scaling": one["seconds"] / two["seconds"],
                   "driver_cpu_s": {str(c): runs[c]["driver_cpu_s"] for c in CORES}}
            if engine == "spate":
                row["driver_cpu_share_of_epochs"] = {
                    str(c): runs[c]["driver_cpu_s"] / runs[c]["epochs_s"] for c in CORES}
            print(f"  -> {query} {engine}: 2 cores / 1 core = x{row['scaling']:.2f}", flush=True)
            rows.append(row)
            save_result(key, rows)
    return rows


def test_scaling_on_local_spark(tmp_path: Path) -> None:
    rows = measure({c: f"local[{c}]" for c in CORES}, "sqlite:///{work}/state.db",
                   "scaling_local")
    _plot(rows, "local", "local[1] vs local[2], SQLite state")


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A standalone master with two 1-core workers; its ``spark://`` URL."""
    directory = tmp_path_factory.mktemp("scaling-cluster")
    env = spark_env(directory)
    master_url, ui_port, master = start_master(directory / "master.log", env)
    daemons = [master]
    try:
        # Each worker, and the executor it launches, on a CPU of its own.
        daemons += [start_worker(master_url, directory / f"worker-{index}", env, memory="3g",
                                 cpus=str(index)) for index in range(2)]
        wait_for_workers([ui_port], directory, each=2)
        yield master_url
    finally:
        kill_daemons(daemons)


def test_scaling_on_a_standalone_cluster(two_workers: str,
                                         throwaway_postgres: ThrowawayPostgres) -> None:
    state_url = throwaway_postgres.create()
    conf = {c: {"spark.cores.max": str(c), "spark.executor.cores": "1",
                "spark.executor.memory": "2g"} for c in CORES}
    rows = measure({c: two_workers for c in CORES}, state_url, "scaling_standalone", conf)
    _plot(rows, "standalone", "standalone, 1 vs 2 workers of 1 core, PostgreSQL state")


def _plot(rows: list[dict[str, Any]], name: str, title: str) -> None:
    figure, axes = plt.subplots(figsize=(8, 4.2))
    labels = [f"{r['query']}\n{r['engine']}".replace("updating", "updating\n")
              for r in rows]
    axes.bar(labels, [r["scaling"] for r in rows],
             color=["tab:blue" if r["engine"] == "spate" else "tab:gray" for r in rows])
    axes.axhline(1.0, color="black", linewidth=0.8)
    axes.axhline(2.0, color="black", linewidth=0.8, linestyle=":")
    for index, row in enumerate(rows):
        axes.annotate(f"x{row['scaling']:.2f}", (index, row["scaling"]),
                      textcoords="offset points", xytext=(0, 4), ha="center", fontsize=8)
    axes.set_ylim(0, 2.2)
    axes.set_ylabel("speed with 2 cores / speed with 1")
    axes.set_title(f"Scaling with executor cores ({title})", fontsize=10)
    figure.tight_layout()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    figure.savefig(RESULTS_DIR / f"scaling_{name}.png", dpi=110)
    plt.close(figure)
