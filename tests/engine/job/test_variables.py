"""A job fills ``{{ NAME }}`` option references from its spec's variables, never from the
environment; ``spate run`` (variables None) still reads the environment."""

from __future__ import annotations

import pytest

from spate.engine.job.spec import JobSpec
from spate.engine.planner import PlanningError, plan_pipeline

SQL = """CREATE TABLE impulse WITH (connector = 'impulse', event_rate = '{{ RATE }}');
CREATE TABLE out WITH (connector = 'blackhole');
INSERT INTO out SELECT counter FROM impulse;"""


def _rate(variables: dict[str, str] | None) -> str:
    return plan_pipeline(SQL, variables).tables["impulse"].config.options["event_rate"]


def test_explicit_variables_fill_references_and_the_environment_is_ignored(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RATE", "7")
    assert _rate({"RATE": "3"}) == "3"
    with pytest.raises(PlanningError) as raised:
        _rate({})
    assert raised.value.message == "variable RATE used in an option is not set"
    assert (raised.value.line, raised.value.column) == (1, 64)  # the value


def test_without_variables_the_environment_fills_references(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RATE", "7")
    assert _rate(None) == "7"


def test_a_spec_round_trips_its_variables() -> None:
    spec = JobSpec(job_id="j", tenant_id="t", pipeline_id="p", sql=SQL, state_url="sqlite:///s",
                   checkpoint_dir="c", channel_url="file:///x", variables={"RATE": "3"})
    assert JobSpec.from_json(spec.to_json()) == spec
    assert JobSpec.from_json(spec.to_json().replace(', "variables": {"RATE": "3"}', "")
                             ).variables == {}
