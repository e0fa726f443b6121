"""Golden pipelines: ``golden/<case>/pipeline.sql`` runs over the case's input
files, and every ``golden/<case>/expected/<name>`` must equal the sink file
``<name>`` it wrote (as a multiset of lines: windows closing in one epoch may
be written in any order).  ``golden/<case>/counters.json``, when present, holds
counters the run must end with.  Each case runs at parallelism 1 and 3: the
result must not depend on how key groups are split among tasks.

A case whose SQL has an ``-- unbounded`` line reads a source that never ends;
it is stopped once its expected output is written.

Expected files are computed independently of Spate: by DuckDB batch SQL over
the input for cases where no row is late, by hand (the reasoning is in each
case's header comment) where lateness depends on epoch boundaries.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.engine.harness import read_lines, run_pipeline

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(p for p in GOLDEN.iterdir() if (p / "pipeline.sql").exists())

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@pytest.mark.parametrize("parallelism", [1, 3])
def test_golden(case: Path, parallelism: int, spark, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("GOLDEN_DIR", str(case))
    monkeypatch.setenv("OUT_DIR", str(tmp_path))
    sql = (case / "pipeline.sql").read_text()
    expected_files = sorted((case / "expected").iterdir())
    assert expected_files, f"{case.name} has no expected output"

    def complete() -> bool:
        return all(len(read_lines(tmp_path / f.name)) >= len(read_lines(f))
                   for f in expected_files)

    unbounded = any(line.startswith("-- unbounded") for line in sql.splitlines())
    counters = run_pipeline(spark, sql, tmp_path, parallelism=parallelism,
                            stop_when=complete if unbounded else None)
    for expected in expected_files:
        assert read_lines(tmp_path / expected.name) == read_lines(expected), expected.name
    counters_file = case / "counters.json"
    if counters_file.exists():
        wanted = json.loads(counters_file.read_text())
        assert {k: counters.get(k, 0) for k in wanted} == wanted
