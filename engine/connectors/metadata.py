"""Which WITH options each connector knows, and which of them hold secrets.

The connectors themselves validate option *values* (:mod:`.options`); this
table only names the options, so that settings kept outside a pipeline's SQL
(the API's connection profiles and tables) can be checked option by option and
their secrets kept encrypted. ``tests/engine/connectors/test_metadata.py``
checks every name here against the connector's own validation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from spate.engine.connectors.base import SINK, SOURCE
from spate.engine.connectors.lookup import LOOKUP

_BOTH = frozenset({SOURCE, SINK})
_SOURCES = frozenset({SOURCE})
_SINKS = frozenset({SINK})

# An option is a secret when a word of its name says so ("password",
# "sasl.password", "api_key", "auth.token"): one rule, so a new connector's
# credentials are encrypted without anyone remembering to flag them. "key"
# counts only as the last word: "key.prefix" describes keys, "api_key" is one.
_SECRET_WORD = re.compile(r"(^|[._-])((password|passwd|secret|token|credentials?)($|[._-])"
                          r"|key$)")


@dataclass(frozen=True)
class OptionSpec:
    """One WITH option of a connector."""

    name: str
    #: roles (source, sink, lookup) of the tables that accept it
    roles: frozenset[str]

    @property
    def secret(self) -> bool:
        """Whether values of this option are credentials (stored encrypted, never shown)."""
        return is_secret_option(self.name)


def is_secret_option(name: str) -> bool:
    """Whether an option named ``name`` holds a credential."""
    return _SECRET_WORD.search(name.lower()) is not None


def _specs(roles: frozenset[str], *names: str) -> tuple[OptionSpec, ...]:
    return tuple(OptionSpec(name, roles) for name in names)


_TYPE = _specs(_BOTH, "type")
_SOURCE_TIME = _specs(_SOURCES, "idle_micros", "event_time_field", "watermark_field")
_FORMAT = _specs(_BOTH, "format", "json.timestamp_format", "json.decimal_encoding",
                 "json.unstructured", "framing")
_FORMAT_SOURCE = _specs(_SOURCES, "bad_data", "framing.newline.max_length")

_LOOKUP = frozenset({LOOKUP})
_LOOKUP_TABLE = _specs(_LOOKUP, "type", "username", "password", "lookup.cache.max_bytes",
                       "lookup.cache.ttl")

_OPTIONS: dict[str, tuple[OptionSpec, ...]] = {
    "single_file": (*_TYPE, *_specs(_BOTH, "path", "wait_for_control"), *_FORMAT,
                    *_FORMAT_SOURCE, *_SOURCE_TIME, *_specs(_SOURCES, "max_lines_per_batch")),
    "impulse": (*_TYPE, *_SOURCE_TIME,
                *_specs(_SOURCES, "event_rate", "event_time_interval", "message_count")),
    "nexmark": (*_TYPE, *_SOURCE_TIME,
                *_specs(_SOURCES, "event_rate", "runtime", "rate_limited",
                        "max_events_per_batch", "nexmark.base_time_ms")),
    "stdout": (*_TYPE, *_FORMAT),
    "blackhole": _TYPE,
    "redis": (*_LOOKUP_TABLE,
              *_specs(_LOOKUP, "address", "key.prefix", "key.separator", "value.type", "format",
                      "json.timestamp_format", "json.decimal_encoding", "json.unstructured",
                      "framing")),
    "postgres": (*_LOOKUP_TABLE, *_specs(_LOOKUP, "url", "table", "query")),
}

#: Declarable connectors (``preview`` is implicit) → their options by name.
CONNECTOR_OPTIONS: Mapping[str, Mapping[str, OptionSpec]] = MappingProxyType({
    connector: MappingProxyType({spec.name: spec for spec in specs})
    for connector, specs in _OPTIONS.items()
})
