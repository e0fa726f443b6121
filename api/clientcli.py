"""``spate pipelines …`` and ``spate keys …``: client commands that talk to a server.

The server comes from ``--server`` or ``SPATE_SERVER``, the key from
``--api-key`` or ``SPATE_API_KEY`` (prefer the variable: a key on the command
line lands in shell history). Output is a short table, or the API's JSON with
``--json``. A refused request prints the server's message and exits 1.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click
import httpx

from spate.api.client import DEFAULT_SERVER, ClientError, SpateClient

EXIT_REFUSED = 1
STOP_MODES = ("checkpoint", "graceful", "immediate", "force")

F = TypeVar("F", bound=Callable[..., Any])


def _connection_options(group: F) -> F:
    group = click.option("--api-key", envvar="SPATE_API_KEY", required=True,
                         help="API key (or SPATE_API_KEY).")(group)
    group = click.option("--server", envvar="SPATE_SERVER", default=DEFAULT_SERVER,
                         show_default=True, help="Spate server URL (or SPATE_SERVER).")(group)
    return group


def _open_client(ctx: click.Context, server: str, api_key: str) -> None:
    """Open the group's client; tests hand in an ``httpx.Client`` as ``obj['http']``."""
    http = ctx.obj.get("http") if isinstance(ctx.obj, dict) else None
    assert http is None or isinstance(http, httpx.Client)
    ctx.obj = ctx.with_resource(SpateClient(server, api_key, http))


def _refusals_exit(command: F) -> F:
    """Turn a :class:`ClientError` into its message on stderr and exit status 1."""

    @wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except ClientError as error:
            click.echo(f"error: {error.message}", err=True)
            for detail in error.details:
                where = (f"line {detail['line']}, column {detail['column']}: "
                         if "line" in detail and "column" in detail else "")
                click.echo(f"  {where}{detail.get('message', detail)}", err=True)
            sys.exit(EXIT_REFUSED)

    return wrapper  # type: ignore[return-value]


