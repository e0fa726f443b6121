"""``spate pipelines …``: create, validate, list, control and preview a tenant's pipelines.

The lifecycle commands wait for the job they asked for (``--no-wait`` returns at once)
and print its state; ``preview`` streams a query's first rows."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from spate.api.cli.common import (
    EXIT_INCOMPATIBLE_STATE,
    EXIT_INTERRUPTED,
    EXIT_REFUSED,
    F,
    connect,
    connection_options,
    fail,
    json_option,
    show_table,
    sql_file_argument,
    with_client,
)
from spate.api.client.sdk import ClientError, SpateClient
from spate.scheduler.store import RUNNING, TERMINAL_STATES

STOP_MODES = ("checkpoint", "graceful", "immediate", "force")
#: How long the lifecycle commands wait for the job by default; Spark can take a while.
DEFAULT_WAIT_S = 300
#: Job states a lifecycle command stops waiting at.
SETTLED_STATES = frozenset({RUNNING, *TERMINAL_STATES})
ENDED_STATES = frozenset(TERMINAL_STATES)

_PIPELINE_HEADER = ("NAME", "DESIRED", "JOB STATE", "PARALLELISM", "LAST EPOCH", "VERSION",
                    "CLUSTER")


def _pipeline_row(pipeline: dict[str, Any]) -> tuple[Any, ...]:
    job = pipeline.get("job") or {}
    return (pipeline["name"], pipeline.get("desired_state"), job.get("state"),
            pipeline.get("parallelism"), job.get("last_epoch"), pipeline.get("version"),
            job.get("cluster") or pipeline.get("cluster"))


def _show_pipeline(pipeline: dict[str, Any], as_json: bool) -> None:
    show_table(pipeline, as_json, [_pipeline_row(pipeline)], _PIPELINE_HEADER)
    job = pipeline.get("job") or {}
    if not as_json and job.get("failure_message"):
        click.echo(f"failure: {job['failure_message']}")
    autoscale = pipeline.get("autoscale")
    if not as_json and autoscale:
        last = autoscale.get("last_decision")
        click.echo(f"autoscale: {autoscale['min']}–{autoscale['max']}"
                   + (f" (last: {last}, at {autoscale['last_decision_at']})" if last else ""))


class AutoscaleRange(click.ParamType["dict[str, int] | None"]):
    """``MIN:MAX`` (a parallelism range for the autoscaler), or ``off``."""

    name = "MIN:MAX|off"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> dict[str, int] | None:
        if isinstance(value, dict) or value is None:
            return value
        text = str(value).strip().lower()
        if text == "off":
            return None
        low, colon, high = text.partition(":")
        if not colon or not low.isdigit() or not high.isdigit():
            self.fail(f"'{value}' is not MIN:MAX (e.g. 1:4) or 'off'", param, ctx)
        return {"min": int(low), "max": int(high)}


# -- waiting for a job -------------------------------------------------------------

JobCheck = Callable[[dict[str, Any] | None], bool]


def wait_options(command: F) -> F:
    command = click.option("--timeout", "timeout_s", type=click.IntRange(1),
                           default=DEFAULT_WAIT_S, show_default=True,
                           help="Seconds to wait for the job.")(command)
    command = click.option("--wait/--no-wait", default=True, show_default=True,
                           help="Wait for the job to get there, then print its state.")(
        command)
    return command


def _settled_job(stale_job_id: str | None = None, parallelism: int | None = None,
                 cluster: str | None = None) -> JobCheck:
    """A job that is running or has ended, other than ``stale_job_id``, at ``parallelism``,
    on ``cluster``."""

    def check(job: dict[str, Any] | None) -> bool:
        return (job is not None and job["state"] in SETTLED_STATES
                and job["id"] != stale_job_id
                and (parallelism is None or job["parallelism"] == parallelism)
                and (cluster is None or job.get("cluster") == cluster))

    return check


def _ended_job(job: dict[str, Any] | None) -> bool:
    return job is None or job["state"] in ENDED_STATES


def _finish(client: SpateClient, answer: dict[str, Any], job_check: JobCheck | None,
            wait: bool, timeout_s: int, as_json: bool) -> None:
    """Print the pipeline once its job passes ``job_check`` (None: nothing to wait for)."""
    if not wait or job_check is None:
        _show_pipeline(answer, as_json)
        return
    name = answer["name"]
    seen: list[tuple[str, str] | None] = []

    def report(pipeline: dict[str, Any]) -> None:
        """Each change of the job (or its state) after the first look, on stderr."""
        job = pipeline.get("job")
        now = (job["id"], job["state"]) if job is not None else None
        if seen and now is not None and now != seen[-1]:
            click.echo(f"{name}: job {now[0]} {now[1]}", err=True)
        seen.append(now)

    pipeline, settled = client.poll(f"/pipelines/{name}", lambda p: job_check(p.get("job")),
                                    timeout_s, on_each=report)
    job = pipeline.get("job")
    if not settled:
        state = f"its job {job['id']} is {job['state']}" if job else "it has no job yet"
        raise ClientError(f"gave up waiting after {timeout_s} s: pipeline '{name}' {state}; "
                          f"the server carries on: follow it with 'spate pipelines get {name}'")
    show_table(pipeline, as_json, [_pipeline_row(pipeline)], _PIPELINE_HEADER)
    if job is not None and job["state"] == "failed":
        raise ClientError(f"pipeline '{name}': job {job['id']} failed: "
                          f"{job.get('failure_message') or 'no reason given'}")


# -- pipelines ---------------------------------------------------------------------


@click.group("pipelines")
@connection_options
@click.pass_context
def pipelines(ctx: click.Context, server: str, api_key: str | None) -> None:
    """Create, list and control pipelines on a Spate server."""
    connect(ctx, server, api_key)


@pipelines.command("create")
@click.argument("name")
@sql_file_argument
@click.option("--parallelism", "-p", type=click.IntRange(1, 128), default=1, show_default=True)
@click.option("--checkpoint-interval-ms", type=click.IntRange(1), default=None)
@click.option("--description", default="")
@click.option("--stopped", is_flag=True, help="Create without starting it.")
@click.option("--autoscale", type=AutoscaleRange(), default=None,
              help="Let the autoscaler choose the parallelism within MIN:MAX (it starts at "
                   "MIN unless --parallelism says otherwise).")
@wait_options
@json_option
@with_client
def create_pipeline(client: SpateClient, name: str, sql_file: Path, parallelism: int,
                    checkpoint_interval_ms: int | None, description: str, stopped: bool,
                    autoscale: dict[str, int] | None, wait: bool, timeout_s: int,
                    as_json: bool) -> None:
    """Create pipeline NAME from SQL_FILE and start it (unless --stopped)."""
    body: dict[str, Any] = {"name": name, "sql": sql_file.read_text(),
                            "description": description}
    parameter = click.get_current_context().get_parameter_source("parallelism")
    if autoscale is None or parameter != click.core.ParameterSource.DEFAULT:
        body["parallelism"] = parallelism
    if autoscale is not None:
        body["autoscale"] = autoscale
    if stopped:
        body["stopped"] = True
    if checkpoint_interval_ms is not None:
        body["checkpoint_interval_ms"] = checkpoint_interval_ms
    created = client.post("/pipelines", body)
    _finish(client, created, None if stopped else _settled_job(), wait, timeout_s, as_json)


@pipelines.command("validate")
@sql_file_argument
@click.option("--explain", is_flag=True, help="Print the whole plan.")
@json_option
@with_client
def validate_pipeline(client: SpateClient, sql_file: Path, explain: bool,
                      as_json: bool) -> None:
    """Plan SQL_FILE on the server without storing or running it."""
    answer = client.post("/pipelines/validate", {"sql": sql_file.read_text()})
    if as_json:
        click.echo(json.dumps(answer, indent=2, sort_keys=True))
    if not answer["valid"]:
        fail(ClientError("invalid SQL", code="invalid_sql", details=answer["diagnostics"]),
              sql_file)
    if not as_json:
        click.echo(f"{sql_file}: OK")
        for line in plan_summary(answer["plan"]):
            click.echo(f"  {line}")
        if explain:
            click.echo("\n" + answer["plan"]["explain"])


@pipelines.command("plan-update")
@click.argument("name")
@sql_file_argument
@json_option
@with_client
def plan_update(client: SpateClient, name: str, sql_file: Path, as_json: bool) -> None:
    """Say whether SQL_FILE, as pipeline NAME's next version, could keep its state: each
    stateful operator's fate, and the verdict. Nothing is stored; an incompatible
    verdict exits 3."""
    plan = client.post(f"/pipelines/{name}/plan-update", {"sql": sql_file.read_text()})
    if as_json:
        click.echo(json.dumps(plan, indent=2, sort_keys=True))
    else:
        click.echo(f"{name}: {plan['verdict']}: {plan['message']}")
        for operator in plan["operators"]:
            click.echo(f"  {operator['status']:<8} {operator['operator']}  {operator['label']}")
            for reason in operator["reasons"]:
                click.echo(f"           {reason}")
    if plan["verdict"] != "compatible":
        sys.exit(EXIT_INCOMPATIBLE_STATE)


def plan_summary(plan: dict[str, Any]) -> list[str]:
    """A few lines naming a plan's sources, stateful operators and sinks."""

    def labels(*kinds: str) -> str:
        found = [_node_label(node) for node in plan["nodes"] if node["kind"] in kinds]
        return ", ".join(found) or "none"

    return [f"sources:   {labels('source')}",
            f"operators: {labels('window_aggregate', 'operator')}",
            f"sinks:     {labels('sink')}",
            "bounded: it finishes when its input ends" if plan["bounded"]
            else "unbounded: it runs until it is stopped"]


