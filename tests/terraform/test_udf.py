"""The ``spate_udf`` resource end to end: the terraform binary, this checkout's provider
and a real ``spate serve``. A UDF and a pipeline calling it are applied (the pipeline's
job runs the UDF), a source change is an in-place new version, an unusable file is a
plan error at its line and column, import by name, and destroy."""

from __future__ import annotations

from typing import Any

import pytest

from tests.api.serving import ServedTenant, wait_for
from tests.terraform.conftest import Terraform

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("serve")]

TWICE = """\
from spate.engine.udf import udf


@udf
def twice(n: int) -> int:
    return 2 * n
"""


def config(source: str = TWICE) -> str:
    return f"""
terraform {{
  required_providers {{
    spate = {{ source = "spate/spate" }}
  }}
}}

provider "spate" {{}}

resource "spate_udf" "twice" {{
  name   = "twice"
  source = <<-PY
{source}PY
}}

resource "spate_pipeline" "doubled" {{
  name       = "doubled"
  depends_on = [spate_udf.twice]
  sql        = <<-SQL
    CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '20');
    CREATE TABLE nowhere WITH (connector = 'blackhole');
    INSERT INTO nowhere SELECT twice(counter) AS doubled FROM ticks;
  SQL
}}

output "signature" {{
  value = spate_udf.twice.signature
}}
"""


def _get(serve: ServedTenant, path: str) -> Any:
    response = serve.http.get(path)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_udf_and_a_pipeline_calling_it_through_their_life(serve: ServedTenant,
                                                            terraform: Terraform,
                                                            tmp_path: Any) -> None:
    udf_user = Terraform(tmp_path, terraform.env)
    udf_user.write(config())
    applied = udf_user.run("apply", "-auto-approve")
    assert "Apply complete! Resources: 2 added" in applied.stdout
    # planned before the UDF existed: a warning, and the apply created the UDF first
    assert "Unknown function at line 3, column 28" in applied.stdout + applied.stderr
    assert 'signature = "twice(n: int) -> int"' in applied.stdout
    udf = _get(serve, "/udfs/twice")
    assert (udf["version"], udf["source"]) == (1, TWICE)
    # the job loads the UDF in its compute unit and commits epochs that called it
    epoch = wait_for("an epoch of the pipeline calling the UDF", lambda: (
        _get(serve, "/pipelines/doubled")["job"] or {}).get("last_epoch"), timeout_s=180)
    assert epoch is not None
    assert _get(serve, "/pipelines/doubled")["job"]["state"] == "running"

    udf_user.run("plan", "-detailed-exitcode")  # nothing to do

    changed = TWICE.replace("2 * n", "n + n")
    udf_user.write(config(changed))
    planned = udf_user.run("plan", "-detailed-exitcode", ok=(2,))
    assert '~ resource "spate_udf" "twice"' in planned.stdout
    assert "1 to change, 0 to destroy" in planned.stdout
    udf_user.run("apply", "-auto-approve")
    udf = _get(serve, "/udfs/twice")
    assert (udf["version"], udf["source"]) == (2, changed)

    unusable = TWICE.replace(" -> int", "")
    udf_user.write(config(unusable))
    failed = udf_user.run("plan", ok=(1,))
    assert "Invalid UDF at line 5, column 5" in failed.stderr
    assert "has no return type hint" in failed.stderr and "with spate_udf.twice" in failed.stderr
    assert "Traceback" not in failed.stdout + failed.stderr

    udf_user.write(config(changed))
    udf_user.run("state", "rm", "spate_udf.twice")
    imported = udf_user.run("import", "spate_udf.twice", "twice")
    assert "Import successful" in imported.stdout
    udf_user.run("plan", "-detailed-exitcode")  # the imported UDF is as configured

    destroyed = udf_user.run("destroy", "-auto-approve")
    assert "Destroy complete! Resources: 2 destroyed" in destroyed.stdout
    assert serve.http.get("/udfs/twice").status_code == 404
    assert serve.http.get("/pipelines/doubled").status_code == 404
