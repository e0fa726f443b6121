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

Both reach every driver through ``SPARK_SUBMIT_OPTS``, which Spark's launcher adds
to the driver's command and job sandboxes inherit (an archive a sandbox cannot see
is skipped silently: ``-Xshare:auto``). Benchmarks keep the JVM's defaults, as
production does (``SPATE_BENCHMARK=1``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
JIT_AND_GC = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
#: The archive's home: out of git, kept between local runs.
ARCHIVE_DIR = REPO / "test-artifacts" / "jvm"
#: No CDS notes on stderr (tests read the drivers' stderr).
QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"

#: The pipeline the archive is made of: a source, a window operator and a sink, in two
#: epochs.
WARM_UP_SQL = """
CREATE TABLE nexmark WITH (connector = 'nexmark', event_rate = '2000', runtime = '2',
    rate_limited = 'false', max_events_per_batch = '2000');
CREATE TABLE out WITH (connector = 'single_file', path = '{out}', format = 'json',
    type = 'sink');
INSERT INTO out SELECT w.end AS window_end, bid.auction % 10 AS k, count(*) AS n
FROM nexmark WHERE bid IS NOT NULL GROUP BY TUMBLE(INTERVAL '1' SECOND) AS w, 2;
"""

#: It runs through Spate's engine on local Spark, then Spark stops cleanly (the JVM
#: writes the archive when it exits normally).
_WARM_UP = r"""
import sys, tempfile
from pathlib import Path
from spate.engine.planner import plan_pipeline
from spate.engine.runtime.runner import PipelineRunner, RunOptions
from spate.engine.spark import build_spark
from spate.statestore import open_store

work = Path(tempfile.mkdtemp(prefix="spate-cds-"))
spark = build_spark("local[2]", "spate-cds")
sql = sys.argv[1].format(out=work / "out.jsonl")
with open_store(f"sqlite:///{work / 'state.db'}") as store:
    runner = PipelineRunner(plan_pipeline(sql), spark, store.pipeline("cds", "cds"),
                            RunOptions(parallelism=2, checkpoint_dir=str(work / "checkpoint")))
    runner.run()
spark.stop()
"""


def archive_path() -> Path:
    """The archive of this pyspark and this Java (an archive fits one JVM build and one
    class path)."""
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    build = "".join(c if c.isalnum() else "-" for c in java.stderr.splitlines()[0])[:60] \
        if java.stderr else "unknown"
    return ARCHIVE_DIR / f"spark-{metadata.version('pyspark')}-{build}.jsa"


def build_archive(path: Path) -> bool:
    """Make the archive by running :data:`WARM_UP_SQL` once; whether it exists."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    env = dict(os.environ, SPARK_SUBMIT_OPTS=f"{JIT_AND_GC} {QUIET} "
                                             f"-XX:ArchiveClassesAtExit={partial}")
    subprocess.run([sys.executable, "-c", _WARM_UP, WARM_UP_SQL], env=env, cwd=REPO,
                   capture_output=True, timeout=600, check=False)
    if partial.exists():
        partial.rename(path)
    return path.exists()


def jvm_options_for_tests() -> str:
    """``SPARK_SUBMIT_OPTS`` for the run's drivers; builds the archive when missing."""
    path = archive_path()
    if path.exists() or build_archive(path):
        return f"{JIT_AND_GC} {QUIET} -XX:SharedArchiveFile={path}"
    return JIT_AND_GC
