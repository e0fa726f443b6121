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
from spate.engine.connectors.metadata import is_secret_option
from spate.engine.defaults import DEFAULT_IDLE_MICROS

#: A valid table of each connector and role, to which one option at a time is added.
BASES = {
    ("single_file", "source"): {"type": "source", "format": "json", "path": "in.jsonl",
                                "json.unstructured": "true"},
    ("single_file", "sink"): {"type": "sink", "format": "json", "path": "out.jsonl"},
    ("impulse", "source"): {"event_rate": "10"},
    ("nexmark", "source"): {"event_rate": "10"},
    ("stdout", "sink"): {"format": "json"},
    ("blackhole", "sink"): {},
    ("redis", "lookup"): {"address": "redis://h", "format": "json"},
    ("postgres", "lookup"): {"url": "postgresql://h/db", "table": "t"},
}
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
          "address": "redis://h", "url": "postgresql://h/db"}


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
        options = {**BASES[(connector, role)], name: VALUES.get(name, "x")}
        table = _table(connector, role, options)
        try:
            CONNECTORS[connector].validate(table)
        except ConnectorError as error:
            assert "unknown option" not in str(error), (name, str(error))
            assert not error.at_key, (name, str(error))


@pytest.mark.parametrize(("connector", "role"), list(BASES))
def test_options_not_listed_are_unknown_to_the_connector(connector: str, role: str) -> None:
    table = _table(connector, role, {**BASES[(connector, role)], "colour": "red"})
    with pytest.raises(ConnectorError, match="unknown option 'colour'"):
        CONNECTORS[connector].validate(table)


def test_secret_options_are_recognised_by_name() -> None:
    for name in ("password", "sasl.password", "api_key", "auth.token", "client_secret",
                 "credentials", "aws.credential", "key", "ssl.key", "secret_key"):
        assert is_secret_option(name), name
    for name in ("path", "format", "keyboard", "event_time_field", "monkey", "tokens_per_s",
                 "key.prefix", "key.separator"):
        assert not is_secret_option(name), name
    secrets = {(connector, name) for connector, options in CONNECTOR_OPTIONS.items()
               for name, spec in options.items() if spec.secret}
    assert secrets == {("redis", "password"), ("postgres", "password"), ("nats", "auth.password")}
