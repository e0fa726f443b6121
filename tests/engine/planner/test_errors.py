"""Golden planning errors: each ``errors/<case>.sql`` starts with
``-- expect: LINE:COL: message`` (or just a message) and must fail planning
with that message at that position.

A ``-- plan: pipeline`` line plans it as a pipeline that runs on its own (no
bare SELECT); ``-- plan: inputs`` also checks that sources' inputs exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spate.engine.planner import PlanningError, plan_pipeline

CASES = sorted((Path(__file__).parent / "errors").glob("*.sql"))
_HEADER = re.compile(r"--\s*expect:\s*(?:(\d+):(\d+):\s*)?(.+)")


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_planning_error(case: Path) -> None:
    sql = case.read_text()
    match = _HEADER.match(sql.splitlines()[0])
    assert match, f"{case.name} needs an '-- expect:' header"
    line, column, message = match.groups()
    modes = {line.split(":", 1)[1].strip() for line in sql.splitlines()
             if line.startswith("-- plan:")}
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(sql, previews="pipeline" not in modes, check_inputs="inputs" in modes)
    error = caught.value
    assert message.strip() in error.message
    if line is not None:
        assert (error.line, error.column) == (int(line), int(column)), str(error)
