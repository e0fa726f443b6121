"""What Spate's executor-side code does in Spark's Python worker processes.

Spark reuses a Python worker for task after task (``spark.python.worker.reuse``)
and runs a full ``gc.collect()`` after each one.  A full collection walks every
object the worker holds — pyspark's, pyarrow's, numpy's and Spate's modules and all
they keep — and costs some 60 ms of CPU per task (measured on a task that reads
ten rows: more than the task itself).  For a small pipeline, whose epochs run a
task or two each, that was most of the Python workers' CPU.

:func:`settle` runs at the start of each of Spate's tasks (source reads, state
tasks, lookups).  The first time in a process, and again whenever modules were
imported since the last time, it collects once and moves every object alive to
the collector's permanent generation (``gc.freeze``): the collections after each
task then walk only what tasks create.  Freezing happens once per set of loaded
modules, so what a task holds at that moment is kept for good at most that once;
nothing accumulates task by task.
"""

from __future__ import annotations

import gc
import sys

#: How many modules were loaded when this process last froze its objects.
_frozen_with_modules = 0


def settle() -> None:
    """Freeze the worker's long-lived objects if modules were loaded since last time."""
    global _frozen_with_modules
    loaded = len(sys.modules)
    if loaded == _frozen_with_modules:
        return
    gc.collect()
    gc.freeze()
    _frozen_with_modules = loaded
