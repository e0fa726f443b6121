"""The ``spate`` command line: one group, with each package's commands mounted.

A command's module is imported only when that command runs (or its help is
asked for): the client commands then start without loading Spark, SQLAlchemy
or the API's app, which the server and engine commands need. ``spate --help``
lists the commands from the summaries below, importing none of them
(tests/api/cli/test_cli_startup.py checks that each summary matches its command).
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any, NamedTuple

import click


class LazyCommand(NamedTuple):
    """Where a subcommand lives (``module:attribute``) and its one-line summary."""

    target: str
    summary: str


#: Every subcommand of ``spate``, by name.
COMMANDS = {
    "applications": LazyCommand("spate.api.cli.applications:applications",
                                "List or drain the tenants' warm Spark applications on this "
                                "machine."),
    "db": LazyCommand("spate.api.cli.db:db",
                      "Migrate the control-plane database (PostgreSQL or SQLite)."),
    "invoices": LazyCommand("spate.api.cli.account:invoices",
                            "List the tenant's invoices, or show PERIOD's (YYYY-MM) lines."),
    "keys": LazyCommand("spate.api.cli.keys:keys",
                        "Manage the tenant's API keys (needs an admin key)."),
    "pipelines": LazyCommand("spate.api.cli.pipelines:pipelines",
                             "Create, list and control pipelines on a Spate server."),
    "quotas": LazyCommand("spate.api.cli.account:quotas",
                          "Show the tenant's plan: each limit, its value and the tenant's "
                          "current use."),
    "run": LazyCommand("spate.engine.cli:run",
                       "Run the pipeline in SQL_FILE until its input ends (or Ctrl-C / "
                       "SIGTERM)."),
    "serve": LazyCommand("spate.api.serve:serve",
                         "Run Spate in one process: API, scheduler and local Spark jobs."),
    "state": LazyCommand("spate.statestore.cli:state",
                         "Inspect or garbage-collect a state store (URL: sqlite:///…, "
                         "postgresql://…, fdb://…)."),
    "udfs": LazyCommand("spate.api.cli.udfs:udfs",
                        "Store, list, show and delete the tenant's Python UDFs "
                        "(docs/udfs.md)."),
    "usage": LazyCommand("spate.api.cli.account:usage",
                         "Show what the tenant's pipelines and previews used and cost, per "
                         "period and dimension (docs/billing.md)."),
    "worker": LazyCommand("spate.api.worker:worker",
                          "Run a scheduler worker on SPATE_BROKER_URL: start, stop, restart "
                          "and watch jobs."),
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported by name when first needed."""

    def __init__(self, *args: Any, lazy_commands: dict[str, LazyCommand],
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = lazy_commands

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy_commands})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy_commands:
            module_name, attribute = self.lazy_commands[cmd_name].target.split(":")
            command = getattr(importlib.import_module(module_name), attribute)
            assert isinstance(command, click.Command), self.lazy_commands[cmd_name].target
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The command list of ``--help``, from the summaries (nothing is imported)."""
        names = self.list_commands(ctx)
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, click.Command(name, help=self._summary(ctx, name))
                 .get_short_help_str(limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def _summary(self, ctx: click.Context, name: str) -> str:
        if name in self.lazy_commands and name not in self.commands:
            return self.lazy_commands[name].summary
        command = super().get_command(ctx, name)
        return command.get_short_help_str(limit=10_000) if command is not None else ""


@click.group(cls=LazyGroup, lazy_commands=COMMANDS)
@click.option("--verbose", "-v", is_flag=True, help="Log more.")
def main(verbose: bool) -> None:
    """Spate: streaming SQL on Spark with exactly-once state."""
    level = logging.DEBUG if verbose else getattr(logging, os.environ.get("SPATE_LOG", "WARNING"))
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s %(message)s")

