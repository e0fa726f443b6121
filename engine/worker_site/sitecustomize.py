"""Run by Python at the start of every Python process Spark starts for Spate.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` (and py4j's zip) first on
the ``PYTHONPATH`` of the Python processes it starts: task workers, their
daemon, the processes that look up and plan Python data sources, a streaming
source's runner.  Python caches no bytecode for modules imported from a zip,
so each of those processes compiled PySpark's sources again — about a second
of CPU each, several of them on the way to a job's first epoch.  The PySpark
the driver imports (same version, installed with Spate) has its compiled
files next to its sources.  This module moves Spark's zips to the end of
``sys.path`` so that one is found first; with no installed PySpark the zips
still serve.

This folder is on those processes' ``PYTHONPATH`` through
``spark.executorEnv.PYTHONPATH`` (:mod:`spate.engine.spark`), and on no other
process's.  A ``sitecustomize`` of the interpreter's own, if there is one,
runs after this one.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def zips_last(path: list[str]) -> list[str]:
    """``path`` with Spark's bundled zips (``…/python/lib/*.zip``) moved to the end."""
    bundled = [entry for entry in path
               if entry.endswith(".zip") and f"{os.sep}python{os.sep}lib{os.sep}" in entry]
    return [entry for entry in path if entry not in bundled] + bundled


def _run_the_interpreters_own() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    others = [entry for entry in sys.path if os.path.abspath(entry or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", others)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


sys.path[:] = zips_last(sys.path)
_run_the_interpreters_own()