def _node_label(node: dict[str, Any]) -> str:
    connector = node.get("detail", {}).get("connector")
    label = str(node["label"])
    return f"{label} ({connector})" if connector and connector != label else label


@pipelines.command("list")
@json_option
@with_client
def list_pipelines(client: SpateClient, as_json: bool) -> None:
    """The tenant's pipelines and their jobs' states."""
    items = list(client.items("/pipelines"))
    show_table(items, as_json, [_pipeline_row(p) for p in items], _PIPELINE_HEADER)


@pipelines.command("get")
@click.argument("name")
@json_option
@with_client
def get_pipeline(client: SpateClient, name: str, as_json: bool) -> None:
    """One pipeline, with its current job."""
    _show_pipeline(client.get(f"/pipelines/{name}"), as_json)


@pipelines.command("stop")
@click.argument("name")
@click.option("--mode", type=click.Choice(STOP_MODES), default="checkpoint",
              show_default=True, help="checkpoint: after the epoch in progress commits; "
              "graceful: the same, with a time limit; immediate: abandon the epoch in "
              "progress (it is replayed on restart); force: kill the job.")
@wait_options
@json_option
@with_client
def stop_pipeline(client: SpateClient, name: str, mode: str, wait: bool, timeout_s: int,
                  as_json: bool) -> None:
    """Stop pipeline NAME (and wait until its job has stopped)."""
    answer = client.patch(f"/pipelines/{name}", {"stop": mode})
    _finish(client, answer, _ended_job, wait, timeout_s, as_json)


