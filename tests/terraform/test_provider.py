"""The Terraform provider end to end: the terraform binary, this checkout's provider
(through dev_overrides) and a real ``spate serve`` running real (cheap) pipelines.

One working directory goes through a pipeline's life in order: apply, a plan with
no changes, an SQL change (a new version the job restarts on), drift made in the
API, import by name, ``stopped = true``, bad SQL, destroy. A connection profile's
write-only secret is sent to Spate but never written to the plan or the state.
"""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from tests.api.serving import ServedTenant
from tests.terraform.conftest import Terraform

pytestmark = [pytest.mark.e2e, pytest.mark.xdist_group("serve")]

SECRET = f"secret-dir-{secrets.token_hex(8)}/out.jsonl"
ROTATED = f"secret-dir-{secrets.token_hex(8)}/rotated.jsonl"


def config(sql_rate: str, *, stopped: str = "null", description: str = "ticks to nowhere",
           query: str | None = None, secret: str = SECRET, secrets_version: str = "1",
           pipeline_extra: str = "") -> str:
    query = query or f"""
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '{sql_rate}');
CREATE TABLE nowhere WITH (connector = 'blackhole');
INSERT INTO nowhere SELECT counter FROM ticks;
"""
    return f"""
terraform {{
  required_providers {{
    spate = {{ source = "spate/spate" }}
  }}
}}

provider "spate" {{}}

variable "out_path" {{
  type      = string
  sensitive = true
  default   = "{secret}"
}}

resource "spate_connection_profile" "files" {{
  name            = "files"
  connector       = "single_file"
  config          = {{ format = "json" }}
  secrets         = {{ path = var.out_path }}
  secrets_version = "{secrets_version}"
}}

resource "spate_connection_table" "out" {{
  name      = "out_rows"
  connector = "single_file"
  profile   = spate_connection_profile.files.name
  config    = {{ type = "sink" }}
  fields    = [{{ name = "counter", type = "BIGINT", nullable = false }}]
}}

resource "spate_api_key" "ci" {{
  name = "ci"
  role = "viewer"
}}

resource "spate_pipeline" "ticks" {{
  name        = "ticks"
  description = "{description}"
  stopped     = {stopped}
{pipeline_extra}
  sql         = <<-SQL
{query}
SQL
}}

data "spate_connectors" "all" {{}}

data "spate_pipelines" "mine" {{
  depends_on = [spate_pipeline.ticks]
}}

output "connectors" {{
  value = data.spate_connectors.all.names
}}

output "pipelines" {{
  value = data.spate_pipelines.mine.names
}}

output "state" {{
  value = spate_pipeline.ticks.state
}}
"""


