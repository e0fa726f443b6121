"""A connector's WITH options, each declared once: its name, the tables that take it,
its type, whether it is required, its default and what it means.

The declaration is the one home of an option. Connectors read their options
through it (:class:`~spate.engine.connectors.core.options.OptionReader` takes an
:class:`OptionSpec` where it takes a name, and its default from it), the API
serves it (``GET /connectors``: the console builds a connection's form from it,
and the API keeps secret options encrypted), and the option tables of
``docs/sql/connectors.md`` are generated from it (``docs/tools/connectors.py``).
``tests/engine/connectors/core/test_metadata.py`` checks every declared name against
the connector's own validation.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from spate.engine.connectors.core.base import LOOKUP, SINK, SOURCE
from spate.engine.defaults import DEFAULT_IDLE_MICROS

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

# The types of option values (what a form offers for them).
TEXT = "text"
INTEGER = "integer"
NUMBER = "number"
BOOLEAN = "boolean"
CHOICE = "choice"
#: A length of time: ``'10s'``, ``'5 minutes'``, ``INTERVAL '1' MINUTE``.
DURATION = "duration"
#: A size in bytes: ``'64MB'``, ``'1GB'``.
SIZE = "size"
KINDS = (TEXT, INTEGER, NUMBER, BOOLEAN, CHOICE, DURATION, SIZE)


@dataclass(frozen=True)
class OptionSpec:
    """One WITH option of a connector."""

    name: str
    #: roles (source, sink, lookup) of the tables that accept it
    roles: frozenset[str]
    #: what it means, in a sentence or two (Markdown)
    description: str = ""
    #: one of :data:`KINDS`
    kind: str = TEXT
    #: whether every table of its roles must give it
    required: bool = False
    #: when only some tables must: which ones, in words ("with `s3://` paths")
    required_when: str = ""
    #: the value an absent option has (of the kind's Python type); None: no value
    default: Any = None
    #: the default in words when it is not one value ("the first `TIMESTAMP` column")
    default_text: str = ""
    #: the values a ``choice`` takes
    choices: tuple[str, ...] = ()

    @property
    def secret(self) -> bool:
        """Whether values of this option are credentials (stored encrypted, never shown)."""
        return is_secret_option(self.name)

    @property
    def shown_default(self) -> str:
        """The default as a user writes it ('' when there is none)."""
        if self.default_text:
            return self.default_text
        if self.default is None:
            return ""
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        return str(self.default)

    def for_roles(self, roles: frozenset[str]) -> OptionSpec:
        """The same option, accepted by tables of ``roles``."""
        return replace(self, roles=roles)

    def described(self, description: str, **changes: Any) -> OptionSpec:
        """The same option as one connector describes it."""
        return replace(self, description=description, **changes)


def option(name: str, roles: frozenset[str], description: str, *, kind: str | None = None,
           required: bool = False, required_when: str = "", default: Any = None,
           default_text: str = "", choices: tuple[str, ...] = ()) -> OptionSpec:
    """Declare an option; its kind follows from ``choices`` or ``default`` when not given."""
    if kind is None:
        kind = (CHOICE if choices else BOOLEAN if isinstance(default, bool)
                else INTEGER if isinstance(default, int)
                else NUMBER if isinstance(default, float) else TEXT)
    if kind not in KINDS:
        raise ValueError(f"option '{name}': kind '{kind}' is not one of {KINDS}")
    if choices and default is not None and default not in choices:
        raise ValueError(f"option '{name}': default '{default}' is not one of its choices")
    return OptionSpec(name, roles, description, kind, required, required_when, default,
                      default_text, choices)


def is_secret_option(name: str) -> bool:
    """Whether an option named ``name`` holds a credential."""
    lowered = name.lower()
    return lowered not in _NOT_SECRET and _SECRET_WORD.search(lowered) is not None


def specs(roles: frozenset[str], *names: str) -> tuple[OptionSpec, ...]:
    """Options ``names``, each accepted by tables of ``roles`` (not described yet)."""
    return tuple(OptionSpec(name, roles) for name in names)


# Options several connectors share, each a constant the code reading it names.
TYPE_OPTION = option("type", BOTH, "`source` or `sink`; required when the connector can be "
                     "either", choices=(SOURCE, SINK))
IDLE_MICROS = option("idle_micros", SOURCES, "microseconds of wall-clock time after which a "
                     "partition without rows stops holding the watermark back",
                     default=DEFAULT_IDLE_MICROS)
EVENT_TIME_FIELD = option("event_time_field", SOURCES, "the `TIMESTAMP` column of event time, "
                          "when no `WATERMARK FOR` is declared")
WATERMARK_FIELD = option("watermark_field", SOURCES, "the column holding each row's "
                         "watermark, when no `WATERMARK FOR` is declared")
FORMAT_OPTION = option("format", BOTH, "how records are encoded: `json`, `debezium_json`, "
                       "`raw_string`, `raw_bytes`, `avro` or `protobuf` ([formats](#formats))",
                       required=True)
JSON_TIMESTAMP_FORMAT = option(
    "json.timestamp_format", BOTH, "`json`, `debezium_json`: `TIMESTAMP` values as `rfc3339` "
    "text or `unix_millis` integers (a `debezium_json` source reads those as nanoseconds: "
    "[timestamps](updating.md#timestamps))", choices=("rfc3339", "unix_millis"),
    default_text="`rfc3339` (`unix_millis` for `debezium_json`)")
JSON_DECIMAL_ENCODING = option(
    "json.decimal_encoding", BOTH, "`json`, `debezium_json`: `DECIMAL` values as a `number`, "
    "a `string` or `bytes` (Debezium's base64 of the unscaled value)",
    choices=("number", "string", "bytes"), default_text="`number` (`bytes` for `debezium_json`)")
JSON_UNSTRUCTURED = option("json.unstructured", BOTH, "`json`: the whole record is one column "
                           "`value TEXT`", default=False)
FRAMING = option("framing", BOTH, "how records are split; `newline` is the only framing",
                 choices=("newline",), default="newline")
BAD_DATA = option("bad_data", SOURCES, "what an undecodable record does: `fail` the pipeline, "
                  "`drop` it (counted) or write it to `dead_letter.table` "
                  "([bad data](#bad-data))", choices=("fail", "drop", "dead_letter"),
                  default="fail")
FRAMING_MAX_LENGTH = option("framing.newline.max_length", SOURCES, "lines longer than this "
                            "many bytes are cut before decoding", kind=INTEGER)
DEAD_LETTER_TABLE = option("dead_letter.table", SOURCES, "with `bad_data = 'dead_letter'`: the "
                           "sink table undecodable records go to "
                           "([dead letters](#dead-letters))")
AVRO_SCHEMA = option("avro.schema", BOTH, "`avro`: the writer schema's JSON (an Avro `record`)")
AVRO_REGISTRY = option("avro.confluent_schema_registry", BOTH, "`avro`: writer schemas come "
                       "from a schema registry with Confluent's REST API", default=False)
AVRO_WIRE_FORMAT = option("avro.confluent_wire_format", BOTH, "`avro`: records carry "
                          "Confluent's header: byte 0, then the schema id (4 bytes, "
                          "big-endian)", kind=BOOLEAN,
                          default_text="`false` (`true` with the registry)")
REGISTRY_ENDPOINT = option("schema_registry.endpoint", BOTH, "`avro`: the registry's "
                           "`http://` or `https://` URL; several, comma-separated, are tried "
                           "in turn")
REGISTRY_API_KEY = option("schema_registry.api_key", BOTH, "`avro`: the registry's user "
                          "(HTTP basic auth)")
REGISTRY_API_SECRET = option("schema_registry.api_secret", BOTH, "`avro`: the registry's "
                             "password")
AVRO_SCHEMA_ID = option("avro.schema_id", SINKS, "`avro`: the id a sink writes in each header "
                        "when it uses the wire format without a registry", kind=INTEGER)
VALUE_SUBJECT = option("value.subject", SINKS, "`avro`: the subject a sink registers its "
                       "writer schema under", default_text="`<topic>-value`")
PROTOBUF_SCHEMA_ID = option("protobuf.schema_id", SINKS, "`protobuf`: with the wire format, "
                            "the id a sink writes in each header (required then)",
                            kind=INTEGER)
PROTOBUF_DESCRIPTOR_FILE = option("protobuf.descriptor_file", BOTH, "`protobuf`: a compiled "
                                  "`FileDescriptorSet` in your storage, as `protoc "
                                  "--include_imports --descriptor_set_out` writes it")
PROTOBUF_DESCRIPTOR = option("protobuf.descriptor", BOTH, "`protobuf`: the same, base64, "
                             "inline")
PROTOBUF_MESSAGE_NAME = option("protobuf.message_name", BOTH, "`protobuf`: the message's full "
                               "name, e.g. `shop.Order`")
PROTOBUF_WIRE_FORMAT = option("protobuf.confluent_wire_format", BOTH, "`protobuf`: records "
                              "carry Confluent's header: byte 0, the schema id, the message "
                              "indexes", default=False)
LOOKUP_ROLES = frozenset({LOOKUP})
LOOKUP_TYPE = option("type", LOOKUP_ROLES, "must be `lookup` when given",
                     choices=(LOOKUP,), default=LOOKUP)
LOOKUP_USERNAME = option("username", LOOKUP_ROLES, "the user to log in as")
LOOKUP_PASSWORD = option("password", LOOKUP_ROLES, "its password")
CACHE_MAX_BYTES = option("lookup.cache.max_bytes", LOOKUP_ROLES, "bound, in bytes, of the "
                         "cache of looked-up rows each worker process keeps; `0` disables it",
                         kind=INTEGER, default_text="no cache")
CACHE_TTL = option("lookup.cache.ttl", LOOKUP_ROLES, "how long a cached row (or a cached "
                   "absence) is trusted: `INTERVAL '30' SECOND` or `'30 seconds'`; given "
                   "alone, the cache holds up to 16 MiB", kind=DURATION,
                   default_text="entries live until evicted")

# The groups connectors declare whole.
TYPE = (TYPE_OPTION,)
SOURCE_TIME = (IDLE_MICROS, EVENT_TIME_FIELD, WATERMARK_FIELD)
FORMAT = (FORMAT_OPTION, JSON_TIMESTAMP_FORMAT, JSON_DECIMAL_ENCODING, JSON_UNSTRUCTURED,
          FRAMING)
FORMAT_SOURCE = (BAD_DATA, FRAMING_MAX_LENGTH)
#: Options of the binary formats (avro, protobuf) message connectors take.
FORMAT_BINARY = (AVRO_SCHEMA, AVRO_REGISTRY, AVRO_WIRE_FORMAT, REGISTRY_ENDPOINT,
                 REGISTRY_API_KEY, REGISTRY_API_SECRET, AVRO_SCHEMA_ID, VALUE_SUBJECT,
                 PROTOBUF_SCHEMA_ID, PROTOBUF_DESCRIPTOR_FILE, PROTOBUF_DESCRIPTOR,
                 PROTOBUF_MESSAGE_NAME, PROTOBUF_WIRE_FORMAT)
#: bad_data = 'dead_letter' (the sources that support it).
DEAD_LETTER = (DEAD_LETTER_TABLE,)
#: What a message broker's table takes besides its connection and ``FORMAT``: reading
#: records (bad data, framing), the binary formats, dead letters and event time.
MESSAGE_RECORDS = (*FORMAT_SOURCE, *FORMAT_BINARY, *DEAD_LETTER, *SOURCE_TIME)
LOOKUP_TABLE = (LOOKUP_TYPE, LOOKUP_USERNAME, LOOKUP_PASSWORD, CACHE_MAX_BYTES, CACHE_TTL)
