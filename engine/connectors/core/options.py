"""Typed, consuming access to a table's WITH options.

Every connector reads its options through an :class:`OptionReader`; whatever is
left unread at the end is an unknown option and is rejected by name (see
docs/sql/ddl.md, WITH options).  Each read names the option by its declaration
(:class:`~spate.engine.connectors.core.metadata.OptionSpec`), whose default and
choices it takes unless the call gives its own; a plain name is read as is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, TypeAlias

from spate.engine.connectors.core.base import LOOKUP, SINK, SOURCE, ConnectorError, TableConfig
from spate.engine.connectors.core.metadata import (
    BAD_DATA,
    EVENT_TIME_FIELD,
    FRAMING_MAX_LENGTH,
    IDLE_MICROS,
    TYPE_OPTION,
    WATERMARK_FIELD,
    OptionSpec,
)

_TRUE = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "off", "0"})

#: Options of Arroyo's dialect that Spate does not implement yet: refused as such
#: rather than as unknown names (a pipeline written for Arroyo may carry them).
NOT_YET_OPTIONS = frozenset({
    "connection_profile", "json.include_schema", "json.confluent_schema_registry",
    "json.schema_registry",
})
#: Option families of formats Spate has not implemented yet.
NOT_YET_OPTION_PREFIXES = ("parquet.", "raw_bytes.")


#: An option, by its declaration or (for options not declared yet) its name.
Key: TypeAlias = str | OptionSpec
#: "Take the declaration's default" (a call may still pass None: no default).
_DECLARED: Any = object()


def _name(key: Key) -> str:
    return key.name if isinstance(key, OptionSpec) else key


def _default(key: Key, given: Any) -> Any:
    if given is not _DECLARED:
        return given
    return key.default if isinstance(key, OptionSpec) else None


class OptionReader:
    """Reads options of one table, remembering which ones were consumed."""

    def __init__(self, table: TableConfig) -> None:
        self.table = table
        self._values = {key.lower(): value for key, value in table.options.items()}
        self._consumed: set[str] = set()

    def __contains__(self, key: Key) -> bool:
        return _name(key) in self._values

    def peek(self, key: Key, default: str | None = None) -> str | None:
        """The raw value of ``key`` without consuming it (another reader will)."""
        return self._values.get(_name(key), default)

    def _error(self, key: Key, message: str) -> ConnectorError:
        return ConnectorError(f"option '{_name(key)}' {message}", option=_name(key))

    def string(self, key: Key, default: Any = _DECLARED, *,
               required: bool = False) -> str | None:
        """The raw value of ``key``; raises if ``required`` and absent or empty."""
        name = _name(key)
        self._consumed.add(name)
        value = self._values.get(name)
        if value is None:
            if required:
                raise ConnectorError(
                    f"connector '{self.table.connector}' needs option '{name}'", option=name)
            return _default(key, default)  # type: ignore[no-any-return]
        if required and not value.strip():
            raise self._error(name, "must not be empty")
        return value

    def required(self, key: Key) -> str:
        """The value of a required option."""
        value = self.string(key, required=True)
        assert value is not None
        return value

    def choice(self, key: Key, choices: Iterable[str] | None = None,
               default: Any = _DECLARED) -> str | None:
        """A value from ``choices`` (by default the declaration's; case-insensitive), or
        ``default`` when absent."""
        value = self.string(key, None)
        if value is None:
            return _default(key, default)  # type: ignore[no-any-return]
        allowed = list(choices if choices is not None
                       else key.choices if isinstance(key, OptionSpec) else ())
        if value.lower() not in allowed:
            quoted = ", ".join(f"'{c}'" for c in allowed)
            raise self._error(key, f"must be one of {quoted}, not '{value}'")
        return value.lower()

    def boolean(self, key: Key, default: Any = _DECLARED) -> bool:
        """A boolean (true/false, yes/no, on/off, 1/0)."""
        value = self.string(key, None)
        if value is None:
            return bool(_default(key, default))
        lowered = value.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise self._error(key, f"must be true or false, not '{value}'")

    def integer(self, key: Key, default: Any = _DECLARED, *, minimum: int | None = None,
                required: bool = False) -> int | None:
        """An integer, at least ``minimum`` if given."""
        value = self.string(key, None, required=required)
        if value is None:
            return _default(key, default)  # type: ignore[no-any-return]
        try:
            number = int(value.strip())
        except ValueError:
            raise self._error(key, f"must be an integer, not '{value}'") from None
        if minimum is not None and number < minimum:
            raise self._error(key, f"must be at least {minimum}, not {number}")
        return number

    def number(self, key: Key, default: Any = _DECLARED, *, positive: bool = False,
               required: bool = False) -> float | None:
        """A finite float, strictly positive if ``positive``."""
        value = self.string(key, None, required=required)
        if value is None:
            return _default(key, default)  # type: ignore[no-any-return]
        try:
            number = float(value.strip())
        except ValueError:
            raise self._error(key, f"must be a number, not '{value}'") from None
        if not math.isfinite(number):
            raise self._error(key, f"must be a finite number, not '{value}'")
        if positive and number <= 0:
            raise self._error(key, f"must be greater than 0, not {value}")
        return number

    def reject(self, key: Key, reason: str) -> None:
        """Raise if ``key`` is given: it is known but not accepted here, for ``reason``."""
        name = _name(key)
        if name in self._values:
            raise ConnectorError(f"option '{name}' {reason}", option=name, at_key=True)

    def finish(self) -> None:
        """Raise on the first option nobody consumed."""
        for key in self._values:
            if key not in self._consumed and (key in NOT_YET_OPTIONS
                                              or key.startswith(NOT_YET_OPTION_PREFIXES)):
                raise ConnectorError(
                    f"option '{key}' is not supported yet (by {self.table.connector} "
                    f"{self.table.role} '{self.table.name}'); remove it", option=key,
                    at_key=True)
            if key not in self._consumed:
                raise ConnectorError(
                    f"unknown option '{key}' for {self.table.connector} {self.table.role} "
                    f"'{self.table.name}'; remove it", option=key, at_key=True)


def check_role(options: OptionReader, roles: frozenset[str]) -> str:
    """Validate the ``type`` option against the connector's roles; return the role.

    ``type`` is required when a connector has several roles and optional (but must
    agree) when it has one (docs/sql/ddl.md).
    """
    table = options.table
    name = TYPE_OPTION.name
    declared = options.string(TYPE_OPTION)
    if declared is not None:
        declared = declared.strip().lower()
        if declared == LOOKUP:
            raise ConnectorError(
                f"connector '{table.connector}' cannot be a lookup table", option=name)
        if declared not in (SOURCE, SINK):
            raise ConnectorError(
                f"option '{name}' must be 'source' or 'sink', not '{declared}'", option=name)
        if declared not in roles:
            raise ConnectorError(
                f"connector '{table.connector}' can only be a {_roles_text(roles)}, "
                f"not a {declared}", option=name)
    elif len(roles) > 1:
        raise ConnectorError(
            f"connector '{table.connector}' needs option '{name}' = 'source' or 'sink'",
            option=name)
    role = declared or next(iter(roles))
    if table.role != role:
        raise ConnectorError(
            f"table '{table.name}' is used as a {table.role} but is declared as a {role}",
            option=name if declared else None)
    return role


def _roles_text(roles: frozenset[str]) -> str:
    return " or ".join(sorted(roles))


def check_source_options(options: OptionReader) -> None:
    """Type-check the source options the planner interprets (docs/sql/ddl.md)."""
    options.integer(IDLE_MICROS)
    for key in (EVENT_TIME_FIELD, WATERMARK_FIELD):
        if key in options:
            options.required(key)


def reject_source_options(options: OptionReader) -> None:
    """Sinks: source-only options are errors with a precise reason."""
    for key in (IDLE_MICROS, EVENT_TIME_FIELD, WATERMARK_FIELD, BAD_DATA, FRAMING_MAX_LENGTH):
        options.reject(key, f"applies to sources only; remove it from sink "
                            f"'{options.table.name}'")
