"""``spate db``: migrate the control-plane database."""

from __future__ import annotations

import click
from pydantic import ValidationError

from spate.api import migrate
from spate.api.settings import Settings

_URL_HELP = "database URL (default: SPATE_DATABASE_URL, spate.toml, or the embedded SQLite file)"


def _url(url: str | None) -> str:
    if url is not None:
        return url
    try:
        return Settings().database_url
    except ValidationError as error:
        raise click.ClickException(f"invalid settings:\n{error}") from error


@click.group()
def db() -> None:
    """Migrate the control-plane database (PostgreSQL or SQLite)."""


@db.command()
@click.option("--url", help=_URL_HELP)
@click.option("--revision", default="head", show_default=True, help="revision to reach")
def upgrade(url: str | None, revision: str) -> None:
    """Apply migrations up to REVISION (default: the newest)."""
    target = _url(url)
    migrate.upgrade(target, revision)
    click.echo(f"database at revision {migrate.current_revision(target)}")


@db.command()
@click.argument("revision")
@click.option("--url", help=_URL_HELP)
def downgrade(revision: str, url: str | None) -> None:
    """Revert migrations down to REVISION ('base' removes every table; '-1' one step)."""
    target = _url(url)
    migrate.downgrade(target, revision)
    click.echo(f"database at revision {migrate.current_revision(target) or 'base'}")


@db.command()
@click.option("--url", help=_URL_HELP)
def current(url: str | None) -> None:
    """Print the database's revision and the newest this release has."""
    revision = migrate.current_revision(_url(url))
    click.echo(f"current: {revision or 'base'}\nhead: {migrate.head_revision()}")
