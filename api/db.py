"""The control-plane database: engine and session factory built from a URL.

``postgresql://`` URLs use psycopg 3 (the driver the state store already
needs); ``sqlite:///path`` creates the file's folder and turns on foreign keys
and WAL. Nothing is built at import time: :func:`create_database` is called
by the app factory, the CLI and the migrations.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Engine, create_engine, event, make_url
from sqlalchemy.orm import Session, sessionmaker

from spate.api.tenancy import install_tenancy


@dataclass(frozen=True)
class Database:
    """An engine and the tenant-aware session factory over it."""

    engine: Engine
    sessions: sessionmaker[Session]

    def dispose(self) -> None:
        self.engine.dispose()


def database_url(url: str) -> URL:
    """``url`` with the driver Spate uses for its scheme."""
    parsed = make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def create_database(url: str) -> Database:
    """Engine and sessions for ``url`` (no connection is opened yet)."""
    parsed = database_url(url)
    # A failed statement's parameters (a tenant's SQL, names, secrets' ciphertexts) never
    # go into an exception's text, and so never into a log.
    options: dict[str, Any] = {"pool_pre_ping": True, "hide_parameters": True}
    if parsed.get_backend_name() == "sqlite":
        _create_sqlite_folder(parsed)
        # Sessions move between the event loop's worker threads, one at a time.
        options["connect_args"] = {"check_same_thread": False, "timeout": 30}
    engine = create_engine(parsed, **options)
    if parsed.get_backend_name() == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    sessions = sessionmaker(engine, expire_on_commit=False)
    install_tenancy(sessions)
    return Database(engine=engine, sessions=sessions)


def _create_sqlite_folder(url: URL) -> None:
    if url.database and url.database != ":memory:" and not url.database.startswith("file:"):
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)


def _sqlite_pragmas(connection: Any, record: Any) -> None:
    cursor = connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA busy_timeout = 30000")
    finally:
        cursor.close()
