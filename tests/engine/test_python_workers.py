"""``settle`` freezes a Python worker's long-lived objects once per set of loaded
modules, so Spark's ``gc.collect()`` after each task walks only what tasks made.
Each case runs in a fresh interpreter: freezing is for the life of a process."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> list[str]:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                            capture_output=True, text=True, check=True)
    return result.stdout.split()


def test_the_first_task_freezes_what_the_worker_has_loaded() -> None:
    frozen_before, frozen_after = _run("""
        import gc
        from spate.engine.python_workers import settle
        before = gc.get_freeze_count()
        settle()
        print(before, gc.get_freeze_count())
    """)
    assert int(frozen_before) == 0
    assert int(frozen_after) > 1000  # the modules' functions, classes and constants


def test_later_tasks_freeze_nothing_more_unless_modules_were_imported() -> None:
    after_first, after_second, after_import = _run("""
        import gc
        from spate.engine.python_workers import settle
        settle()
        first = gc.get_freeze_count()
        task_garbage = [[i] for i in range(1000)]  # what a task holds, never frozen
        settle()
        second = gc.get_freeze_count()
        import xml.dom.minidom  # a task that needs a module not loaded yet
        settle()
        print(first, second, gc.get_freeze_count())
    """)
    assert int(after_first) == int(after_second)
    assert int(after_import) > int(after_second)
