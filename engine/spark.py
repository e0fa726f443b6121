"""Builds the SparkSession a pipeline runs in, with Spate's settings."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

from spate.engine.jvm_archive import driver_options

log = logging.getLogger(__name__)

#: The folder of the ``sitecustomize`` that every Python process Spark starts runs.
WORKER_SITE = Path(__file__).with_name("worker_site")

#: Spark settings every Spate session gets.  UTC session time zone because SQL
#: TIMESTAMP has no zone and Spate maps it onto Spark's TimestampType read in UTC.
_BASE_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.streaming.stopGracefullyOnShutdown": "true",
    "spark.python.worker.reuse": "true",
    # Spark's Python processes import PySpark's compiled files rather than compile
    # its zip again, each of them (engine/worker_site/sitecustomize.py); the driver's
    # own (data source look-up and planning) get it from :func:`_driver_python_path`.
    "spark.executorEnv.PYTHONPATH": str(WORKER_SITE),
    "spark.sql.ansi.enabled": "false",
    # A stage whose generated method is longer than the JVM compiles (8,000 bytes of
    # bytecode, HotSpot's limit for JIT compilation) runs operator by operator instead
    # of interpreted: the nexmark generator's expressions ran ten times slower fused.
    "spark.sql.codegen.hugeMethodLimit": "8000",
    # Text no format reads is NULL, as the dialect says, rather than an "upgrade"
    # exception about Spark 2's parser reading it differently.
    "spark.sql.legacy.timeParserPolicy": "CORRECTED",
    # An epoch's cached frames live for one epoch: compressing them costs more
    # (per-column statistics on every row) than the memory it saves.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    # The streaming checkpoint's logs (offsets, commits) on local disk without a
    # checksum file beside each: Hadoop sets a local file's permissions by running
    # chmod, a process per file, when its native library is absent (as in PySpark's
    # wheel), so a .crc file per log file doubled the processes every epoch starts.
    "spark.hadoop.fs.AbstractFileSystem.file.impl": "org.apache.hadoop.fs.local.RawLocalFs",
}

#: Settings of each session (not of the application): the streaming checkpoint's logs
#: written through Hadoop's FileSystem API on a raw local file system.  The default
#: (FileContext) API checks links by running ``readlink``, four processes for each
#: log file written, two files every epoch: about 40 ms of each.  A session copies
#: its settings into the Hadoop settings it reads files with, key for key, so the
#: ``fs.`` keys here reach the checkpoint's file system and not the application's
#: (``FileSystem.getLocal`` wants the checksummed one); the file system cache is off
#: for ``file:``, as its cached instance would be the application's.
_SESSION_CONF = {
    "spark.sql.streaming.checkpointFileManagerClass":
        "org.apache.spark.sql.execution.streaming.checkpointing."
        "FileSystemBasedCheckpointFileManager",
    "fs.file.impl": "org.apache.hadoop.fs.RawLocalFileSystem",
    "fs.file.impl.disable.cache": "true",
}


#: Quiet JVM logging: a failed pipeline is reported once, by Spate.
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


#: Settings read when the driver's JVM starts: only for a session that starts its own JVM.
_DRIVER_LAUNCH_CONF = {
    "spark.driver.memory": "2g",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}",
}


#: Lines the JVM prints on stderr at every start that Spate drops.  Spark's launcher
#: (``JavaModuleOptions``) always adds ``--add-modules=jdk.incubator.vector`` to the
#: driver's command, and the JVM then warns about the incubator module; no setting
#: turns either off, so the driver's stderr is filtered (see :func:`_quiet_jvm_start`).
JVM_BANNER_PREFIXES = (b"WARNING: Using incubator modules:",)


@contextmanager
def _quiet_jvm_start() -> Iterator[None]:
    """Run the block with this process's stderr going through a filter that drops
    :data:`JVM_BANNER_PREFIXES` lines.

    A JVM started in the block inherits the filter's pipe as its stderr and keeps
    it: everything else it prints is passed on, for as long as it runs. Once no
    process holds the pipe, the filter's thread ends.
    """
    try:
        original = os.dup(2)
    except OSError:  # no stderr to filter
        yield
        return
    read_end, write_end = os.pipe()
    threading.Thread(target=_pass_on, args=(read_end, original), daemon=True,
                     name="spark-stderr").start()
    sys.stderr.flush()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(original, 2)


def _pass_on(read_end: int, target: int) -> None:
    """Copy lines from ``read_end`` to ``target``, less the JVM's banner lines. The
    pipe is drained to its end even when ``target`` fails, so the JVM never blocks
    on a full pipe."""
    writable = True
    with os.fdopen(read_end, "rb") as lines, os.fdopen(target, "wb", buffering=0) as out:
        for line in lines:
            if not writable or line.startswith(JVM_BANNER_PREFIXES):
                continue
            try:
                out.write(line)
            except OSError:
                writable = False


@contextmanager
def _driver_python_path() -> Iterator[None]:
    """Start the driver's JVM in the block with :data:`WORKER_SITE` on its
    ``PYTHONPATH``.

    The JVM hands that variable to the Python processes it starts on the driver:
    the one that looks up installed data sources when the first is registered,
    those that plan a Python data source's reads, a streaming source's runner.
    ``spark.executorEnv`` reaches only the executors' workers, so without this
    each of those compiled PySpark's zip again (about 0.4 s of the first
    registration).  This process's own environment is restored after the block.
    """
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(WORKER_SITE), *([previous] if previous else [])])
    try:
        yield
    finally:
        if previous is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = previous


def build_spark(master: str | None = "local[2]", app_name: str = "spate",
                conf: Mapping[str, str] | None = None,
                java_options: str | None = None) -> SparkSession:
    """Return a SparkSession for ``master`` with Spate's data sources registered.

    ``master`` None means the process was launched by ``spark-submit``: its
    master, application name and driver JVM settings stand, and Spate's
    session settings (then ``conf``) are applied on top.  Otherwise the driver's
    JVM starts here, with ``java_options`` (default: the class archive's, if one
    is in place: :mod:`spate.engine.jvm_archive`).
    """
    # Workers must start the interpreter Spate runs in, not whatever is on PATH.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if master is not None and master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder
    settings = dict(_BASE_CONF)
    if master is not None:
        builder = builder.master(master).appName(app_name)
        settings.update(_DRIVER_LAUNCH_CONF)
        extra = driver_options() if java_options is None else java_options
        if extra:
            key = "spark.driver.extraJavaOptions"
            settings[key] = f"{settings[key]} {extra}"
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    if master is None:
        spark = builder.getOrCreate()  # spark-submit's JVM: it has started already
    else:
        with _quiet_jvm_start(), _driver_python_path():
            spark = builder.getOrCreate()
    for key, value in _SESSION_CONF.items():
        spark.conf.set(key, value)
    spark.sparkContext.setLogLevel("ERROR")
    # PySpark logs each failed SQL call as a JSON line with the whole Java stack; the
    # pipeline reports the failure once, in one line of its own.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    log.info("spark session ready", extra={"master": spark.sparkContext.master})
    return spark


def hosted_session(application: SparkSession, conf: Mapping[str, str] | None = None
                   ) -> SparkSession:
    """A session of its own in ``application``'s Spark application (its SparkContext):
    its own temporary views, UDFs and SQL settings, so pipelines and previews sharing a
    warm application never see each other's names.  Settings that only a new JVM
    can take (the driver's memory) are ignored."""
    session = application.newSession()
    for key, value in {**_BASE_CONF, **_SESSION_CONF, **(conf or {})}.items():
        if key in _DRIVER_LAUNCH_CONF or key.startswith(("spark.driver.", "spark.executor.")):
            continue
        try:
            session.conf.set(key, value)
        except Exception:  # noqa: BLE001 - a static setting: the application's value holds
            log.debug("setting %s kept at the application's value", key)
    return session


def driver_alive(spark: SparkSession) -> bool:
    """Whether the JVM driving ``spark`` still runs (False once it was killed, e.g. by its
    compute unit's memory limit); True when this process did not start it."""
    gateway = getattr(spark.sparkContext, "_gateway", None)
    process = getattr(gateway, "proc", None)
    return process is None or process.poll() is None


#: How long a job whose call into the JVM failed on its connection waits for the JVM to
#: exit before taking the failure for its own: a JVM out of heap runs its shutdown
#: hooks, seconds after the gateway stopped answering.
DRIVER_EXIT_WAIT_S = 30.0


def driver_lost(spark: SparkSession, error: BaseException,
                wait_s: float = DRIVER_EXIT_WAIT_S) -> bool:
    """Whether ``error`` comes from the JVM driving ``spark`` going away: it is gone, or
    the error is a lost connection to it and the JVM exits within ``wait_s``."""
    if not driver_alive(spark):
        return True
    if not _lost_connection(error):
        return False
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        time.sleep(0.1)
        if not driver_alive(spark):
            return True
    return False


def _lost_connection(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, is a broken connection (the
    py4j gateway's, or a Python worker's to the JVM)."""
    from py4j.protocol import Py4JNetworkError

    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, (ConnectionError, Py4JNetworkError)):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
