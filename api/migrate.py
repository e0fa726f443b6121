"""Running the Alembic migrations in ``migrations/`` against a database URL.

The Alembic environment is located through the ``migrations`` package, so it
works from a checkout and from an installed distribution alike; no
``alembic.ini`` is needed.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from spate import migrations
from spate.api.db import create_database

#: Key under which env.py finds the database URL in the Alembic config.
URL_ATTRIBUTE = "spate.database_url"


def alembic_config(url: str) -> Config:
    """An Alembic config for ``url`` (kept out of the ini options: a password may hold '%')."""
    config = Config()
    config.set_main_option("script_location", str(Path(migrations.__file__).parent))
    config.attributes[URL_ATTRIBUTE] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str) -> None:
    command.downgrade(alembic_config(url), revision)


def current_revision(url: str) -> str | None:
    """The revision the database at ``url`` is at, or None before the first migration."""
    database = create_database(url)
    try:
        with database.engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()
    finally:
        database.dispose()


@cache
def head_revision() -> str | None:
    """The newest revision this release ships."""
    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
