"""The rules of connection settings: known options, which are secret, and table definitions.

A profile or table's options arrive as ``config`` (plain) and ``secrets``
(write-only). Options are checked against the connector's option table
(:mod:`spate.engine.connectors.core.metadata`); an option whose name marks a credential
(``password``, ``token``, …) is secret even when sent in ``config``, and any
other option may be sent in ``secrets`` to keep it encrypted (a path or URL
carrying a token). Planning and validation in the API see secrets only as
:data:`SECRET_PLACEHOLDER`; real values reach a job only when it starts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from spate.api.http.errors import BadRequestError
from spate.engine.connectors import CONNECTOR_OPTIONS
from spate.engine.connectors.core.boundary import UNCONFINED, Boundary
from spate.engine.connectors.core.metadata import is_secret_option
from spate.engine.planner.catalog import Table
from spate.engine.planner.external import (
    FieldDefinition,
    TableDefinition,
    TableDefinitionError,
    table_from_definition,
)

#: What responses show for a secret option, and what planning sees instead of its value.
SECRET_PLACEHOLDER = "********"

OptionValue = str | int | float | bool


@dataclass(frozen=True)
class Options:
    """A profile's or table's options, split into plain and secret values."""

    plain: dict[str, str] = field(default_factory=dict)
    secret: dict[str, str] = field(default_factory=dict)

    def merged(self) -> dict[str, str]:
        return {**self.plain, **self.secret}


def check_connector(connector: str) -> None:
    """Refuse a connector that cannot be declared (unknown, or the implicit preview)."""
    if connector not in CONNECTOR_OPTIONS:
        known = ", ".join(sorted(CONNECTOR_OPTIONS))
        raise BadRequestError(f"unknown connector '{connector}'; known connectors: {known}",
                              details=[{"field": "connector"}])


def option_text(value: OptionValue) -> str:
    """An option value as SQL would give it: a string (booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def split_options(connector: str, config: Mapping[str, OptionValue],
                  secrets: Mapping[str, str]) -> Options:
    """Plain and secret options; an option the connector does not know is a 400 naming it."""
    check_connector(connector)
    known = CONNECTOR_OPTIONS[connector]
    plain: dict[str, str] = {}
    secret: dict[str, str] = {}
    for source, values in (("config", config), ("secrets", secrets)):
        for raw_name, value in values.items():
            name = raw_name.lower()
            if name == "connector":
                raise BadRequestError("'connector' is a field of its own, not an option",
                                      details=[{"option": name}])
            if name not in known:
                raise BadRequestError(
                    f"unknown option '{name}' for connector '{connector}'; known options: "
                    f"{', '.join(sorted(known))}", details=[{"option": name, "in": source}])
            if name in plain or name in secret:
                raise BadRequestError(f"option '{name}' is given twice (config and secrets)",
                                      details=[{"option": name}])
            is_secret = source == "secrets" or is_secret_option(name)
            (secret if is_secret else plain)[name] = option_text(value)
    return Options(plain=plain, secret=secret)


def masked(secret_names: Mapping[str, object]) -> dict[str, str]:
    """The secrets as responses show them: names with a marker, never a value."""
    return dict.fromkeys(sorted(secret_names), SECRET_PLACEHOLDER)


def placeholders(secret_names: Mapping[str, object]) -> dict[str, str]:
    """Secret options as planning sees them."""
    return dict.fromkeys(secret_names, SECRET_PLACEHOLDER)


def build_table(definition: TableDefinition,
                secret_values: Mapping[str, str] | None = None,
                boundary: Boundary = UNCONFINED) -> Table:
    """The planner's catalog entry for ``definition``, held to the tenant's ``boundary``;
    problems are 400s naming the option.

    ``secret_values`` are scrubbed from any message, in case a connector quotes a value.
    """
    try:
        return table_from_definition(definition, boundary)
    except TableDefinitionError as error:
        message = error.message
        for value in (secret_values or {}).values():
            if value:
                message = message.replace(value, SECRET_PLACEHOLDER)
        details = [{"option": error.option}] if error.option else []
        if error.field_name:
            details.append({"field": error.field_name})
        raise BadRequestError(message, details=details) from error


def table_definition(name: str, connector: str, options: Mapping[str, str],
                     fields: list[dict[str, object]]) -> TableDefinition:
    """A stored table's definition (options already merged with its profile's)."""
    return TableDefinition(
        name=name, connector=connector, options=dict(options),
        fields=tuple(FieldDefinition(str(f["name"]), str(f["type"]), bool(f["nullable"]))
                     for f in fields))
