"""Footprint of a small generator pipeline: resident memory and CPU of ``spate run``.

``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks/test_generator_footprint.py -s``

``spate run`` of ``impulse`` at 10 rows/s into ``blackhole`` (the density
benchmark's pipeline) on its defaults, for :data:`RUN_S` seconds.  Its process
tree (the Python driver, the JVM, and whatever Python processes Spark starts) is
sampled every second from :data:`WARMUP_S` on: resident memory summed over the
processes (shared pages counted once per process: an upper bound), its mean and
median (a process the JVM forks briefly, to set a file's permissions, counts the
JVM's pages again while it lives), and the CPU time of the whole tree over the
sampled wall time.  The most processes of each name at once are recorded too: the generators run as
native Spark, so no Python process should be there but the driver.

``SPATE_FOOTPRINT_SOURCE``: another Spate source tree to run (for example an
older commit's, unpacked with ``git archive``), to measure it the same way; its
figures are recorded under its folder's name.  Written to ``results.json``
under ``generator_footprint``.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.benchmarks.workloads import load_results, save_result

pytestmark = [pytest.mark.benchmark, pytest.mark.e2e, pytest.mark.timeout(900)]

RUN_S = 60.0
WARMUP_S = 15.0
PIPELINE = """
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '10');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter, subtask_index FROM ticks;
"""
#: The top-level folders of a source tree that ``spate.*`` maps (pyproject.toml).
PACKAGES = ("api", "engine", "scheduler", "statestore", "migrations")


def _environment(work: Path) -> tuple[dict[str, str], str]:
    """The environment ``spate run`` starts in, and the name of the Spate it runs: the
    installed one, or ``SPATE_FOOTPRINT_SOURCE``'s through a tree of links named as
    its modules are imported (Spark's Python processes inherit the path)."""
    env = dict(os.environ)
    source = env.pop("SPATE_FOOTPRINT_SOURCE", None)
    if source is None:
        return env, "current"
    links = work / "import-root" / "spate"
    links.mkdir(parents=True)
    for package in PACKAGES:
        (links / package).symlink_to(Path(source).resolve() / package)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(links.parent),
                                                      env.get("PYTHONPATH")]))
    return env, Path(source).resolve().name


def _tree(root: psutil.Process) -> tuple[int, float, list[str]]:
    """RSS (bytes) and CPU time (s) of ``root`` and its descendants, and their names."""
    rss, cpu, names = 0, 0.0, []
    for process in (root, *root.children(recursive=True)):
        try:
            with process.oneshot():
                rss += process.memory_info().rss
                times = process.cpu_times()
                cpu += times.user + times.system
                names.append(process.name())
        except psutil.Error:  # it ended meanwhile
            continue
    return rss, cpu, names


def measure(run: subprocess.Popen[bytes]) -> dict[str, Any]:
    """Sample ``run``'s tree from :data:`WARMUP_S` to :data:`RUN_S` after its start."""
    root, started = psutil.Process(run.pid), time.monotonic()
    time.sleep(WARMUP_S)
    samples: list[int] = []
    _, cpu_before, _ = _tree(root)
    cpu_after = cpu_before
    sampled_from = time.monotonic()
    processes: Counter[str] = Counter()
    while time.monotonic() - started < RUN_S:
        rss, cpu_after, seen = _tree(root)
        samples.append(rss)
        processes |= Counter(seen)  # the most of each name at once
        time.sleep(1.0)
    wall = time.monotonic() - sampled_from
    return {"rss_mb_mean": round(sum(samples) / len(samples) / 2**20),
            "rss_mb_median": round(statistics.median(samples) / 2**20),
            "cpu_percent": round(100 * (cpu_after - cpu_before) / wall, 1),
            "processes": dict(sorted(processes.items()))}


def test_an_impulse_pipelines_footprint(tmp_path: Path) -> None:
    env, version = _environment(tmp_path)
    (tmp_path / "ticks.sql").write_text(PIPELINE)
    run = subprocess.Popen([sys.executable, "-m", "spate.api.cli", "run", "ticks.sql"],
                           cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    try:
        figures = measure(run)
    finally:
        run.send_signal(signal.SIGTERM)
        _, err = run.communicate(timeout=120)
    assert run.returncode == 0, err.decode(errors="replace")[-2000:]
    print(f"{version}: {figures}", flush=True)
    recorded = load_results().get("generator_footprint", {})
    save_result("generator_footprint", recorded | {version: figures})
