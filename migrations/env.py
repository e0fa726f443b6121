"""Alembic environment: migrates the database named by the Spate config attribute.

SQLite cannot alter most table properties in place, so migrations run in
"batch" mode there (copy and move); on PostgreSQL they alter in place.
"""

from __future__ import annotations

from alembic import context

from spate.api.db import create_database
from spate.api.migrate import URL_ATTRIBUTE
from spate.api.models import Base

target_metadata = Base.metadata


def run_migrations_online() -> None:
    url = context.config.attributes.get(URL_ATTRIBUTE)
    if not url:
        raise RuntimeError("no database URL: run migrations with 'spate db upgrade'")
    database = create_database(url)
    try:
        with database.engine.connect() as connection:
            context.configure(
                connection=connection,
                target_metadata=target_metadata,
                render_as_batch=connection.dialect.name == "sqlite",
                compare_type=True,
            )
            with context.begin_transaction():
                context.run_migrations()
    finally:
        database.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported; pass a database URL")
run_migrations_online()
