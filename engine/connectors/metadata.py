"""Naming a connector's WITH options, and which of them hold secrets.

The connectors themselves validate option *values* (:mod:`.options`); each
names its options in its ``options`` class attribute, built from the groups
here, so that settings kept outside a pipeline's SQL (the API's connection
profiles and tables) can be checked option by option and their secrets kept
encrypted. ``tests/engine/connectors/test_metadata.py`` checks every name
against the connector's own validation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from spate.engine.connectors.base import LOOKUP, SINK, SOURCE

BOTH = frozenset({SOURCE, SINK})
SOURCES = frozenset({SOURCE})
SINKS = frozenset({SINK})

# An option is a secret when a word of its name says so ("password",
# "sasl.password", "api_key", "auth.token"): one rule, so a new connector's
# credentials are encrypted without anyone remembering to flag them. "key"
# counts only as the last word: "key.prefix" describes keys, "api_key" is one.
# HTTP "headers" count too: they carry the Authorization of most APIs.
_SECRET_WORD = re.compile(r"(^|[._-])((password|passwd|secret|token|credentials?)($|[._-])"
                          r"|key$|headers$)")
#: Names the rule above would take for secrets that only address messages.
_NOT_SECRET = frozenset({"routing_key"})


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
    lowered = name.lower()
    return lowered not in _NOT_SECRET and _SECRET_WORD.search(lowered) is not None


def specs(roles: frozenset[str], *names: str) -> tuple[OptionSpec, ...]:
    """Options ``names``, each accepted by tables of ``roles``."""
    return tuple(OptionSpec(name, roles) for name in names)


# Option groups several connectors share.
TYPE = specs(BOTH, "type")
SOURCE_TIME = specs(SOURCES, "idle_micros", "event_time_field", "watermark_field")
FORMAT = specs(BOTH, "format", "json.timestamp_format", "json.decimal_encoding",
               "json.unstructured", "framing")
FORMAT_SOURCE = specs(SOURCES, "bad_data", "framing.newline.max_length")
#: Options of the binary formats (avro, protobuf) message connectors take.
FORMAT_BINARY = (*specs(BOTH, "avro.schema", "avro.confluent_schema_registry",
                        "avro.confluent_wire_format", "schema_registry.endpoint",
                        "schema_registry.api_key", "schema_registry.api_secret"),
                 *specs(SINKS, "avro.schema_id", "value.subject", "protobuf.schema_id"),
                 *specs(BOTH, "protobuf.descriptor_file", "protobuf.descriptor",
                        "protobuf.message_name", "protobuf.confluent_wire_format"))
#: bad_data = 'dead_letter' (the sources that support it).
DEAD_LETTER = specs(SOURCES, "dead_letter.table")
LOOKUP_ROLES = frozenset({LOOKUP})
LOOKUP_TABLE = specs(LOOKUP_ROLES, "type", "username", "password", "lookup.cache.max_bytes",
                     "lookup.cache.ttl")
