"""``col type METADATA FROM 'key'``: keys a connector exposes, checked where written."""

from __future__ import annotations

import pytest
from pyspark.sql import types as T

from spate.engine.planner import PlanningError, plan_pipeline

KAFKA = ("CREATE TABLE k (\n  id BIGINT,\n  {column}\n) WITH (connector = 'kafka', "
         "bootstrap_servers = '127.0.0.1:9092', topic = 't', type = 'source', "
         "format = 'json');\nSELECT * FROM k;")


def test_kafka_metadata_columns_plan_with_their_keys() -> None:
    column = ("part INT METADATA FROM 'partition',\n  off BIGINT METADATA FROM 'offset_id',\n"
              "  k TEXT GENERATED ALWAYS AS (metadata('key')),\n"
              "  hs ARRAY<STRUCT<key TEXT, value BYTEA>> METADATA FROM 'headers'")
    table = plan_pipeline(KAFKA.format(column=column)).tables["k"]
    assert dict(table.config.metadata) == {"part": "partition", "off": "offset_id", "k": "key",
                                           "hs": "headers"}
    assert [c.name for c in table.config.data_columns] == ["id"]
    assert table.visible_columns == ["id", "part", "off", "k", "hs"]
    assert table.column_type("k") == T.StringType()


@pytest.mark.parametrize(("column", "line", "col", "message"), [
    ("p TEXT METADATA FROM 'partitoin'", 3, 24,
     "unknown metadata 'partitoin' (did you mean 'partition'?); a kafka source exposes "
     "'offset_id' (BIGINT), 'partition' (INT), 'topic' (TEXT), 'timestamp' (TIMESTAMP), "
     "'key' (BYTEA or TEXT), 'headers' (ARRAY<STRUCT<key TEXT, value BYTEA>>)"),
    ("p TEXT METADATA FROM 'partition'", 3, 24,
     "column 'p' is TEXT, but metadata 'partition' of a kafka source is INT: declare p INT "
     "METADATA FROM 'partition'"),
    ("k BIGINT GENERATED ALWAYS AS (metadata('key'))", 3, 42,
     "column 'k' is BIGINT, but metadata 'key' of a kafka source is BYTEA or TEXT: declare "
     "k BYTEA METADATA FROM 'key'"),
])
def test_unknown_keys_and_wrong_types_are_refused_at_the_key(column: str, line: int, col: int,
                                                             message: str) -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(KAFKA.format(column=column))
    assert caught.value.message == message
    assert (caught.value.line, caught.value.column) == (line, col), str(caught.value)


def test_a_sink_exposes_no_metadata() -> None:
    sql = ("CREATE TABLE k (id BIGINT,\n t TEXT METADATA FROM 'topic') WITH (connector = "
           "'kafka', bootstrap_servers = '127.0.0.1:9092', topic = 't', type = 'sink', "
           "format = 'json');\nINSERT INTO k SELECT 1, 'a';")
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(sql)
    assert caught.value.message == ("METADATA FROM 'topic' is not supported: connector 'kafka' "
                                    "exposes no metadata to a sink")
    assert (caught.value.line, caught.value.column) == (2, 23)


def test_metadata_columns_keep_their_place_among_the_columns() -> None:
    sql = ("CREATE TABLE k (p INT METADATA FROM 'partition', id BIGINT, t TEXT METADATA FROM "
           "'topic', name TEXT) WITH (connector = 'kafka', bootstrap_servers = "
           "'127.0.0.1:9092', topic = 't', type = 'source', format = 'json');\n"
           "SELECT * FROM k;")
    table = plan_pipeline(sql).tables["k"]
    assert [c.name for c in table.columns] == ["p", "id", "t", "name"]
    assert [c.name for c in table.config.data_columns] == ["id", "name"]
    raw = plan_pipeline(sql.replace("id BIGINT, ", "").replace(", name TEXT", "").replace(
        "'json'", "'raw_string'")).tables["k"]
    assert [c.name for c in raw.columns] == ["value", "p", "t"]
