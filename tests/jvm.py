"""Cheaper JVMs for the test run: JIT and GC options, and a class-data archive of Spark.

The suite starts dozens of Spark drivers (the shared session, ``spate run``, job
processes, tenant applications), and a driver's start-up is most of a short test's
CPU. Two things cut it, measured on ``spate run examples/quickstart.sql``:

* ``-XX:TieredStopAtLevel=1 -XX:+UseSerialGC``: C1 only, no concurrent collector
  threads. A test JVM lives seconds to minutes and C2's compiler threads took about
  a third of its CPU (37 CPU-seconds, 23 with these).
* a dynamic class-data-sharing archive of the classes a small streaming pipeline
  loads (``-XX:SharedArchiveFile``): classes are mapped instead of parsed and
  verified (another 4 CPU-seconds per start, and 4 s sooner to the first epoch).
  Spate makes it (:mod:`spate.engine.jvm_archive`), here with the options above.

Both reach every driver through ``SPARK_SUBMIT_OPTS``, which Spark's launcher adds
to the driver's command and job sandboxes inherit (an archive a sandbox cannot see
is skipped silently: ``-Xshare:auto``). Benchmarks keep the JVM's defaults, as
production does (``SPATE_BENCHMARK=1``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spate.engine.jvm_archive import QUIET  # no CDS notes on stderr: tests read it

REPO = Path(__file__).resolve().parents[1]
JIT_AND_GC = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: The archive's home: out of git, kept between local runs.
ARCHIVE_DIR = REPO / "test-artifacts" / "jvm"


def build_archive() -> Path | None:
    """The archive of this pyspark and this Java, made by Spate's own
    (:mod:`spate.engine.jvm_archive`) with the test JVMs' options when missing."""
    env = dict(os.environ, SPATE_JVM_ARCHIVE=str(ARCHIVE_DIR), SPARK_SUBMIT_OPTS=JIT_AND_GC)
    made = subprocess.run([sys.executable, "-m", "spate.engine.jvm_archive"], env=env,
                          cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    lines = made.stdout.split()
    path = Path(lines[-1]) if made.returncode == 0 and lines else None
    return path if path is not None and path.is_file() else None


def jvm_options_for_tests() -> str:
    """``SPARK_SUBMIT_OPTS`` for the run's drivers; builds the archive when missing."""
    path = build_archive()
    if path is not None:
        return f"{JIT_AND_GC} {QUIET} -XX:SharedArchiveFile={path}"
    return JIT_AND_GC