@pipelines.command("start")
@click.argument("name")
@wait_options
@json_option
@with_client
def start_pipeline(client: SpateClient, name: str, wait: bool, timeout_s: int,
                   as_json: bool) -> None:
    """Run a stopped pipeline NAME again, from its last checkpoint, and wait for its job."""
    answer = client.patch(f"/pipelines/{name}", {"stop": "none"})
    job = answer.get("job")
    # An ended (or ending) job is the previous run: wait for the next one.
    stale = job["id"] if job is not None and job["state"] in {*ENDED_STATES, "stopping"} \
        else None
    _finish(client, answer, _settled_job(stale), wait, timeout_s, as_json)


@pipelines.command("restart")
@click.argument("name")
@click.option("--without-state", is_flag=True,
              help="Drop the pipeline's state and start from the beginning of its input.")
@wait_options
@json_option
@with_client
def restart_pipeline(client: SpateClient, name: str, without_state: bool, wait: bool,
                     timeout_s: int, as_json: bool) -> None:
    """Replace pipeline NAME's job with a new one, and wait for it."""
    answer = client.post(f"/pipelines/{name}/restart", {"with_state": not without_state})
    job = answer.get("job")
    _finish(client, answer, _settled_job(job["id"] if job else None), wait, timeout_s,
            as_json)


