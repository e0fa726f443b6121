"""Run a command and measure where its CPU time went, process by process.

A Spate or Spark run is a tree of processes: the driver's Python, the JVM
(Spark's driver and executors in local mode), and Python workers the JVM
starts (data-source readers, Arrow UDF tasks).  :func:`run_measured` samples
``/proc`` while the command runs and sums CPU seconds by kind, so a benchmark
can say which of them a miss comes from.  With ``SPATE_BENCH_PROFILE`` set to
a folder, the driver's Python and each Python worker are also sampled by py-spy
(one raw profile per process, merged into ``<name>.driver.txt`` and
``<name>.workers.txt``: collapsed stacks, hottest first), and the run's Spark
jobs are summed up from Spark's event log into ``<name>.jobs.txt``
(:mod:`tests.benchmarks.spark_jobs`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from tests.benchmarks.spark_jobs import event_log_env, summarize_into

_TICK = os.sysconf("SC_CLK_TCK")


@dataclass
class Measured:
    """One command's wall time, exit code, output, and CPU seconds by process kind."""

    wall_s: float
    returncode: int
    stdout: str
    stderr: str
    cpu_s: dict[str, float] = field(default_factory=dict)


def _kind(command: str) -> str:
    if command.split(" ", 1)[0].endswith("java"):
        return "jvm"
    if "pyspark.daemon" in command or "pyspark.sql" in command:
        return "python workers"
    return "driver"


def _tree(root: int) -> dict[int, tuple[str, float]]:
    """Every process under ``root`` (itself included): command line and CPU seconds."""
    children: dict[int, list[int]] = {}
    facts: dict[int, tuple[str, float]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        parent = int(fields[1])
        children.setdefault(parent, []).append(int(entry))
        facts[int(entry)] = (command, (int(fields[11]) + int(fields[12])) / _TICK)
    found: dict[int, tuple[str, float]] = {}
    pending = [root]
    while pending:
        pid = pending.pop()
        if pid in facts:
            found[pid] = facts[pid]
        pending.extend(children.get(pid, []))
    return found


def run_measured(command: list[str], cwd: Path, env: dict[str, str] | None = None,
                 profile_name: str | None = None) -> Measured:
    """Run ``command`` to its end, sampling its process tree every 0.2 s."""
    profile_dir = os.environ.get("SPATE_BENCH_PROFILE")
    spies: list[subprocess.Popen[bytes]] = []
    seen: dict[int, tuple[str, float]] = {}
    started = time.perf_counter()
    profiling = bool(profile_dir and profile_name and shutil.which("py-spy"))
    if profiling:
        jobs_dir = Path(profile_dir) / f"{profile_name}.spark"
        shutil.rmtree(jobs_dir, ignore_errors=True)
        env = event_log_env(jobs_dir, dict(os.environ) if env is None else env)
    with subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True) as process:
        driver_spied = False
        # The pipes are read at the end: both outputs here are small.
        while process.poll() is None:
            for pid, (cmd, cpu) in _tree(process.pid).items():
                if profiling and pid not in seen and _kind(cmd) == "python workers":
                    spies.append(_spy(pid, Path(profile_dir) / f"{profile_name}.{pid}.raw"))
                # The command may start as a shell that execs Python (a version shim).
                if (profiling and pid == process.pid and not driver_spied
                        and "python" in cmd.split(" ", 1)[0]):
                    spies.append(_spy(pid, Path(profile_dir) / f"{profile_name}.driver.raw"))
                    driver_spied = True
                seen[pid] = (cmd, cpu)
            time.sleep(0.2)
        stdout, stderr = process.communicate()
    wall = time.perf_counter() - started
    cpu: Counter[str] = Counter()
    for cmd, seconds in seen.values():
        cpu[_kind(cmd)] += seconds
    for spy in spies:
        spy.wait(timeout=30)
    if profiling:
        merge_profiles(Path(profile_dir), f"{profile_name}.driver", "driver")
        merge_profiles(Path(profile_dir), f"{profile_name}.[0-9]*", "workers")
        summarize_into(jobs_dir, Path(profile_dir) / f"{profile_name}.jobs.txt")
    return Measured(wall, process.returncode, stdout, stderr,
                    {k: round(v, 1) for k, v in cpu.items()})


def _spy(pid: int, output: Path) -> subprocess.Popen[bytes]:
    output.parent.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(["py-spy", "record", "--rate", "100", "--format", "raw",
                             "--output", str(output), "--pid", str(pid)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def merge_profiles(folder: Path, pattern: str, kind: str) -> None:
    """The raw profiles ``<pattern>.raw`` as one collapsed-stack file,
    ``<name>.<kind>.txt``, hottest stacks first."""
    name = pattern.split(".", 1)[0]
    stacks: Counter[str] = Counter()
    for raw in folder.glob(f"{pattern}.raw"):
        for line in raw.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            if count.isdigit():
                stacks[stack] += int(count)
        raw.unlink()
    lines = [f"{stack} {count}" for stack, count in stacks.most_common()]
    (folder / f"{name}.{kind}.txt").write_text("\n".join(lines) + "\n")
