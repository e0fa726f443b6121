"""``spate state``: look into a state store and garbage-collect it."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

import click

from spate.statestore import StateStoreError, open_store


@click.group("state")
def state() -> None:
    """Inspect or garbage-collect a state store (URL: sqlite:///…, postgresql://…, fdb://…)."""


@state.command("inspect")
@click.argument("url")
@click.option("--pipeline", "pipeline_id", default=None,
              help="Pipeline to describe (default: list the pipelines in the store).")
@click.option("--tenant", default="default", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
def inspect(url: str, pipeline_id: str | None, tenant: str, as_json: bool) -> None:
    """Operators, key groups, sizes and the last committed epoch of a pipeline."""
    try:
        with open_store(url) as store:
            if pipeline_id is None:
                pairs = store.pipelines(None)
                if as_json:
                    click.echo(json.dumps([{"tenant": t, "pipeline": p} for t, p in pairs]))
                for t, p in [] if as_json else pairs:
                    click.echo(f"{t}\t{p}")
                return
            if (tenant, pipeline_id) not in store.pipelines(tenant):
                raise click.ClickException(
                    f"no pipeline {pipeline_id!r} of tenant {tenant!r} in {store.url}; "
                    f"run 'spate state inspect {store.url}' to list them")
            info = store.pipeline(tenant, pipeline_id).describe()
    except StateStoreError as error:
        _fail(error)
    if as_json:
        click.echo(json.dumps(asdict(info), default=str, sort_keys=True))
        return
    click.echo(f"pipeline       {info.tenant}/{info.pipeline}")
    click.echo(f"last epoch     {info.last_committed_epoch}")
    click.echo(f"{'operator':<30} {'key groups':>10} {'keys':>10} {'bytes':>12}")
    for op in info.operators:
        click.echo(f"{op.operator:<30} {op.key_groups:>10} {op.keys:>10} {op.value_bytes:>12}")
    if info.metadata:
        click.echo("metadata       " + json.dumps(info.metadata, default=str, sort_keys=True))


@state.command("gc")
@click.argument("url")
@click.option("--pipeline", "pipeline_id", required=True)
@click.option("--tenant", default="default", show_default=True)
def gc(url: str, pipeline_id: str, tenant: str) -> None:
    """Remove state versions superseded at or before the last committed epoch."""
    try:
        with open_store(url) as store:
            report = store.pipeline(tenant, pipeline_id).gc()
    except StateStoreError as error:
        _fail(error)
    click.echo(f"removed {report.versions_removed} versions ({report.bytes_removed} bytes)")


def _fail(error: StateStoreError) -> None:
    click.echo(f"error: {error}", err=True)
    sys.exit(1)
