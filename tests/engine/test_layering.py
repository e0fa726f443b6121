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


@pytest.mark.parametrize("step", ["window", "updating", "join", "lookup", "step_kinds"])
def test_the_step_base_imports_no_step(step: str) -> None:
    loaded = _loaded_after("spate.engine.runtime.steps")
    assert f"spate.engine.runtime.{step}" not in loaded


@pytest.mark.parametrize("module", ["spate.engine.runtime.window",
                                    "spate.engine.runtime.updating", "spate.engine.runtime.join",
                                    "spate.engine.planner.plan"])
def test_what_sparks_workers_unpickle_loads_no_planner_and_no_client_library(module: str) -> None:
    # A Python worker imports these to run an operator's step: sqlglot (the planner)
    # or a broker's client library would add seconds to every worker's first task.
    loaded = _loaded_after(module)
    heavy = ("sqlglot", "confluent_kafka", "boto3", "redis", "pika", "paho", "nats",
             "spate.engine.planner.pipeline", "spate.engine.planner.catalog")
    assert not {m for m in loaded if m.startswith(heavy)}


@pytest.mark.parametrize("module", ["kafka.source", "kinesis.source", "redis.source",
                                    "filesystem.source"])
def test_a_sources_reader_module_loads_neither_pandas_nor_the_planner(module: str) -> None:
    # Every streaming query starts a Python process that imports its source's reader
    # module to plan batches (offsets only): pandas alone would add ~1 s to each start.
    loaded = _loaded_after(f"spate.engine.connectors.{module}")
    assert not {m for m in loaded if m.startswith(("pandas", "sqlglot"))}
