"""``spate keys …``: create, list, revoke and rotate the tenant's API keys (admin keys)."""

from __future__ import annotations

from typing import Any

import click

from spate.api.cli.common import (
    connect,
    connection_options,
    json_option,
    show_table,
    with_client,
)
from spate.api.client.sdk import SpateClient

_KEY_HEADER = ("ID", "NAME", "ROLE", "PREFIX", "CREATED", "REVOKED")


def _key_row(key: dict[str, Any]) -> tuple[Any, ...]:
    return (key["id"], key["name"], key["role"], key["prefix"], key["created_at"],
            key.get("revoked_at"))


def _show_new_key(key: dict[str, Any], as_json: bool) -> None:
    show_table(key, as_json, [_key_row(key)], _KEY_HEADER)
    if not as_json:
        click.echo(f"key: {key['key']}")
        click.echo("This is the only time the key is shown; store it now.", err=True)


@click.group("keys")
@connection_options
@click.pass_context
def keys(ctx: click.Context, server: str, api_key: str | None) -> None:
    """Manage the tenant's API keys (needs an admin key)."""
    connect(ctx, server, api_key)


@keys.command("create")
@click.argument("name")
@click.option("--role", type=click.Choice(("admin", "developer", "viewer", "billing")),
              default="developer", show_default=True)
@json_option
@with_client
def create_key(client: SpateClient, name: str, role: str, as_json: bool) -> None:
    """Create a key named NAME; its secret is printed once."""
    _show_new_key(client.post("/api-keys", {"name": name, "role": role}), as_json)


@keys.command("list")
@click.option("--include-revoked", is_flag=True)
@json_option
@with_client
def list_keys(client: SpateClient, include_revoked: bool, as_json: bool) -> None:
    """The tenant's keys, by prefix."""
    items = list(client.items("/api-keys", include_revoked=include_revoked or None))
    show_table(items, as_json, [_key_row(k) for k in items], _KEY_HEADER)


@keys.command("revoke")
@click.argument("key_id")
@with_client
def revoke_key(client: SpateClient, key_id: str) -> None:
    """Revoke key KEY_ID; it stops working at once."""
    client.delete(f"/api-keys/{key_id}")
    click.echo(f"revoked {key_id}")


@keys.command("rotate")
@click.argument("key_id")
@json_option
@with_client
def rotate_key(client: SpateClient, key_id: str, as_json: bool) -> None:
    """Give key KEY_ID a new secret (printed once); the old one stops working."""
    _show_new_key(client.post(f"/api-keys/{key_id}/rotate"), as_json)