def _get(serve: ServedTenant, path: str) -> Any:
    response = serve.http.get(path)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_pipeline_through_its_life_with_terraform(serve: ServedTenant,
                                                    terraform: Terraform) -> None:
    terraform.write(config("50"))
    applied = terraform.run("apply", "-auto-approve")
    assert "spate_pipeline.ticks will be created" in applied.stdout
    assert "Apply complete! Resources: 4 added" in applied.stdout

    pipeline = _get(serve, "/pipelines/ticks")
    assert pipeline["version"] == 1 and pipeline["desired_state"] == "running"
    assert pipeline["job"]["state"] == "running"
    first_job = pipeline["job"]["id"]
    assert 'state = "running"' in applied.stdout
    assert '"impulse"' in applied.stdout and '"ticks"' in applied.stdout
    # the secret reached Spate (encrypted there: only its name is shown)
    assert _get(serve, "/connection-profiles/files")["secrets"] == {"path": "********"}
    assert _get(serve, "/connection-tables/out_rows")["role"] == "sink"
    key = _get(serve, "/api-keys")["items"]
    assert any(k["name"] == "ci" and k["role"] == "viewer" for k in key)

    # nothing to do the second time
    terraform.run("plan", "-detailed-exitcode")

    # an SQL change is shown in the plan and becomes version 2, restarted with state
    terraform.write(config("60"))
    planned = terraform.run("plan", "-detailed-exitcode", ok=(2,))
    assert "~ sql" in planned.stdout
    assert "event_rate = '50'" in planned.stdout and "event_rate = '60'" in planned.stdout
    assert "1 to change" in planned.stdout
    terraform.run("apply", "-auto-approve")
    pipeline = _get(serve, "/pipelines/ticks")
    assert pipeline["version"] == 2 and "event_rate = '60'" in pipeline["sql"]
    assert pipeline["job"]["id"] != first_job and pipeline["job"]["state"] == "running"

    # drift: someone changes the pipeline in the console; the plan puts it back
    response = serve.http.patch("/pipelines/ticks", json={"description": "edited by hand"})
    assert response.status_code == 200, response.text
    drifted = terraform.run("plan", "-detailed-exitcode", ok=(2,))
    assert '"edited by hand" -> "ticks to nowhere"' in drifted.stdout
    assert "1 to change" in drifted.stdout and "~ sql" not in drifted.stdout
    terraform.run("apply", "-auto-approve")
    assert _get(serve, "/pipelines/ticks")["description"] == "ticks to nowhere"

    # import by name into a fresh state entry: the plan agrees with the pipeline
    terraform.run("state", "rm", "spate_pipeline.ticks")
    imported = terraform.run("import", "spate_pipeline.ticks", "ticks")
    assert "Import successful" in imported.stdout
    terraform.run("plan", "-detailed-exitcode")

    # stopped = true stops it after a checkpoint
    terraform.write(config("60", stopped="true"))
    terraform.run("apply", "-auto-approve")
    pipeline = _get(serve, "/pipelines/ticks")
    assert pipeline["desired_state"] == "stopped"
    assert pipeline["job"]["state"] in ("stopped", "finished")
    terraform.run("plan", "-detailed-exitcode")

    # an autoscale range is set, kept, and turned off when the configuration drops it
    autoscaled = '  autoscale_min = 1\n  autoscale_max = 3'
    terraform.write(config("60", stopped="true", pipeline_extra=autoscaled))
    planned = terraform.run("plan", "-detailed-exitcode", ok=(2,))
    assert "+ autoscale_max" in planned.stdout and "1 to change" in planned.stdout
    terraform.run("apply", "-auto-approve")
    assert _get(serve, "/pipelines/ticks")["autoscale"]["max"] == 3
    terraform.run("plan", "-detailed-exitcode")
    terraform.write(config("60", stopped="true"))
    terraform.run("apply", "-auto-approve")
    assert _get(serve, "/pipelines/ticks")["autoscale"] is None

    # a new secret is sent when secrets_version changes
    before = _get(serve, "/connection-profiles/files")["updated_at"]
    terraform.write(config("60", stopped="true", secret=ROTATED, secrets_version="2"))
    rotated = terraform.run("plan", "-detailed-exitcode", ok=(2,))
    assert '~ secrets_version = "1" -> "2"' in rotated.stdout
    terraform.run("apply", "-auto-approve")
    assert _get(serve, "/connection-profiles/files")["updated_at"] != before

    # bad SQL: a diagnostic naming line and column, never a traceback
    terraform.write(config("60", stopped="true", query="SELEC 1 FROM nowhere;",
                           secret=ROTATED, secrets_version="2"))
    failed = terraform.run("plan", ok=(1,))
    assert "Invalid SQL at line" in failed.stderr and "column" in failed.stderr
    assert "Traceback" not in failed.stdout + failed.stderr

    # the secret is in no plan, no apply output and not in the state
    state = terraform.state_text()
    assert '"secrets": null' in state and "secret-dir-" not in state
    for output in terraform.outputs:
        assert SECRET not in output and ROTATED not in output and "secret-dir-" not in output

    # destroy while it runs: a forced stop, done only once its query is gone
    terraform.write(config("60", secret=ROTATED, secrets_version="2"))
    terraform.run("apply", "-auto-approve")
    running = _get(serve, "/pipelines/ticks")["job"]
    assert running["state"] == "running" and running["id"] in serve.running_queries()
    destroyed = terraform.run("destroy", "-auto-approve")
    assert "Destroy complete! Resources: 4 destroyed" in destroyed.stdout
    assert running["id"] not in serve.running_queries(), "its query outlived the destroy"
    assert serve.http.get("/pipelines/ticks").status_code == 404
    assert serve.http.get("/connection-profiles/files").status_code == 404
    assert not any(k["name"] == "ci" for k in _get(serve, "/api-keys")["items"])



HEADER = """
terraform {
  required_providers {
    spate = { source = "spate/spate" }
  }
}

provider "spate" {}
"""
BAD_OPTION = HEADER + """
resource "spate_connection_profile" "bad" {
  name      = "bad"
  connector = "single_file"
  config    = { format = "json", no_such_option = "x" }
}
"""
BAD_SQL = HEADER + """
resource "spate_pipeline" "bad" {
  name = "bad"
  sql  = <<-SQL
    CREATE TABLE nowhere WITH (connector = 'blackhole');
    INSERT INTO nowhere SELECT no_such_column FROM;
  SQL
}
"""
BAD_ROLE = HEADER + """
resource "spate_api_key" "bad" {
  name = "bad"
  role = "overlord"
}
"""


def test_api_errors_are_diagnostics_not_tracebacks(terraform: Terraform,
                                                  tmp_path: Any) -> None:
    bad = Terraform(tmp_path, terraform.env)
    bad.write(BAD_OPTION)
    failed = bad.run("apply", "-auto-approve", ok=(1,))
    # the API's message naming the option, on the resource that sent it
    assert "Spate API error" in failed.stderr and "no_such_option" in failed.stderr
    assert "with spate_connection_profile.bad" in failed.stderr
    assert "Traceback" not in failed.stdout + failed.stderr

    bad.write(BAD_ROLE)
    failed = bad.run("plan", ok=(1,))
    assert "Unknown role 'overlord'" in failed.stderr and "admin, developer" in failed.stderr
    assert 'role = "overlord"' in failed.stderr  # Terraform points at the attribute

    # a new pipeline's SQL is checked by the plan, before anything is created
    bad.write(BAD_SQL)
    failed = bad.run("plan", ok=(1,))
    assert "Invalid SQL at line 2, column" in failed.stderr
    assert "with spate_pipeline.bad" in failed.stderr
    assert "Traceback" not in failed.stdout + failed.stderr

    bad.write(BAD_OPTION)
    unreachable = Terraform(tmp_path, {**terraform.env, "SPATE_API_URL": "http://127.0.0.1:9"})
    failed = unreachable.run("apply", "-auto-approve", ok=(1,))
    assert "cannot reach the Spate server at http://127.0.0.1:9" in failed.stderr
    assert "Traceback" not in failed.stdout + failed.stderr
