"""Builds the SparkSession a pipeline runs in, with Spate's settings."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from spate.engine.connectors import register_data_sources

log = logging.getLogger(__name__)

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
    "spark.sql.ansi.enabled": "false",
}


#: Quiet JVM logging: a failed pipeline is reported once, by Spate.
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


#: Settings read when the driver's JVM starts: only for a session that starts its own JVM.
_DRIVER_LAUNCH_CONF = {
    "spark.driver.memory": "2g",
    "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}",
}


def build_spark(master: str | None = "local[2]", app_name: str = "spate",
                conf: Mapping[str, str] | None = None) -> SparkSession:
    """Return a SparkSession for ``master`` with Spate's data sources registered.

    ``master`` None means the process was launched by ``spark-submit``: its
    master, application name and driver JVM settings stand, and Spate's
    session settings (then ``conf``) are applied on top.
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
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    # PySpark logs each failed SQL call as a JSON line with the whole Java stack; the
    # pipeline reports the failure once, in one line of its own.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    register_data_sources(spark)
    log.info("spark session ready", extra={"master": spark.sparkContext.master})
    return spark
