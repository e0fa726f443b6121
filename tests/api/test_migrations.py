"""Migrations go up and down on PostgreSQL and SQLite, and match the models."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from click.testing import CliRunner
from sqlalchemy import inspect

from spate.api import migrate
from spate.api.cli import main
from spate.api.db import create_database
from spate.api.models import Base
from tests.api.support import BACKENDS

# Every model's table, plus the guard that the migrations do not lag behind them.
TABLES = set(Base.metadata.tables)
assert {"tenants", "api_keys", "pipelines", "jobs"} <= TABLES


def _tables(url: str) -> set[str]:
    database = create_database(url)
    try:
        return set(inspect(database.engine).get_table_names()) - {"alembic_version"}
    finally:
        database.dispose()


def _model_diff(url: str) -> list[object]:
    database = create_database(url)
    try:
        with database.engine.connect() as connection:
            context = MigrationContext.configure(connection, opts={"compare_type": True})
            return list(compare_metadata(context, Base.metadata))
    finally:
        database.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_upgrade_then_downgrade_to_base(backend: str,
                                        fresh_database_url: Callable[[str], str]) -> None:
    url = fresh_database_url(backend)
    assert migrate.current_revision(url) is None

    migrate.upgrade(url)
    assert migrate.current_revision(url) == migrate.head_revision()
    assert _tables(url) == TABLES

    migrate.downgrade(url, "base")
    assert migrate.current_revision(url) is None
    assert _tables(url) == set()

    migrate.upgrade(url)  # and back up again: downgrade left nothing behind
    assert _tables(url) == TABLES


@pytest.mark.parametrize("backend", BACKENDS)
def test_models_and_migrations_agree(backend: str,
                                     fresh_database_url: Callable[[str], str]) -> None:
    url = fresh_database_url(backend)
    migrate.upgrade(url)
    assert _model_diff(url) == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_cli_upgrade_current_downgrade(backend: str,
                                       fresh_database_url: Callable[[str], str]) -> None:
    url = fresh_database_url(backend)
    runner = CliRunner()

    result = runner.invoke(main, ["db", "upgrade", "--url", url])
    assert result.exit_code == 0, result.output
    assert f"database at revision {migrate.head_revision()}" in result.output

    result = runner.invoke(main, ["db", "current", "--url", url])
    assert result.exit_code == 0, result.output
    assert f"current: {migrate.head_revision()}" in result.output

    result = runner.invoke(main, ["db", "downgrade", "base", "--url", url])
    assert result.exit_code == 0, result.output
    assert "database at revision base" in result.output
    assert _tables(url) == set()


def test_cli_takes_the_url_from_the_settings(
        fresh_database_url: Callable[[str], str], monkeypatch: pytest.MonkeyPatch) -> None:
    url = fresh_database_url("sqlite")
    monkeypatch.setenv("SPATE_DATABASE_URL", url)
    result = CliRunner().invoke(main, ["db", "upgrade"])
    assert result.exit_code == 0, result.output
    assert _tables(url) == TABLES


def test_cli_reports_invalid_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPATE_DATABASE_URL", "mysql://nope")
    result = CliRunner().invoke(main, ["db", "upgrade"])
    assert result.exit_code != 0
    assert "database_url must be sqlite" in result.output



@pytest.mark.parametrize("backend", BACKENDS)
def test_0008_adds_the_watch_flag_false_for_existing_jobs(
        backend: str, fresh_database_url: Callable[[str], str]) -> None:
    url = fresh_database_url(backend)
    migrate.upgrade(url, "0007")
    database = create_database(url)
    try:
        assert "watch" not in {c["name"] for c in inspect(database.engine).get_columns("jobs")}
    finally:
        database.dispose()
    migrate.upgrade(url)
    database = create_database(url)
    try:
        columns = {c["name"]: c for c in inspect(database.engine).get_columns("jobs")}
        assert columns["watch"]["nullable"] is False
    finally:
        database.dispose()
    migrate.downgrade(url, "0007")


def _job_states_allowed(url: str) -> str:
    database = create_database(url)
    try:
        checks = inspect(database.engine).get_check_constraints("jobs")
        return next(c["sqltext"] for c in checks if c["name"] == "ck_jobs_state")
    finally:
        database.dispose()


@pytest.mark.parametrize("backend", BACKENDS)
def test_0006_replaces_the_job_state_check_with_one_that_takes_idle(
        backend: str, fresh_database_url: Callable[[str], str]) -> None:
    url = fresh_database_url(backend)
    migrate.upgrade(url, "0005")
    assert "'idle'" not in _job_states_allowed(url)
    migrate.upgrade(url)
    assert "'idle'" in _job_states_allowed(url)
    assert "'running'" in _job_states_allowed(url)
    migrate.downgrade(url, "0005")
    assert "'idle'" not in _job_states_allowed(url)
