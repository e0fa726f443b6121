"""Option and column validation of every connector (no Spark needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import types as T

from spate.engine import connectors as connectors_package
from spate.engine.connectors import CONNECTORS, ColumnDef, ConnectorError
from spate.engine.connectors.core.streaming import data_sources
from spate.engine.planner import PlanningError, plan_pipeline
from tests.engine.connectors.support import make_table

VALUE = (ColumnDef("value", T.StringType()),)
JSON_COLUMNS = (ColumnDef("id", T.LongType(), False), ColumnDef("ts", T.TimestampType()))


def _validate(connector: str, role: str = "source", columns: tuple[ColumnDef, ...] = (),
              **options: Any) -> tuple[ColumnDef, ...]:
    return CONNECTORS[connector].validate(make_table(connector, role, columns, **options))


def _error(connector: str, role: str = "source", columns: tuple[ColumnDef, ...] = (),
           **options: Any) -> ConnectorError:
    with pytest.raises(ConnectorError) as caught:
        _validate(connector, role, columns, **options)
    return caught.value


#: The packages of engine/connectors/ that hold no connector of their own.
SHARED_PACKAGES = {"core", "formats"}


def test_every_connector_package_registers_its_connectors() -> None:
    # The registry is the folder: each system's package registers at least one
    # connector, and every registered connector lives in one of them.
    root = Path(connectors_package.__file__).parent
    packages = {p.name for p in root.iterdir() if (p / "__init__.py").exists()}
    homes = {name: type(connector).__module__.split(".")[3] for name, connector in
             CONNECTORS.items()}
    assert set(homes.values()) == packages - SHARED_PACKAGES, homes
    assert all(connector.name == name for name, connector in CONNECTORS.items())


def test_only_data_sources_that_name_themselves_are_registered() -> None:
    """A base several sources share (the HTTP feeds', NATS') is no source of its own:
    Spark is given only the ``spate_*`` sources, each once."""
    names = [source.name() for source in data_sources()]
    assert len(names) == len(set(names)), names
    assert all(name.startswith("spate_") for name in names), names
    assert {"spate_sse", "spate_websocket", "spate_polling_http",
            "spate_nats_core", "spate_nats_jetstream"} <= set(names)


def test_an_unknown_connector_is_answered_with_the_registrys_names() -> None:
    declarable = sorted(name for name, c in CONNECTORS.items() if c.declarable)
    assert "preview" not in declarable and len(declarable) == len(CONNECTORS) - 1
    sql = ("CREATE TABLE t (a TEXT) WITH (connector = 'fluvio', format = 'json');\n"
           "SELECT a FROM t;\n")
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(sql)
    assert caught.value.message.endswith(f"Spate's connectors: {', '.join(declarable)}")


@pytest.mark.parametrize("connector, role, columns, options", [
    ("single_file", "source", JSON_COLUMNS, {"type": "source", "path": "x", "format": "json"}),
    ("single_file", "sink", (), {"type": "sink", "path": "x", "format": "json"}),
    ("impulse", "source", (), {"event_rate": 10}),
    ("nexmark", "source", (), {"event_rate": 10}),
    ("stdout", "sink", (), {"format": "json"}),
    ("blackhole", "sink", (), {}),
])
def test_unknown_option_is_named(connector: str, role: str, columns: tuple[ColumnDef, ...],
                                 options: dict[str, Any]) -> None:
    error = _error(connector, role, columns, bogus_key="1", **options)
    assert error.option == "bogus_key"
    assert "bogus_key" in str(error)


@pytest.mark.parametrize("connector, role, options, option", [
    ("single_file", "source", {"type": "source", "format": "json"}, "path"),
    ("single_file", "source", {"path": "x", "format": "json"}, "type"),
    ("single_file", "source", {"type": "source", "path": "x"}, "format"),
    ("impulse", "source", {}, "event_rate"),
    ("nexmark", "source", {}, "event_rate"),
    ("stdout", "sink", {}, "format"),
])
def test_missing_required_option(connector: str, role: str, options: dict[str, Any],
                                 option: str) -> None:
    error = _error(connector, role, JSON_COLUMNS if connector == "single_file" else (),
                   **options)
    assert error.option == option
    assert option in str(error)


@pytest.mark.parametrize("connector, options, option", [
    ("impulse", {"event_rate": "fast"}, "event_rate"),
    ("impulse", {"event_rate": "0"}, "event_rate"),
    ("impulse", {"event_rate": 1, "message_count": "-1"}, "message_count"),
    ("impulse", {"event_rate": 1, "event_time_interval": "1.5"}, "event_time_interval"),
    ("nexmark", {"event_rate": 1, "runtime": "soon"}, "runtime"),
    ("nexmark", {"event_rate": 1, "rate_limited": "maybe"}, "rate_limited"),
    ("nexmark", {"event_rate": 1, "max_events_per_batch": "0"}, "max_events_per_batch"),
    ("nexmark", {"event_rate": 1, "idle_micros": "x"}, "idle_micros"),
    ("nexmark", {"event_rate": 1, "nexmark__base_time_ms": "yesterday"}, "nexmark.base_time_ms"),
])
def test_ill_typed_option(connector: str, options: dict[str, Any], option: str) -> None:
    error = _error(connector, **options)
    assert error.option == option
    assert f"'{option}'" in str(error)


@pytest.mark.parametrize("connector, role, options", [
    ("impulse", "source", {"event_rate": 1}),
    ("nexmark", "source", {"event_rate": 1}),
    ("blackhole", "sink", {}),
])
@pytest.mark.parametrize("option", ["format", "json__timestamp_format", "bad_data", "framing"])
def test_format_options_rejected_without_a_format(connector: str, role: str,
                                                  options: dict[str, Any], option: str) -> None:
    error = _error(connector, role, **options, **{option: "json"})
    assert error.option == option.replace("__", ".")


def test_format_values() -> None:
    base = {"type": "source", "path": "x"}
    assert _error("single_file", columns=JSON_COLUMNS, format="avro", **base).option == "format"
    debezium = _error("single_file", columns=JSON_COLUMNS, format="debezium_json", **base)
    assert "needs a PRIMARY KEY" in str(debezium)  # the rest: test_debezium.py
    raw = _error("single_file", columns=VALUE, format="raw_string",
                 json__timestamp_format="unix_millis", **base)
    assert raw.option == "json.timestamp_format"
    bad = _error("single_file", columns=JSON_COLUMNS, format="json", bad_data="ignore", **base)
    assert bad.option == "bad_data"
    assert _error("single_file", columns=JSON_COLUMNS, format="json",
                  json__timestamp_format="iso", **base).option == "json.timestamp_format"


def test_single_value_formats_need_one_value_column() -> None:
    base = {"type": "source", "path": "x"}
    assert _validate("single_file", format="raw_string", **base) == VALUE
    assert _validate("single_file", columns=VALUE, format="json", json__unstructured=True,
                     **base) == VALUE
    error = _error("single_file", columns=JSON_COLUMNS, format="raw_string", **base)
    assert "value TEXT" in str(error)
    error = _error("single_file", role="sink", columns=JSON_COLUMNS, format="raw_string",
                   type="sink", path="x")
    assert "value TEXT" in str(error)


def test_json_source_needs_supported_columns() -> None:
    base = {"type": "source", "path": "x", "format": "json"}
    assert "columns declared" in str(_error("single_file", **base))
    interval = (ColumnDef("d", T.DayTimeIntervalType()),)
    assert "cannot be read from JSON" in str(_error("single_file", columns=interval, **base))


def test_role_rules() -> None:
    lookup = _error("single_file", columns=JSON_COLUMNS, type="lookup", path="x", format="json")
    assert lookup.option == "type"
    assert _error("impulse", type="sink", event_rate=1).option == "type"
    assert _validate("impulse", type="source", event_rate=1)
    assert _error("stdout", "sink", type="source", format="json").option == "type"
    mismatch = _error("single_file", "sink", JSON_COLUMNS, type="source", path="x",
                      format="json")
    assert "declared as a source" in str(mismatch)


def test_source_only_options_rejected_on_sinks() -> None:
    for option in ("bad_data", "idle_micros", "event_time_field", "max_lines_per_batch"):
        error = _error("single_file", "sink", type="sink", path="x", format="json",
                       **{option: "1"})
        assert error.option == option
    assert _error("stdout", "sink", format="json", watermark_field="ts").option == \
        "watermark_field"


def test_accepted_common_source_options() -> None:
    columns = _validate("single_file", columns=JSON_COLUMNS, type="source", path="x",
                        format="json", framing="newline", framing__newline__max_length=100,
                        wait_for_control=True, idle_micros=-1, event_time_field="ts",
                        watermark_field="ts", bad_data="drop", max_lines_per_batch=10,
                        json__timestamp_format="unix_millis", json__decimal_encoding="string")
    assert columns == JSON_COLUMNS


def test_fixed_schemas() -> None:
    impulse = _validate("impulse", event_rate=1)
    assert [(c.name, c.nullable) for c in impulse] == [("counter", False),
                                                        ("subtask_index", False)]
    declared = (ColumnDef("counter", T.LongType()), ColumnDef("subtask_index", T.LongType()))
    assert _validate("impulse", columns=declared, event_rate=1) == impulse
    wrong = (ColumnDef("counter", T.IntegerType()),)
    assert "fixed schema" in str(_error("impulse", columns=wrong, event_rate=1))
    nexmark = _validate("nexmark", event_rate=1)
    assert [c.name for c in nexmark] == ["person", "auction", "bid"]
    assert _validate("nexmark", columns=nexmark, event_rate=1) == nexmark


def test_preview_is_not_declarable() -> None:
    with pytest.raises(ConnectorError, match="cannot be declared"):
        _validate("preview", "sink")


def test_boundedness() -> None:
    def bounded(connector: str, **options: Any) -> bool:
        return CONNECTORS[connector].is_bounded(make_table(connector, **options))

    assert bounded("impulse", event_rate=1, message_count=5)
    assert not bounded("impulse", event_rate=1)
    assert bounded("nexmark", event_rate=1, runtime=2)
    assert not bounded("nexmark", event_rate=1)
    assert bounded("single_file", type="source", path="x", format="raw_string")