def _show(value: Any, as_json: bool, rows: Iterable[tuple[Any, ...]],
          header: tuple[str, ...]) -> None:
    if as_json:
        click.echo(json.dumps(value, indent=2, sort_keys=True))
        return
    table = [header, *[tuple("-" if v is None else str(v) for v in row) for row in rows]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        click.echo("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
                   .rstrip())


json_option = click.option("--json", "as_json", is_flag=True, help="Print the API's JSON.")
pass_client = click.make_pass_decorator(SpateClient)

# -- pipelines ---------------------------------------------------------------------

_PIPELINE_HEADER = ("NAME", "DESIRED", "JOB STATE", "PARALLELISM", "LAST EPOCH", "VERSION")


def _pipeline_row(pipeline: dict[str, Any]) -> tuple[Any, ...]:
    job = pipeline.get("job") or {}
    return (pipeline["name"], pipeline.get("desired_state"), job.get("state"),
            pipeline.get("parallelism"), job.get("last_epoch"), pipeline.get("version"))


def _show_pipeline(pipeline: dict[str, Any], as_json: bool) -> None:
    _show(pipeline, as_json, [_pipeline_row(pipeline)], _PIPELINE_HEADER)
    job = pipeline.get("job") or {}
    if not as_json and job.get("failure_message"):
        click.echo(f"failure: {job['failure_message']}")


@click.group("pipelines")
@_connection_options
@click.pass_context
def pipelines(ctx: click.Context, server: str, api_key: str) -> None:
    """Create, list and control pipelines on a Spate server."""
    _open_client(ctx, server, api_key)


@pipelines.command("create")
@click.argument("name")
@click.argument("sql_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--parallelism", "-p", type=click.IntRange(1, 128), default=1, show_default=True)
@click.option("--checkpoint-interval-ms", type=click.IntRange(1), default=None)
@click.option("--description", default="")
@click.option("--stopped", is_flag=True, help="Create without starting it.")
@json_option
@pass_client
@_refusals_exit
def create_pipeline(client: SpateClient, name: str, sql_file: Path, parallelism: int,
                    checkpoint_interval_ms: int | None, description: str, stopped: bool,
                    as_json: bool) -> None:
    """Create pipeline NAME from SQL_FILE (and start it, unless --stopped)."""
    body: dict[str, Any] = {"name": name, "sql": sql_file.read_text(),
                            "parallelism": parallelism, "description": description}
    if stopped:
        body["stopped"] = True
    if checkpoint_interval_ms is not None:
        body["checkpoint_interval_ms"] = checkpoint_interval_ms
    _show_pipeline(client.post("/pipelines", body), as_json)


@pipelines.command("list")
@json_option
@pass_client
@_refusals_exit
def list_pipelines(client: SpateClient, as_json: bool) -> None:
    """The tenant's pipelines and their jobs' states."""
    items = list(client.items("/pipelines"))
    _show(items, as_json, [_pipeline_row(p) for p in items], _PIPELINE_HEADER)


@pipelines.command("get")
@click.argument("name")
@json_option
@pass_client
@_refusals_exit
def get_pipeline(client: SpateClient, name: str, as_json: bool) -> None:
    """One pipeline, with its current job."""
    _show_pipeline(client.get(f"/pipelines/{name}"), as_json)


@pipelines.command("stop")
@click.argument("name")
@click.option("--mode", type=click.Choice(STOP_MODES), default="checkpoint",
              show_default=True, help="checkpoint: after the epoch in progress commits; "
              "graceful: the same, with a time limit; immediate: abandon the epoch in "
              "progress (it is replayed on restart); force: kill the job.")
@json_option
@pass_client
@_refusals_exit
def stop_pipeline(client: SpateClient, name: str, mode: str, as_json: bool) -> None:
    """Stop pipeline NAME."""
    _show_pipeline(client.patch(f"/pipelines/{name}", {"stop": mode}), as_json)


@pipelines.command("start")
@click.argument("name")
@json_option
@pass_client
@_refusals_exit
def start_pipeline(client: SpateClient, name: str, as_json: bool) -> None:
    """Run a stopped pipeline NAME again, from its last checkpoint."""
    _show_pipeline(client.patch(f"/pipelines/{name}", {"stop": "none"}), as_json)


@pipelines.command("restart")
@click.argument("name")
@click.option("--without-state", is_flag=True,
              help="Drop the pipeline's state and start from the beginning of its input.")
@json_option
@pass_client
@_refusals_exit
def restart_pipeline(client: SpateClient, name: str, without_state: bool,
                     as_json: bool) -> None:
    """Replace pipeline NAME's job with a new one."""
    body = {"with_state": not without_state}
    _show_pipeline(client.post(f"/pipelines/{name}/restart", body), as_json)


@pipelines.command("rescale")
@click.argument("name")
@click.argument("parallelism", type=click.IntRange(1, 128))
@json_option
@pass_client
@_refusals_exit
def rescale_pipeline(client: SpateClient, name: str, parallelism: int, as_json: bool) -> None:
    """Run pipeline NAME at PARALLELISM; its state moves by key group."""
    body = {"parallelism": parallelism}
    _show_pipeline(client.post(f"/pipelines/{name}/rescale", body), as_json)


@pipelines.command("delete")
@click.argument("name")
@click.option("--force", is_flag=True, help="Kill a running job first.")
@pass_client
@_refusals_exit
def delete_pipeline(client: SpateClient, name: str, force: bool) -> None:
    """Delete pipeline NAME and its versions."""
    client.delete(f"/pipelines/{name}", **({"force": "true"} if force else {}))
    click.echo(f"deleted {name}")


@pipelines.command("jobs")
@click.argument("name")
@json_option
@pass_client
@_refusals_exit
def list_jobs(client: SpateClient, name: str, as_json: bool) -> None:
    """Pipeline NAME's jobs (runs), oldest first."""
    items = list(client.items(f"/pipelines/{name}/jobs"))
    rows = [(j["id"], j.get("state"), j.get("parallelism"), j.get("last_epoch"),
             j.get("failure_message")) for j in items]
    _show(items, as_json, rows, ("JOB", "STATE", "PARALLELISM", "LAST EPOCH", "FAILURE"))


# -- keys --------------------------------------------------------------------------

_KEY_HEADER = ("ID", "NAME", "ROLE", "PREFIX", "CREATED", "REVOKED")


def _key_row(key: dict[str, Any]) -> tuple[Any, ...]:
    return (key["id"], key["name"], key["role"], key["prefix"], key["created_at"],
            key.get("revoked_at"))


def _show_new_key(key: dict[str, Any], as_json: bool) -> None:
    _show(key, as_json, [_key_row(key)], _KEY_HEADER)
    if not as_json:
        click.echo(f"key: {key['key']}")
        click.echo("This is the only time the key is shown; store it now.", err=True)


@click.group("keys")
@_connection_options
@click.pass_context
def keys(ctx: click.Context, server: str, api_key: str) -> None:
    """Manage the tenant's API keys (needs an admin key)."""
    _open_client(ctx, server, api_key)


@keys.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(("admin", "developer", "viewer")),
              default="developer", show_default=True)
@json_option
@pass_client
@_refusals_exit
def create_key(client: SpateClient, name: str, role: str, as_json: bool) -> None:
    """Create a key named NAME; its secret is printed once."""
    _show_new_key(client.post("/api-keys", {"name": name, "role": role}), as_json)


@keys.command("list")
@click.option("--include-revoked", is_flag=True)
@json_option
@pass_client
@_refusals_exit
def list_keys(client: SpateClient, include_revoked: bool, as_json: bool) -> None:
    """The tenant's keys, by prefix."""
    items = list(client.items("/api-keys", include_revoked=include_revoked or None))
    _show(items, as_json, [_key_row(k) for k in items], _KEY_HEADER)


@keys.command("revoke")
@click.argument("key_id")
@pass_client
@_refusals_exit
def revoke_key(client: SpateClient, key_id: str) -> None:
    """Revoke key KEY_ID; it stops working at once."""
    client.delete(f"/api-keys/{key_id}")
    click.echo(f"revoked {key_id}")


@keys.command("rotate")
@click.argument("key_id")
@json_option
@pass_client
@_refusals_exit
def rotate_key(client: SpateClient, key_id: str, as_json: bool) -> None:
    """Give key KEY_ID a new secret (printed once); the old one stops working."""
    _show_new_key(client.post(f"/api-keys/{key_id}/rotate"), as_json)
