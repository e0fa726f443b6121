"""The Terraform provider plans a pipeline's SQL change by its state: an in-place update
(a new version, restarted with state) when the API says the new SQL can keep the
running pipeline's state, a replacement (deleted and created without state) when it
cannot. The terraform binary, this checkout's provider and a real ``spate serve``."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.serving import ServedTenant
from tests.terraform.conftest import Terraform

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("serve")]

SELECT = "SELECT w.start AS second, k, n"


def config(width_s: int = 5, select: str = SELECT) -> str:
    return f"""
terraform {{
  required_providers {{
    spate = {{ source = "spate/spate" }}
  }}
}}

provider "spate" {{}}

resource "spate_pipeline" "windows" {{
  name = "windows"
  sql  = <<-SQL
    CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '20');
    CREATE TABLE nowhere WITH (connector = 'blackhole');
    INSERT INTO nowhere
    {select}
    FROM (SELECT TUMBLE(INTERVAL '{width_s}' SECOND) AS w, subtask_index AS k, count(*) AS n
          FROM ticks GROUP BY 1, 2);
  SQL
}}
"""


def _get(serve: ServedTenant, path: str) -> Any:
    response = serve.http.get(path)
    assert response.status_code == 200, response.text
    return response.json()


def test_sql_that_keeps_the_state_updates_and_sql_that_cannot_replaces(
        serve: ServedTenant, terraform: Terraform) -> None:
    terraform.write(config())
    terraform.run("apply", "-auto-approve")
    first = _get(serve, "/pipelines/windows")
    assert first["job"]["state"] == "running"

    # an added output column keeps the window's state: an update, restarted with state
    terraform.write(config(select=SELECT + ", n * 2 AS twice"))
    planned = terraform.run("plan", "-detailed-exitcode", ok=(2,))
    assert "~ resource \"spate_pipeline\" \"windows\"" in planned.stdout
    assert "updated in-place" in planned.stdout and "1 to change, 0 to destroy" in planned.stdout
    assert "forces replacement" not in planned.stdout
    terraform.run("apply", "-auto-approve")
    updated = _get(serve, "/pipelines/windows")
    assert updated["id"] == first["id"] and updated["version"] == 2
    assert updated["job"]["id"] != first["job"]["id"] and updated["job"]["state"] == "running"

    # a wider window cannot read the state: the plan replaces the pipeline, and says why
    terraform.write(config(width_s=10, select=SELECT + ", n * 2 AS twice"))
    planned = terraform.run("plan", "-detailed-exitcode", ok=(2,))
    assert "must be replaced" in planned.stdout and "# forces replacement" in planned.stdout
    assert "1 to add, 0 to change, 1 to destroy" in planned.stdout
    warning = planned.stdout + planned.stderr
    assert "Pipeline 'windows' is replaced, not updated" in warning
    assert "its window changed: TUMBLE 5 s → TUMBLE 10 s" in warning
    terraform.run("apply", "-auto-approve")
    replaced = _get(serve, "/pipelines/windows")
    assert replaced["id"] != first["id"] and replaced["version"] == 1
    assert "INTERVAL '10' SECOND" in replaced["sql"]
    assert replaced["job"]["state"] == "running"
    terraform.run("plan", "-detailed-exitcode")

    terraform.run("destroy", "-auto-approve")
    assert serve.http.get("/pipelines/windows").status_code == 404
