"""The connector option table agrees with what each connector's validation accepts."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from spate.engine.connectors import (
    CONNECTOR_OPTIONS,
    CONNECTORS,
    ColumnDef,
    ConnectorError,
    TableConfig,
)
from spate.engine.connectors.core.metadata import is_secret_option
from spate.engine.connectors.generators.native import GeneratorConnector
from spate.engine.defaults import DEFAULT_IDLE_MICROS

#: A valid table of each connector and role, to which one option at a time is added.
#: Each connector's example tables (``Connector.examples``), by (connector, role): the
#: first is where each declared option is tried; the others are its other modes.
BASES = {(name, role): examples[0] for name, connector in CONNECTORS.items()
         for role, examples in connector.examples.items()}
MODES = {(name, role): examples[1:] for name, connector in CONNECTORS.items()
         for role, examples in connector.examples.items() if len(examples) > 1}
#: Lookup tables need columns and a PRIMARY KEY.
LOOKUP_COLUMNS = (ColumnDef("id", T.StringType()), ColumnDef("name", T.StringType()))
#: A value of the right type for options whose value is not free text.
VALUES = {"idle_micros": str(DEFAULT_IDLE_MICROS), "max_lines_per_batch": "5",
          "framing.newline.max_length": "10", "event_rate": "10", "runtime": "1",
          "message_count": "1", "event_time_interval": "1", "max_events_per_batch": "10",
          "nexmark.base_time_ms": "0", "rate_limited": "true", "wait_for_control": "false",
          "json.unstructured": "true", "framing": "newline", "bad_data": "drop",
          "json.timestamp_format": "rfc3339", "json.decimal_encoding": "number",
          "format": "json", "path": "x.jsonl", "value.type": "string",
          "lookup.cache.ttl": "5 seconds", "lookup.cache.max_bytes": "1000",
          "address": "redis://h", "url": "postgresql://h/db", "target": "hash",
          "source.offset": "earliest", "max_entries_per_batch": "5",
          "connection_type": "standalone"}


#: Options of another format (or bad_data policy) are tried on a table that uses it.
_AVRO = {"format": "avro", "avro.confluent_schema_registry": "true",
         "schema_registry.endpoint": "http://registry:8081"}
FORMAT_BASES = {"avro.": _AVRO, "schema_registry.": _AVRO, "value.subject": _AVRO,
                "protobuf.": {"format": "protobuf"},
                "dead_letter.": {"bad_data": "dead_letter"}}


def _with_format(options: dict[str, str], name: str) -> dict[str, str]:
    for prefix, extra in FORMAT_BASES.items():
        if name.startswith(prefix):
            kept = {k: v for k, v in options.items() if not k.startswith("json.")}
            return {**kept, **extra}
    return options


def _table(connector: str, role: str, options: dict[str, str]) -> TableConfig:
    """A table of ``options``: a lookup table keyed by ``id``; declared columns unless its
    records are unstructured, or it is a generator (whose columns are its own)."""
    if role == "lookup":
        return TableConfig("t", connector, role, options, LOOKUP_COLUMNS, ("id",))
    own_columns = options.get("json.unstructured") == "true" or isinstance(
        CONNECTORS[connector], GeneratorConnector)
    return TableConfig("t", connector, role, options, () if own_columns else LOOKUP_COLUMNS)


def test_every_declarable_connector_has_a_valid_example_for_each_role() -> None:
    assert set(CONNECTOR_OPTIONS) == {n for n, c in CONNECTORS.items() if c.declarable}
    for name in CONNECTOR_OPTIONS:
        connector = CONNECTORS[name]
        assert set(connector.examples) == set(connector.roles), name
        for role, examples in connector.examples.items():
            for options in examples:
                connector.validate(_table(name, role, dict(options)))


@pytest.mark.parametrize(("connector", "role"), list(BASES))
def test_listed_options_are_known_to_the_connector(connector: str, role: str) -> None:
    for name, spec in CONNECTOR_OPTIONS[connector].items():
        if role not in spec.roles or name in ("type", "event_time_field", "watermark_field"):
            continue
        error = _key_error(connector, role, {**_with_format(dict(BASES[(connector, role)]), name),
                                             name: VALUES.get(name, "x")})
        for mode in MODES.get((connector, role), ()):
            if error is not None:
                error = _key_error(connector, role, {**_with_format(dict(mode), name),
                                                     name: VALUES.get(name, "x")})
        assert error is None, (name, error)


def _key_error(connector: str, role: str, options: dict[str, str]) -> str | None:
    """The error naming an option's name (not its value) as at fault, if any."""
    try:
        CONNECTORS[connector].validate(_table(connector, role, options))
    except ConnectorError as error:
        if "unknown option" in str(error) or error.at_key:
            return str(error)
    return None


@pytest.mark.parametrize(("connector", "role"), list(BASES))
def test_options_not_listed_are_unknown_to_the_connector(connector: str, role: str) -> None:
    table = _table(connector, role, {**BASES[(connector, role)], "colour": "red"})
    with pytest.raises(ConnectorError, match="unknown option 'colour'"):
        CONNECTORS[connector].validate(table)


def test_secret_options_are_recognised_by_name() -> None:
    for name in ("password", "sasl.password", "api_key", "auth.token", "client_secret",
                 "credentials", "aws.credential", "key", "ssl.key", "secret_key", "headers"):
        assert is_secret_option(name), name
    for name in ("path", "format", "keyboard", "event_time_field", "monkey", "tokens_per_s",
                 "key.prefix", "key.separator", "routing_key", "headers.count"):
        assert not is_secret_option(name), name
    secrets = {(connector, name) for connector, options in CONNECTOR_OPTIONS.items()
               for name, spec in options.items() if spec.secret}
    assert secrets == {("redis", "password"), ("postgres", "password"), ("mqtt", "password"),
                       ("kafka", "auth.sasl.password"), ("kinesis", "aws_secret_access_key"),
                       ("kinesis", "aws_session_token"), ("rabbitmq", "password"),
                       ("filesystem", "aws_secret_access_key"), ("filesystem", "aws_session_token"),
                       ("nats", "auth.password"), ("websocket", "headers"), ("sse", "headers"),
                       ("polling_http", "headers"), ("webhook", "headers"),
                       ("iceberg", "catalog.password"), ("delta", "aws_secret_access_key"),
                       ("delta", "aws_session_token")} | {
                           (connector, name) for connector in ("kafka", "kinesis", "mqtt",
                                                               "rabbitmq", "nats", "redis")
                           for name in ("schema_registry.api_key", "schema_registry.api_secret")}
