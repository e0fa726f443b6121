"""CREATE TEMPORARY TABLE declares lookup tables (docs/sql/ddl.md): located errors."""

from __future__ import annotations

import pytest

from spate.engine.planner import PlanningError, plan_pipeline

SOURCE = ("CREATE TABLE src (id TEXT) WITH (connector = 'single_file', type = 'source', "
          "path = 'in.json', format = 'json');\n"
          "CREATE TABLE out (id TEXT) WITH (connector = 'single_file', type = 'sink', "
          "path = 'out.json', format = 'json');\n")
QUERY = "\nINSERT INTO out SELECT id FROM src;"


def test_temporary_tables_are_lookup_tables() -> None:
    plan = plan_pipeline(
        SOURCE + "CREATE TEMPORARY TABLE customers (id TEXT PRIMARY KEY, region TEXT "
        "PRIMARY KEY, name TEXT NOT NULL) WITH (connector = 'redis', "
        "address = 'redis://{{ HOST }}:6379', format = 'json', "
        "'lookup.cache.ttl' = INTERVAL '5' MINUTE);" + QUERY, {"HOST": "cache"})
    table = plan.tables["customers"]
    assert table.role == "lookup"
    assert table.primary_key == ("id", "region")
    assert table.config.options["address"] == "redis://cache:6379"
    assert table.config.options["lookup.cache.ttl"] == "INTERVAL '5' MINUTE"
    assert table.event_time_sql is None and not table.bounded
    assert table not in plan.sources


@pytest.mark.parametrize("statement, position, message", [
    ("CREATE TEMPORARY TABLE c (id TEXT PRIMARY KEY, v TEXT) WITH (connector = 'single_file',"
     " path = 'x', format = 'json');", (3, 74),
     "connector 'single_file' cannot serve lookup table c: lookup tables use connector "
     "'postgres' or 'redis'"),
    ("CREATE TABLE c (id TEXT, v TEXT) WITH (connector = 'single_file', type = 'lookup', "
     "path = 'x', format = 'json');", (3, 52), "lookup tables use connector 'postgres' or "
     "'redis'"),
    ("CREATE TABLE c (id TEXT PRIMARY KEY, v TEXT) WITH (connector = 'redis', "
     "address = 'redis://h', format = 'json');", (3, 14),
     "connector 'redis' serves lookup tables, which are declared with CREATE TEMPORARY "
     "TABLE c"),
    ("CREATE TEMPORARY TABLE c (id TEXT PRIMARY KEY, v TEXT);", (3, 1),
     "lookup table c needs WITH (connector = 'postgres' or 'redis', ...)"),
    ("CREATE TEMPORARY TABLE c (id TEXT, v TEXT) WITH (connector = 'postgres', "
     "url = 'postgresql://h/db', table = 't');", (3, 24),
     "lookup table 'c' needs a PRIMARY KEY"),
    ("CREATE TEMPORARY TABLE c (id TEXT PRIMARY KEY, ts TIMESTAMP, WATERMARK FOR ts) WITH "
     "(connector = 'postgres', url = 'postgresql://h/db', table = 't');", (3, 76),
     "lookup table c cannot have a WATERMARK"),
    ("CREATE TEMPORARY TABLE c (id TEXT PRIMARY KEY, v TEXT) WITH (connector = 'postgres', "
     "url = 'postgresql://h/db', table = 't', 'lookup.cache.ttl' = '3 fortnights');",
     (3, 126), "option 'lookup.cache.ttl' must be a duration"),
    ("CREATE TEMPORARY TABLE c (id TEXT PRIMARY KEY, v TEXT) WITH (connector = 'redis', "
     "address = 'redis://h', format = 'json', 'key.prefx' = 'a:');", (3, 123),
     "unknown option 'key.prefx'"),
    ("CREATE TEMPORARY TABLE c (id TEXT[] PRIMARY KEY, v TEXT) WITH (connector = 'postgres', "
     "url = 'postgresql://h/db', table = 't');", (3, 24),
     "PRIMARY KEY column 'id' is array<string>; a lookup key is made of scalar columns"),
])
def test_lookup_declaration_errors(statement: str, position: tuple[int, int],
                                   message: str) -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(SOURCE + statement + QUERY)
    assert message in caught.value.message
    assert (caught.value.line, caught.value.column) == position, str(caught.value)
