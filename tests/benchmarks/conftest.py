"""Benchmarks run only when asked: ``SPATE_BENCHMARK=1 python -m pytest tests/benchmarks``.

They take minutes and measure, rather than check, so the default test run
skips them.  With ``SPATE_BENCH_PROFILE=FOLDER`` every benchmark is also
sampled by py-spy — the test's own process (the driver of an in-process
benchmark) and every process it starts (the JVM's Python workers, `spate run`
processes) — into ``FOLDER/<test>.txt``: collapsed stacks, hottest first, each
under the process it ran in.  A module that profiles its own runs (per query, as
``test_json_windows`` does) sets ``PROFILES_ITS_RUNS = True`` and is left to it.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.benchmarks.process_cpu import merge_profiles


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    del config
    if os.environ.get("SPATE_BENCHMARK") == "1":
        return
    skip = pytest.mark.skip(reason="benchmark: set SPATE_BENCHMARK=1 to run")
    for item in items:
        if "benchmark" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def profiled(request: pytest.FixtureRequest) -> Iterator[None]:
    """py-spy over the benchmark's process tree, when ``SPATE_BENCH_PROFILE`` names a folder."""
    folder = os.environ.get("SPATE_BENCH_PROFILE")
    if (not folder or "benchmark" not in request.keywords or shutil.which("py-spy") is None
            or getattr(request.module, "PROFILES_ITS_RUNS", False)):
        yield
        return
    name = request.node.name.replace("/", "_").replace("[", "_").rstrip("]")
    Path(folder).mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen(
        ["py-spy", "record", "--subprocesses", "--rate", "100", "--format", "raw",
         "--output", str(Path(folder) / f"{name}.raw"), "--pid", str(os.getpid())],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)  # py-spy writes what it sampled, then exits
        spy.wait(timeout=60)
        merge_profiles(Path(folder), name, "all")
