"""The daemon that forks Spark's Python workers, importing PySpark from compiled files.

Spark starts its Python worker daemons (``spark.python.daemon.module``) with
``$SPARK_HOME/python/lib/pyspark.zip`` first on ``PYTHONPATH``.  Python cannot
cache bytecode for a module imported from a zip, so every daemon compiles
PySpark's sources again: about a second of CPU per daemon, and a job starts
several (data-source lookups and planning, the streaming source, tasks).  An
installed PySpark — the one the driver imports, of the same version — has its
compiled files next to its sources.  This module moves the zips to the end of
``sys.path`` before PySpark is first imported, then runs PySpark's own daemon
unchanged (it reads the worker module from ``sys.argv`` as usual).
"""

from __future__ import annotations

import sys


def _zips_last(path: list[str]) -> list[str]:
    """``path`` with Spark's bundled zips (``…/python/lib/*.zip``) moved to the end."""
    bundled = [entry for entry in path if entry.endswith(".zip") and "/python/lib/" in entry]
    return [entry for entry in path if entry not in bundled] + bundled


if __name__ == "__main__":
    sys.path[:] = _zips_last(sys.path)
    from pyspark.daemon import manager

    manager()