@pipelines.command("rescale")
@click.argument("name")
@click.argument("parallelism", type=click.IntRange(1, 128))
@wait_options
@json_option
@with_client
def rescale_pipeline(client: SpateClient, name: str, parallelism: int, wait: bool,
                     timeout_s: int, as_json: bool) -> None:
    """Run pipeline NAME at PARALLELISM (its state moves by key group), and wait for the
    job at that parallelism."""
    answer = client.post(f"/pipelines/{name}/rescale", {"parallelism": parallelism})
    running = answer["desired_state"] == "running"
    if not running and not as_json:
        click.echo(f"{name} is stopped: it runs at parallelism {parallelism} when started "
                   f"('spate pipelines start {name}')", err=True)
    _finish(client, answer, _settled_job(parallelism=parallelism) if running else None,
            wait, timeout_s, as_json)


@pipelines.command("autoscale")
@click.argument("name")
@click.argument("range_", metavar="MIN:MAX|off", type=AutoscaleRange())
@json_option
@with_client
def autoscale_pipeline(client: SpateClient, name: str, range_: dict[str, int] | None,
                       as_json: bool) -> None:
    """Let the autoscaler choose pipeline NAME's parallelism within MIN:MAX, from its
    backlog and busy ratio ('off': the parallelism stays what you set)."""
    _show_pipeline(client.patch(f"/pipelines/{name}", {"autoscale": range_}), as_json)


@pipelines.command("move")
@click.argument("name")
@click.option("--cluster", required=True,
              help="The Spark cluster to run it on (one the server's deployment names).")
@wait_options
@json_option
@with_client
def move_pipeline(client: SpateClient, name: str, cluster: str, wait: bool, timeout_s: int,
                  as_json: bool) -> None:
    """Run pipeline NAME on another Spark cluster, and wait for its job there.

    The running job stops after an epoch commits and a new one resumes from the
    pipeline's state on CLUSTER; a stopped pipeline starts there."""
    answer = client.post(f"/pipelines/{name}/move", {"cluster": cluster})
    job = answer.get("job")
    # A job elsewhere, or one that stopped, gives way to a new job on the cluster.
    stale = job["id"] if job is not None and (
        job.get("cluster") != cluster or job["state"] in {"stopped", "stopping"}) else None
    _finish(client, answer, _settled_job(stale, cluster=cluster), wait, timeout_s, as_json)


@pipelines.command("delete")
@click.argument("name")
@click.option("--force", is_flag=True, help="Kill a running job first.")
@with_client
def delete_pipeline(client: SpateClient, name: str, force: bool) -> None:
    """Delete pipeline NAME and its versions."""
    client.delete(f"/pipelines/{name}", **({"force": "true"} if force else {}))
    click.echo(f"deleted {name}")


