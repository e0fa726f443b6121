"""The planner's external catalog: tables defined outside the SQL (connection tables)."""

from __future__ import annotations

import pytest

from spate.engine.planner import PlanningError, plan_pipeline
from spate.engine.planner.external import (
    FieldDefinition,
    TableDefinition,
    TableDefinitionError,
    table_from_definition,
    tables_from_definitions,
)

ORDERS = TableDefinition(
    name="orders", connector="single_file",
    options={"type": "source", "format": "json", "path": "orders.jsonl",
             "event_time_field": "ts"},
    fields=(FieldDefinition("id", "BIGINT", nullable=False), FieldDefinition("price", "DOUBLE"),
            FieldDefinition("ts", "TIMESTAMP", nullable=False)),
)
OUT = TableDefinition(name="totals", connector="blackhole")
WINDOWED = """
INSERT INTO totals
SELECT TUMBLE(INTERVAL '1' MINUTE) AS w, count(*) AS n FROM orders GROUP BY w;
"""


def test_a_definition_builds_what_create_table_builds() -> None:
    created = plan_pipeline("""
CREATE TABLE orders (id BIGINT NOT NULL, price DOUBLE, ts TIMESTAMP NOT NULL) WITH (
  connector = 'single_file', type = 'source', format = 'json', path = 'orders.jsonl',
  event_time_field = 'ts');
SELECT id FROM orders;
""").tables["orders"]
    assert table_from_definition(ORDERS) == created


def test_pipelines_use_catalog_tables_by_name_and_keep_only_those_used() -> None:
    unused = TableDefinition(name="spare", connector="impulse", options={"event_rate": "1"})
    plan = plan_pipeline(WINDOWED, tables=tables_from_definitions([ORDERS, OUT, unused]))
    assert set(plan.tables) == {"orders", "totals"}
    assert [t.name for t in plan.sources] == ["orders"]
    assert plan.sources[0].event_time_sql == "`ts`"
    (query,) = plan.queries
    assert query.sink == "totals" and query.aggregate is not None


def test_create_table_in_the_sql_shadows_a_catalog_table() -> None:
    plan = plan_pipeline("""
CREATE TABLE orders WITH (connector = 'impulse', event_rate = '5', message_count = '3');
SELECT counter FROM orders;
""", tables=tables_from_definitions([ORDERS]))
    assert plan.tables["orders"].config.connector == "impulse"


def test_an_unknown_table_is_a_located_error_even_with_a_catalog() -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline("INSERT INTO totals\nSELECT id FROM nope;",
                      tables=tables_from_definitions([ORDERS, OUT]))
    assert "unknown table 'nope'" in caught.value.message
    assert (caught.value.line, caught.value.column) == (2, 16)


def test_unknown_option_and_bad_fields_are_named() -> None:
    bad_option = TableDefinition("t", "single_file", {**ORDERS.options, "colour": "red"},
                                 ORDERS.fields)
    with pytest.raises(TableDefinitionError) as caught:
        table_from_definition(bad_option)
    assert caught.value.option == "colour" and "unknown option 'colour'" in caught.value.message

    for sql_type in ("INT) WITH (connector = 'blackhole'", "INT NOT NULL", "WIDGET", ""):
        definition = TableDefinition("t", "single_file", ORDERS.options,
                                     (FieldDefinition("id", sql_type),))
        with pytest.raises(TableDefinitionError) as caught:
            table_from_definition(definition)
        assert caught.value.field_name == "id"

    duplicate = TableDefinition("t", "blackhole", {}, (FieldDefinition("a", "INT"),
                                                       FieldDefinition("A", "TEXT")))
    with pytest.raises(TableDefinitionError, match="declared twice"):
        table_from_definition(duplicate)
    with pytest.raises(TableDefinitionError, match="unknown connector 'kafkaa'"):
        table_from_definition(TableDefinition("t", "kafkaa"))
    with pytest.raises(TableDefinitionError) as caught:
        table_from_definition(TableDefinition("t", "single_file",
                                              {**ORDERS.options, "event_time_field": "when"},
                                              ORDERS.fields))
    assert caught.value.option == "event_time_field"
    with pytest.raises(TableDefinitionError, match="must be a TIMESTAMP") as caught:
        table_from_definition(TableDefinition("t", "single_file",
                                              {**ORDERS.options, "event_time_field": "price"},
                                              ORDERS.fields))
    assert caught.value.option == "event_time_field"


def test_definitions_round_trip_through_json_values() -> None:
    assert TableDefinition.from_dict(ORDERS.to_dict()) == ORDERS
