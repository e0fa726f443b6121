"""The JSON functions and operators as the dialect defines them (docs/sql/functions.md#json):
paths of several keys and indexes, read through json_get and ->; JSON null against a path
that leads nowhere; typed getters that take only values of their type; casts of json_get.

Each case runs the planned Spark SQL over three documents: one JSON object, a NULL, and
text that is not JSON.  Expected values worked out by hand from the dialect's semantics."""

from __future__ import annotations

import json
from typing import Any

import pytest

from spate.engine.planner import plan_pipeline

SOURCE = """CREATE TABLE docs (j TEXT) WITH (connector = 'single_file', path = 'in.jsonl',
                              format = 'json', type = 'source');
"""
DOC = json.dumps({
    "a": [10, {"b": "x y"}, [1, 2]], "n": 3, "big": 12345678901234567890, "f": 2.5, "e": 1e3,
    "t": True, "s": "hi", "s7": "7", "sf": "2.5", "st": "true", "o": {"q": 1, "p": [1, 2]},
    "nul": None, "k.d": 1, "x y": 2, "0": "zero", "u": "é\n", "emp": {}, "ea": []})
#: (expression, its value for DOC, its value for a NULL document and for one not JSON)
CASES = [
    # -> and json_get: JSON text; where the path leads nowhere, the text null
    ("j -> 's'", '"hi"', "null"),
    ("j -> 'n'", "3", "null"),
    ("j -> 't'", "true", "null"),
    ("j -> 'nul'", "null", "null"),
    ("j -> 'zz'", "null", "null"),
    ("j -> 'o'", '{"q":1,"p":[1,2]}', "null"),
    ("j -> 'e'", "1000.0", "null"),
    ("j -> 'big'", "12345678901234567890", "null"),
    ("j -> 'u'", '"é\\n"', "null"),
    ("j -> 'k.d'", "1", "null"),
    ("j -> 'x y'", "2", "null"),
    ("j -> '0'", '"zero"', "null"),
    # nested paths: keys and indexes, chained or in one call
    ("j -> 'a' -> 1 -> 'b'", '"x y"', "null"),
    ("json_get(j, 'a', 1, 'b')", '"x y"', "null"),
    ("j -> 'a' -> 2 -> 1", "2", "null"),
    ("json_get(j, 'a', 5)", "null", "null"),
    ("json_get(j, 'o', 0)", "null", "null"),
    ("json_get(j, 'a', 'b')", "null", "null"),
    ("j -> 'zz' -> 'y'", "null", "null"),
    ("json_get(j -> 'a', 1, 'b')", '"x y"', "null"),
    # ->> and json_as_text: text, NULL for a JSON null
    ("j ->> 's'", "hi", None),
    ("j ->> 'nul'", None, None),
    ("j ->> 'zz'", None, None),
    ("j ->> 'n'", "3", None),
    ("j -> 'a' -> 1 ->> 'b'", "x y", None),
    ("(j -> 'a') ->> 0", "10", None),
    ("j ->> 'o'", '{"q":1,"p":[1,2]}', None),
    ("json_as_text(j, 'a', 2)", "[1,2]", None),
    ("j -> 'zz' ->> 'y'", None, None),
    # json_get_json: JSON text, NULL where the path leads nowhere
    ("json_get_json(j, 'nul')", "null", None),
    ("json_get_json(j, 'zz')", None, None),
    ("json_get_json(j, 's')", '"hi"', None),
    ("json_get_json(j, 'a', 2)", "[1,2]", None),
    # typed getters: only values of their type
    ("json_get_str(j, 's')", "hi", None),
    ("json_get_str(j, 'n')", None, None),
    ("json_get_str(j, 'o')", None, None),
    ("json_get_str(j, 'nul')", None, None),
    ("json_get_str(j -> 'a', 1, 'b')", "x y", None),
    ("json_get_int(j, 'n')", 3, None),
    ("json_get_int(j, 's7')", None, None),
    ("json_get_int(j, 'f')", None, None),
    ("json_get_int(j, 'big')", None, None),
    ("json_get_int(j, 't')", None, None),
    ("json_get_int(j, 'a', 0)", 10, None),
    ("json_get_float(j, 'f')", 2.5, None),
    ("json_get_float(j, 'n')", 3.0, None),
    ("json_get_float(j, 'e')", 1000.0, None),
    ("json_get_float(j, 'sf')", None, None),
    ("json_get_bool(j, 't')", True, None),
    ("json_get_bool(j, 'st')", None, None),
    ("json_get_bool(j, 'n')", None, None),
    # casts of json_get and -> are the typed getters (to JSON: the JSON text)
    ("CAST(j -> 's' AS TEXT)", "hi", None),
    ("CAST(j -> 'n' AS INT)", 3, None),
    ("(j -> 'f')::BIGINT", None, None),
    ("(j -> 'f')::DOUBLE", 2.5, None),
    ("(j -> 'st')::BOOLEAN", None, None),
    ("(j -> 't')::BOOLEAN", True, None),
    ("CAST(j -> 'o' AS TEXT)", None, None),
    ("CAST(j -> 'o' AS JSON)", '{"q":1,"p":[1,2]}', "null"),
    # json_contains, ? and json_length, through nested paths too
    ("json_contains(j, 'nul')", True, False),
    ("json_contains(j, 'a', 2, 1)", True, False),
    ("json_contains(j, 'a', 2, 2)", False, False),
    ("json_contains(j -> 'o', 'p')", True, False),
    ("j ? 'zz'", False, False),
    ("json_length(j, 'a', 2)", 2, None),
    ("json_length(j -> 'a')", 3, None),
    ("json_length(j, 'emp')", 0, None),
    ("json_length(j, 's')", None, None),
    ("json_length(j, 'nul')", None, None),
]


@pytest.fixture(scope="module")
def docs(spark: Any) -> Any:
    """The three documents as the table ``docs`` in the shared session."""
    spark.createDataFrame([(DOC,), (None,), ("not json",)], "j string") \
        .createOrReplaceTempView("docs")
    return spark


@pytest.mark.parametrize("expression, value, nowhere", CASES, ids=[c[0] for c in CASES])
def test_json_function(docs: Any, expression: str, value: Any, nowhere: Any) -> None:
    plan = plan_pipeline(SOURCE + f"SELECT {expression} AS x FROM docs;")
    sql = plan.queries[0].output_sql.replace("`_spate_event_time`", "NULL")
    got = [row.x for row in docs.sql(sql).collect()]
    assert got == [value, nowhere, nowhere]