@pipelines.command("jobs")
@click.argument("name")
@json_option
@with_client
def list_jobs(client: SpateClient, name: str, as_json: bool) -> None:
    """Pipeline NAME's jobs (runs), oldest first."""
    items = list(client.items(f"/pipelines/{name}/jobs"))
    rows = [(j["id"], j.get("state"), j.get("parallelism"), j.get("cluster"),
             j.get("last_epoch"), j.get("failure_message")) for j in items]
    show_table(items, as_json, rows, ("JOB", "STATE", "PARALLELISM", "CLUSTER", "LAST EPOCH",
                                 "FAILURE"))


# -- preview -----------------------------------------------------------------------

#: Why a preview ended (the ``end`` event's ``reason``), and whether that is a success.
END_REASONS = {
    "limit": ("the row limit was reached", True),
    "finished": ("the input ended", True),
    "stopped": ("the preview job was stopped", True),
    "timeout": ("it timed out", False),
    "failed": ("the preview job failed", False),
    "gone": ("the preview job disappeared", False),
}


class RowPrinter:
    """Rows as a table that grows as they arrive; a header whenever the columns change."""

    MAX_WIDTH = 40

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.columns: list[str] = []
        self.widths: list[int] = []

    def show(self, rows: list[dict[str, Any]]) -> None:
        for row in rows:
            if self.as_json:
                click.echo(json.dumps(row, default=str))
                continue
            if list(row) != self.columns:
                self._header(list(row), rows)
            click.echo("  ".join(_cell(row[c]).ljust(w)
                                 for c, w in zip(self.columns, self.widths, strict=True))
                       .rstrip())

    def _header(self, columns: list[str], batch: list[dict[str, Any]]) -> None:
        self.columns = columns
        self.widths = [min(self.MAX_WIDTH, max([len(c), *(len(_cell(r.get(c)))
                                                          for r in batch)]))
                       for c in columns]
        click.echo("  ".join(c.upper().ljust(w)
                             for c, w in zip(columns, self.widths, strict=True)).rstrip())


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, dict | list):
        return json.dumps(value, default=str)
    return str(value)


@pipelines.command("preview")
@sql_file_argument
@click.option("--limit", "-n", type=click.IntRange(1, 10_000), default=100, show_default=True,
              help="Stop after this many rows.")
@click.option("--parallelism", "-p", type=click.IntRange(1, 8), default=1, show_default=True)
@click.option("--timeout", "timeout_s", type=click.IntRange(1, 3600), default=300,
              show_default=True, help="Stop after this many seconds.")
@click.option("--json", "as_json", is_flag=True, help="Print each row as a JSON line.")
@with_client
def preview_pipeline(client: SpateClient, sql_file: Path, limit: int, parallelism: int,
                     timeout_s: int, as_json: bool) -> None:
    """Run SQL_FILE as a throwaway job and print its rows as they come (Ctrl-C stops it).

    Nothing is stored and no sink is written: the rows the queries would write
    are shown instead."""
    body = {"sql": sql_file.read_text(), "limit": limit, "parallelism": parallelism,
            "timeout_s": timeout_s}
    printer = RowPrinter(as_json)
    reason = "gone"
    try:
        with client.events("/pipelines/preview", body) as events:
            for event, data in events:
                if event == "status":
                    click.echo(f"preview job {data['job_id']}: {data['state']}", err=True)
                elif event == "rows":
                    printer.show(data)
                elif event == "error":
                    click.echo(f"error: {data['message']}", err=True)
                elif event == "end":
                    reason = data["reason"]
                    why, _ = END_REASONS.get(reason, (reason, False))
                    click.echo(f"preview ended: {data['rows']} rows; {why}", err=True)
    except KeyboardInterrupt:
        click.echo("preview stopped (Ctrl-C); the server stops its job", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if not END_REASONS.get(reason, ("", False))[1]:
        sys.exit(EXIT_REFUSED)
