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
from spate.engine.defaults import DEFAULT_IDLE_MICROS

#: A valid table of each connector and role, to which one option at a time is added.
BASES = {
    ("single_file", "source"): {"type": "source", "format": "json", "path": "in.jsonl",
                                "json.unstructured": "true"},
    ("single_file", "sink"): {"type": "sink", "format": "json", "path": "out.jsonl"},
    ("delta", "sink"): {"path": "lake/t"},
    ("iceberg", "sink"): {"catalog.uri": "postgresql+psycopg://u@h/db",
                          "catalog.warehouse": "lake", "table_name": "t"},
    ("impulse", "source"): {"event_rate": "10"},
    ("nexmark", "source"): {"event_rate": "10"},
    ("stdout", "sink"): {"format": "json"},
    ("blackhole", "sink"): {},
    ("redis", "lookup"): {"address": "redis://h", "format": "json"},
    ("redis", "source"): {"type": "source", "address": "redis://h", "stream": "s",
                          "format": "json", "json.unstructured": "true"},
    ("redis", "sink"): {"type": "sink", "address": "redis://h", "format": "json",
                        "target": "hash", "target.key_prefix": "h", "target.field_column": "f"},
    ("postgres", "lookup"): {"url": "postgresql://h/db", "table": "t"},
    ("mqtt", "source"): {"type": "source", "format": "json", "url": "tcp://h", "topic": "a/#"},
    ("mqtt", "sink"): {"type": "sink", "format": "json", "url": "tcp://h", "topic": "a"},
    ("kafka", "source"): {"type": "source", "bootstrap_servers": "h:9092", "topic": "t",
                          "format": "json", "json.unstructured": "true"},
    ("kafka", "sink"): {"type": "sink", "bootstrap_servers": "h:9092", "topic": "t",
                        "format": "json"},
    ("kinesis", "source"): {"type": "source", "format": "json", "json.unstructured": "true",
                            "stream_name": "s", "aws_region": "us-east-1",
                            "aws_access_key_id": "k", "aws_secret_access_key": "s"},
    ("kinesis", "sink"): {"type": "sink", "format": "json", "stream_name": "s",
                          "aws_region": "us-east-1", "aws_access_key_id": "k",
                          "aws_secret_access_key": "s"},
    ("rabbitmq", "source"): {"type": "source", "format": "json", "json.unstructured": "true",
                             "host": "h", "stream": "s"},
    ("rabbitmq", "sink"): {"type": "sink", "format": "json", "host": "h", "stream": "s"},
    ("nats", "source"): {"type": "source", "format": "json", "json.unstructured": "true",
                         "servers": "nats://h:4222", "nats.stream": "s"},
    ("nats", "sink"): {"type": "sink", "format": "json", "servers": "nats://h:4222",
                       "nats.subject": "s"},
    ("websocket", "source"): {"format": "json", "json.unstructured": "true",
                              "endpoint": "ws://h/"},
    ("sse", "source"): {"format": "json", "json.unstructured": "true", "endpoint": "http://h/"},
    ("polling_http", "source"): {"format": "json", "json.unstructured": "true",
                                 "endpoint": "http://h/", "method": "post"},
    ("webhook", "sink"): {"format": "json", "endpoint": "http://h/"},
}
#: Options that apply in another mode of a connector are tried on these tables.
MODES = {("rabbitmq", "source"): {"type": "source", "format": "json", "json.unstructured": "true",
                                  "host": "h", "mode": "queue", "queue": "q"},
         ("rabbitmq", "sink"): {"type": "sink", "format": "json", "host": "h", "mode": "queue",
                                "exchange": "e"},
         ("delta", "sink"): {"path": "s3://bucket/t"}}
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
    if role == "lookup":
        return TableConfig("t", connector, role, options, LOOKUP_COLUMNS, ("id",))
    return TableConfig("t", connector, role, options, ())


def test_every_declarable_connector_is_listed() -> None:
    assert set(CONNECTOR_OPTIONS) == set(CONNECTORS) - {"preview"}


@pytest.mark.parametrize(("connector", "role"), list(BASES))
def test_listed_options_are_known_to_the_connector(connector: str, role: str) -> None:
    for name, spec in CONNECTOR_OPTIONS[connector].items():
        if role not in spec.roles or name in ("type", "event_time_field", "watermark_field"):
            continue
        error = _key_error(connector, role, {**_with_format(BASES[(connector, role)], name),
                                             name: VALUES.get(name, "x")})
        if error is not None and (connector, role) in MODES:
            error = _key_error(connector, role, {**_with_format(MODES[(connector, role)], name),
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
