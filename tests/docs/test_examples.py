"""Every pipeline in examples/ plans: the files the documentation names are real pipelines."""

from __future__ import annotations

from pathlib import Path

import pytest

from spate.engine.planner import plan_pipeline

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.sql"))


def test_the_examples_folder_holds_the_documented_examples() -> None:
    names = {path.name for path in EXAMPLES}
    assert {"quickstart.sql", "hot_auctions.sql", "clicks.sql"} <= names


@pytest.mark.parametrize("example", EXAMPLES, ids=[path.stem for path in EXAMPLES])
def test_the_example_plans_as_a_pipeline_that_runs_on_its_own(example: Path) -> None:
    # No environment variables and no previews: as `spate run` or a server's job plans it.
    plan = plan_pipeline(example.read_text(), {}, previews=False)
    assert plan.queries, f"{example.name} has no query"
    for query in plan.queries:
        assert query.sink in plan.tables, f"{example.name}: query {query.index} writes nowhere"
    assert plan.sources, f"{example.name} reads no source"
