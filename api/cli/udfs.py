"""``spate udfs …``: store, list, show and delete the tenant's Python UDFs on a server.

The commands follow ``spate pipelines`` (:mod:`spate.api.cli.pipelines`): the
server and key from ``--server``/``SPATE_SERVER`` and
``--api-key``/``SPATE_API_KEY``, a short table or the API's JSON with
``--json``, one ``error:`` line and exit 1 for a refusal. A UDF file the
server cannot use prints ``FILE:LINE:COLUMN: error: …`` per problem and exits
2, as ``spate run --udf`` does.

This module imports nothing of the server: see :mod:`spate.api.cli`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any
from urllib.parse import quote

import click

from spate.api.cli.common import connect, connection_options, json_option, show_table, with_client
from spate.api.client.sdk import ClientError, SpateClient

#: ``spate udfs create``: the server cannot use the file (as ``spate run``'s exit 2).
EXIT_INVALID_UDF = 2
_HEADER = ("NAME", "VERSION", "KIND", "SIGNATURE", "UPDATED")


def _row(udf: dict[str, Any]) -> tuple[Any, ...]:
    return (udf["name"], udf["version"], udf["kind"], udf["signature"], udf["updated_at"])


def _path(name: str, *rest: str) -> str:
    return "/udfs/" + "/".join(quote(part, safe="") for part in (name, *rest))


@click.group("udfs")
@connection_options
@click.pass_context
def udfs(ctx: click.Context, server: str, api_key: str | None) -> None:
    """Store, list, show and delete the tenant's Python UDFs (docs/udfs.md)."""
    connect(ctx, server, api_key)


@udfs.command("create")
@click.argument("name")
@click.argument("udf_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option
@with_client
def create_udf(client: SpateClient, name: str, udf_file: Path, as_json: bool) -> None:
    """Store UDF_FILE as UDF NAME: a new UDF, or its next version (the current source
    again changes nothing). Its pipelines call it as NAME(...)."""
    try:
        udf = client.post("/udfs", {"name": name, "source": udf_file.read_text()})
    except ClientError as error:
        located = [d for d in error.details if {"line", "column", "message"} <= d.keys()]
        if error.code != "invalid_udf" or not located:
            raise
        for diagnostic in located:
            click.echo(f"{udf_file}:{diagnostic['line']}:{diagnostic['column']}: error: "
                       f"{diagnostic['message']}", err=True)
        sys.exit(EXIT_INVALID_UDF)
    show_table(udf, as_json, [_row(udf)], _HEADER)


@udfs.command("list")
@json_option
@with_client
def list_udfs(client: SpateClient, as_json: bool) -> None:
    """The tenant's UDFs, with their current version and signature."""
    items = list(client.items("/udfs"))
    show_table(items, as_json, [_row(u) for u in items], _HEADER)


@udfs.command("get")
@click.argument("name")
@click.option("--version", "version", type=click.IntRange(1), default=None,
              help="That version instead of the current one.")
@click.option("--source", is_flag=True, help="Print only the source (to save it as a file).")
@json_option
@with_client
def get_udf(client: SpateClient, name: str, version: int | None, source: bool,
            as_json: bool) -> None:
    """UDF NAME: its current version (or --version) and the list of its versions."""
    udf = client.get(_path(name) if version is None else _path(name, "versions", str(version)))
    if source:
        click.echo(udf["source"], nl=False)
        return
    if version is not None:
        show_table(udf, as_json, [(udf["name"], udf["version"], udf["kind"], udf["signature"],
                              udf["created_at"])], _HEADER)
        return
    show_table(udf, as_json, [_row(udf)], _HEADER)
    if not as_json:
        click.echo("versions: " + ", ".join(f"{v['version']} ({v['created_at']})"
                                            for v in udf["versions"]))


@udfs.command("delete")
@click.argument("name")
@with_client
def delete_udf(client: SpateClient, name: str) -> None:
    """Delete UDF NAME and its versions (refused while a running pipeline calls it)."""
    client.delete(_path(name))
    click.echo(f"deleted {name}")
