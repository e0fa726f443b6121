"""Golden pipelines: ``golden/<case>/pipeline.sql`` runs over the case's input
files, and every ``golden/<case>/expected/<name>`` must equal the sink file
``<name>`` it wrote (as a multiset of lines: epoch boundaries may reorder
windows that close in the same epoch).  Each case runs at parallelism 1 and 3:
the result must not depend on how key groups are split among tasks."""

from __future__ import annotations

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
    run_pipeline(spark, (case / "pipeline.sql").read_text(), tmp_path, parallelism=parallelism)
    expected_files = sorted((case / "expected").iterdir())
    assert expected_files, f"{case.name} has no expected output"
    for expected in expected_files:
        assert read_lines(tmp_path / expected.name) == read_lines(expected), expected.name
