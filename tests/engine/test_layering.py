"""The engine's import rules, checked in a fresh interpreter: the job protocol
is plain data (no planner, no Spark), and the runtime's step base module
imports none of the steps built on it (no import circle)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _loaded_after(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    return set(result.stdout.split())


def test_the_job_protocol_imports_neither_the_planner_nor_spark() -> None:
    loaded = _loaded_after("spate.engine.job.spec")
    assert not {m for m in loaded if m.startswith(("spate.engine.planner", "pyspark"))}


@pytest.mark.parametrize("step", ["window_step", "updating", "join", "lookup", "step_kinds"])
def test_the_step_base_imports_no_step(step: str) -> None:
    loaded = _loaded_after("spate.engine.runtime.steps")
    assert f"spate.engine.runtime.{step}" not in loaded
