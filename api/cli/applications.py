"""``spate applications``: the operator's view of the tenants' warm Spark applications
on this machine (the ``local`` backend with ``SPATE_APPLICATIONS = on``), and draining
them.  It reads the server's data folder (``SPATE_DATA_DIR``), so it runs where the
scheduler does."""

from __future__ import annotations

import json

import click
from pydantic import ValidationError

from spate.api.settings import Settings
from spate.scheduler.backends.applications import Applications


def _applications() -> Applications:
    try:
        settings = Settings()
    except ValidationError as error:
        raise click.ClickException(f"invalid settings:\n{error}") from error
    return Applications(settings.data_dir / "applications")


@click.group()
def applications() -> None:
    """List or drain the tenants' warm Spark applications on this machine."""


@applications.command("list")
def list_applications() -> None:
    """One JSON line per tenant application: process, size, state and running jobs."""
    found = _applications()
    for tenant in found.tenants():
        described = found.describe(tenant)
        if described is not None:
            click.echo(json.dumps(described, sort_keys=True))


@applications.command()
@click.argument("tenants", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Drain every running application.")
def drain(tenants: tuple[str, ...], every: bool) -> None:
    """Move TENANTS' pipelines to new applications: each query stops after its epoch in
    progress commits and resumes, exactly once, in the tenant's next application."""
    found = _applications()
    if every == bool(tenants):
        raise click.UsageError("name the tenants to drain, or give --all")
    known = found.tenants()
    for tenant in known if every else tenants:
        if tenant in known and found.drain(tenant):
            click.echo(f"draining the application of tenant {tenant}")
        elif not every:
            raise click.ClickException(f"tenant {tenant} has no application running")
