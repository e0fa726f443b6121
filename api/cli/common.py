"""What the client commands that talk to a server share (``spate pipelines``, ``keys``,
``quotas``, ``usage``, ``invoices``, ``udfs``): connecting, errors, output.

The server comes from ``--server`` or ``SPATE_SERVER``, the key from
``--api-key`` or ``SPATE_API_KEY`` (prefer the variable: a key on the command
line lands in shell history); both are read only when a command calls the
server, so ``--help`` needs neither. Output is a short table, or the API's
JSON with ``--json``. A refused request prints one ``error:`` line (the
server's message, with CLI commands where the API names its own verbs) and
exits 1; invalid SQL prints ``FILE:LINE:COLUMN: error: …`` per problem and
exits 2, as ``spate run`` does. The lifecycle commands wait for the job they
asked for (``--no-wait`` returns at once) and print its state.

This module imports nothing of the server: see :mod:`spate.api.cli`.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import wraps
from pathlib import Path
from typing import Any, Concatenate, NoReturn, ParamSpec, TypeVar

import click
import httpx

from spate.api.client.sdk import DEFAULT_SERVER, ClientError, SpateClient

EXIT_REFUSED = 1
EXIT_INVALID_SQL = 2
#: ``plan-update``: the new SQL cannot keep the pipeline's state.
EXIT_INCOMPATIBLE_STATE = 3
#: Ctrl-C, as a shell reports a process ended by SIGINT.
EXIT_INTERRUPTED = 130

P = ParamSpec("P")
R = TypeVar("R")
F = TypeVar("F", bound=Callable[..., Any])

#: The API's hints name HTTP verbs and query parameters; the CLI says which command
#: does it. (pattern of the API's message, replacement), applied in order.
CLI_HINTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^pipeline '(?P<name>[^']+)' is running \((?P<job>[^)]*)\): stop it first "
                r"and delete .*$"),
     r"pipeline '\g<name>' is running (\g<job>): stop it first with 'spate pipelines stop "
     r"\g<name>', or kill its job and delete it with 'spate pipelines delete \g<name> --force'"),
    (re.compile(r"^a pipeline named '(?P<name>[^']+)' already exists; choose another name, "
                r"or delete it first$"),
     r"a pipeline named '\g<name>' already exists; choose another name, or delete it first "
     r"with 'spate pipelines delete \g<name>'"),
    (re.compile(r"^pipeline '(?P<name>[^']+)' not found$"),
     r"pipeline '\g<name>' not found; 'spate pipelines list' shows the tenant's pipelines"),
    (re.compile(r"^(?P<refusal>pipeline '(?P<name>[^']+)' cannot restart .* keeping its "
                r"state: .*)$"),
     r"\g<refusal> ('spate pipelines restart \g<name> --without-state')"),
    (re.compile(r"^invalid or revoked API key$"),
     "invalid or revoked API key; check SPATE_API_KEY (or --api-key)"),
    (re.compile(r"create another admin key before revoking it$"),
     "create another admin key first ('spate keys create NAME --role admin')"),
    (re.compile(r"is revoked; create a new key instead$"),
     "is revoked; create a new key instead ('spate keys create NAME')"),
)
#: Where the client commands take the key from, as a malformed key's message names it.
KEY_NAMED = "SPATE_API_KEY (or --api-key)"
NO_KEY = ("no API key: set SPATE_API_KEY (or pass --api-key before the command); "
          "'spate serve' writes its admin key to the file its banner names")


def cli_message(error: ClientError) -> str:
    """The one line the CLI prints for a refusal: the API's message in CLI terms."""
    message = error.message
    for pattern, replacement in CLI_HINTS:
        message = pattern.sub(replacement, message)
    fields = [f"{str(d['location']).removeprefix('body.')}: {d['message']}"
              for d in error.details if "location" in d and "message" in d]
    return f"{message}: {'; '.join(fields)}" if fields else message


def fail(error: ClientError, sql_file: Path | None = None) -> NoReturn:
    located = [d for d in error.details if {"line", "column", "message"} <= d.keys()]
    if error.code == "invalid_sql" and sql_file is not None and located:
        for diagnostic in located:
            click.echo(f"{sql_file}:{diagnostic['line']}:{diagnostic['column']}: error: "
                       f"{diagnostic['message']}", err=True)
        sys.exit(EXIT_INVALID_SQL)
    click.echo(f"error: {cli_message(error)}", err=True)
    sys.exit(EXIT_REFUSED)


# -- connection --------------------------------------------------------------------


@dataclass
class Connection:
    """Where a group's commands send their calls; the client is opened on first use."""

    server: str
    api_key: str | None
    #: an ``httpx.Client`` to use instead of a new one (tests hand in an app's client)
    http: httpx.Client | None = None

    def open(self, ctx: click.Context) -> SpateClient:
        if not self.api_key:
            raise ClientError(NO_KEY)
        return ctx.with_resource(SpateClient(self.server, self.api_key, self.http,
                                             key_named=KEY_NAMED))


def connection_options(group: F) -> F:
    group = click.option("--api-key", envvar="SPATE_API_KEY", show_envvar=False,
                         help="API key (better: the SPATE_API_KEY variable).")(group)
    group = click.option("--server", envvar="SPATE_SERVER", default=DEFAULT_SERVER,
                         show_default=True, help="Spate server URL (or SPATE_SERVER).")(group)
    return group


def connect(ctx: click.Context, server: str, api_key: str | None) -> None:
    injected = ctx.obj.get("http") if isinstance(ctx.obj, dict) else None
    assert injected is None or isinstance(injected, httpx.Client)
    ctx.obj = Connection(server, api_key, injected)


def with_client(command: Callable[Concatenate[SpateClient, P], R]) -> Callable[P, R]:
    """Hand the command a client; turn a refusal into its error line and exit status."""

    @wraps(command)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        ctx = click.get_current_context()
        connection = ctx.find_object(Connection)
        assert connection is not None, "a client command runs under a group that connects"
        try:
            return command(connection.open(ctx), *args, **kwargs)
        except ClientError as error:
            sql_file = kwargs.get("sql_file")
            fail(error, sql_file if isinstance(sql_file, Path) else None)

    return wrapper


# -- output ------------------------------------------------------------------------


def show_table(value: Any, as_json: bool, rows: Iterable[tuple[Any, ...]],
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
sql_file_argument = click.argument(
    "sql_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
