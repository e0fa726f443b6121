"""A class-data-sharing archive for the driver's JVM: Spark's classes, loaded once.

A JVM that starts with a dynamic CDS archive (Java's ``-XX:SharedArchiveFile``)
maps the classes a previous run loaded instead of finding, parsing and
verifying them again.  On a two-core machine it starts a SparkSession about
1.5 s sooner and runs its first job about 1 s sooner (BENCHMARKS.md, "Windows
over a JSON file").

``python -m spate.engine.jvm_archive`` makes the archive: it runs a small
pipeline (a streaming query over a Python data source, a window step's tasks,
a sink) in a JVM that writes the classes it loaded when it exits, waits for it
to exit, then moves the file into place — so an archive in place is always
whole (a truncated one would crash the JVM that maps it).  The archive belongs
to one JDK and one Spark installation; its file name carries both, and
:func:`driver_options` uses it only when it matches.  ``SPATE_JVM_ARCHIVE``
names the folder (default: ``~/.cache/spate/jvm``), or ``off``.

Job processes in a compute unit see neither that folder nor that variable: an
operator gives their drivers an archive through ``SPARK_SUBMIT_OPTS``
(``-XX:SharedArchiveFile=...``, which the units pass on; docs/running.md), and
an archive named there takes precedence over this one.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

ARCHIVE_ENV = "SPATE_JVM_ARCHIVE"
#: The JVM's CDS messages (e.g. classes it leaves out of an archive) are not the user's.
QUIET = "-Xlog:cds=off,cds+dynamic=off"
#: The pipeline whose classes the archive holds: what every pipeline's start loads.
_TRAINING_SQL = """
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '1000000',
                         message_count = '20000', event_time_interval = '1000000');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter % 10 AS k, TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n
FROM ticks GROUP BY k, w;
"""


def archive_path() -> Path | None:
    """Where the archive for this JDK and Spark installation is (or would be); None
    when archives are off or no JDK is found."""
    setting = os.environ.get(ARCHIVE_ENV, "")
    if setting.lower() == "off":
        return None
    folder = Path(setting) if setting else Path.home() / ".cache" / "spate" / "jvm"
    java = _java()
    if java is None:
        return None
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    identity = hashlib.sha256()
    for part in (str(java), _stat(java), str(jars), pyspark.__version__,
                 *sorted(f"{p.name}:{_stat(p)}" for p in jars.glob("*.jar"))):
        identity.update(part.encode() + b"\0")
    return folder / f"spark-{pyspark.__version__}-{identity.hexdigest()[:16]}.jsa"


def driver_options() -> str:
    """The driver JVM's options that map the archive, if one is in place and
    ``SPARK_SUBMIT_OPTS`` names none; else ''."""
    if "-XX:SharedArchiveFile=" in os.environ.get("SPARK_SUBMIT_OPTS", ""):
        return ""
    path = archive_path()
    if path is None or not path.is_file():
        return ""
    return f"-XX:SharedArchiveFile={path} {QUIET}"


def create() -> Path | None:
    """Make the archive (if there is none yet); return where it is, or None (off)."""
    path = archive_path()
    if path is None:
        return None
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        _training_run(partial)
        if not partial.is_file():
            raise RuntimeError("the JVM exited without writing its class archive")
        os.replace(partial, path)  # whole, or not there at all
    finally:
        partial.unlink(missing_ok=True)
    return path


def _training_run(output: Path) -> None:
    """Run the training pipeline in a JVM that archives its classes into ``output``."""
    from spate.engine.planner import plan_pipeline
    from spate.engine.runtime.runner import PipelineRunner, RunOptions
    from spate.engine.spark import build_spark
    from spate.statestore import open_store

    options = f"-XX:ArchiveClassesAtExit={output} {QUIET}"
    spark = build_spark("local[2]", "spate-jvm-archive", java_options=options)
    process = spark.sparkContext._gateway.proc  # type: ignore[union-attr]  # noqa: SLF001
    with tempfile.TemporaryDirectory(prefix="spate-jvm-archive-") as work:
        store = open_store(f"sqlite:///{work}/state.db")
        try:
            runner = PipelineRunner(plan_pipeline(_TRAINING_SQL), spark,
                                    store.pipeline("spate", "jvm-archive"),
                                    RunOptions(parallelism=2,
                                               checkpoint_dir=f"{work}/checkpoint"))
            runner.run()
        finally:
            store.close()
        spark.stop()
        # The JVM writes the archive as it exits, once its standard input closes.
        process.stdin.close()
        code = process.wait(timeout=300)
    if code != 0:
        raise RuntimeError(f"the JVM exited with code {code} while writing its class archive")


def _java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(os.path.realpath(found)) if found and Path(found).exists() else None


def _stat(path: Path) -> str:
    facts = path.stat()
    return f"{facts.st_size}:{facts.st_mtime_ns}"


if __name__ == "__main__":
    made = create()
    if made is None:
        sys.exit(f"class archives are off ({ARCHIVE_ENV})")
    print(made)
