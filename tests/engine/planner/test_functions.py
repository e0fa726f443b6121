"""The scalar function library: planning translates each family into native
Spark SQL, which returns the expected values on a small batch; unknown
functions are located planning errors; the committed table matches the code."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from spate.engine.planner import PlanningError, plan_pipeline
from spate.engine.planner.functions import DOCS_PATH, FUNCTIONS, markdown

ROOT = Path(__file__).resolve().parents[3]
SOURCE = """CREATE TABLE fn_src (a TEXT, x DOUBLE, n BIGINT, j TEXT, arr BIGINT[],
                     s STRUCT<k TEXT>, ts TIMESTAMP NOT NULL,
                     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
"""
DOC = json.dumps({"a": [10, {"b": "x y"}], "n": 3, "f": 2.5, "t": True, "s": "hi",
                  "o": {"p": 1, "q": 2}, "nul": None})
EVENT = dt.datetime(2024, 1, 1, 0, 7, 30, 250000)


@pytest.fixture(scope="module")
def source(spark: Any) -> Any:
    """The one-row table ``fn_src`` (with Spate's event-time column) in the shared session."""
    frame = spark.createDataFrame(
        [("  Hello, World ", -2.5, 1_700_000_000, DOC, [1, 2, 2], {"k": "v"},
          dt.datetime(2024, 1, 1, 0, 7, 31), EVENT)],
        "a string, x double, n bigint, j string, arr array<bigint>, s struct<k: string>, "
        "ts timestamp, _spate_event_time timestamp")
    frame.createOrReplaceTempView("fn_src")
    return spark


def run(spark: Any, select_list: str) -> dict[str, Any]:
    """Plan ``SELECT <select_list> FROM fn_src`` and run its Spark SQL: the one row."""
    plan = plan_pipeline(SOURCE + f"SELECT {select_list} FROM fn_src;")
    sql = plan.queries[0].output_sql
    assert "spate" not in sql.replace("_spate_event_time", ""), sql
    (row,) = spark.sql(sql).collect()
    return dict(row.asDict(recursive=True))


def test_math(source: Any) -> None:
    row = run(source, "abs(x) AS a, floor(x) AS f, ceil(x) AS c, round(x * 3, 1) AS r, "
                      "power(2, 10) AS p, sqrt(16) AS q, mod(n, 7) AS m, sign(x) AS s, "
                      "ln(1) AS l")
    assert row == {"a": 2.5, "f": -3, "c": -2, "r": -7.5, "p": 1024.0, "q": 4.0,
                   "m": 1_700_000_000 % 7, "s": -1.0, "l": 0.0}


def test_strings(source: Any) -> None:
    row = run(source, "concat(trim(a), '!', NULL) AS c, lower(a) AS lo, upper(trim(a)) AS up, "
                      "substr(trim(a), 1, 5) AS sub, replace(a, 'l', 'L') AS rep, "
                      "split_part(trim(a), ', ', 2) AS part, length(trim(a)) AS len, "
                      "ltrim(a) AS lt, left(trim(a), 2) AS lf, strpos(a, 'W') AS pos, "
                      "starts_with(trim(a), 'He') AS sw, lpad('7', 3, '0') AS pad")
    assert row == {"c": "Hello, World!", "lo": "  hello, world ", "up": "HELLO, WORLD",
                   "sub": "Hello", "rep": "  HeLLo, WorLd ", "part": "World", "len": 12,
                   "lt": "Hello, World ", "lf": "He", "pos": 10, "sw": True, "pad": "007"}


def test_regex_and_conditional(source: Any) -> None:
    row = run(source, "regexp_like(a, 'W[a-z]+') AS ok, regexp_match(a, '(\\w+), (\\w+)') AS m, "
                      "regexp_match(a, 'o') AS whole, regexp_match(a, 'zz') AS none, "
                      "regexp_replace(a, '[aeiou]', '_') AS rep, "
                      "regexp_replace(a, '[aeiou]', '_', 'g') AS g_rep, "
                      "regexp_replace(a, '(l+)(o)', '<\\2\\1>') AS grp, coalesce(NULL, a) AS co, "
                      "nullif(n, 1700000000) AS ni, nvl(NULL, 'd') AS nv, "
                      "greatest(1, 5, 3) AS g, least(1, 5, 3) AS le")
    assert row == {"ok": True, "m": ["Hello", "World"], "whole": ["o"], "none": None,
                   "rep": "  H_llo, World ", "g_rep": "  H_ll_, W_rld ",
                   "grp": "  He<oll>, World ", "co": "  Hello, World ", "ni": None,
                   "nv": "d", "g": 5, "le": 1}


def test_time(source: Any) -> None:
    before = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    row = run(source, "date_trunc('minute', ts) AS tr, date_bin(INTERVAL '5' MINUTE, ts) AS b, "
                      "extract(minute FROM ts) AS mi, date_part('second', ts) AS se, "
                      "to_timestamp(n) AS tn, to_timestamp('2024-02-03T04:05:06') AS ts_text, "
                      "to_timestamp('03/02/2024 04:05', 'DD/MM/YYYY HH24:MI') AS ts_fmt, "
                      "from_unixtime(n) AS fu, row_time() AS rt, now() AS n1, "
                      "current_timestamp AS n2")
    assert row["tr"] == dt.datetime(2024, 1, 1, 0, 7)
    assert row["b"] == dt.datetime(2024, 1, 1, 0, 5)
    assert (row["mi"], float(row["se"])) == (7, 31.0)
    assert row["tn"] == row["fu"] == dt.datetime(2023, 11, 14, 22, 13, 20)
    assert row["ts_text"] == dt.datetime(2024, 2, 3, 4, 5, 6)
    assert row["ts_fmt"] == dt.datetime(2024, 2, 3, 4, 5)
    assert row["rt"] == EVENT
    assert row["n1"] == row["n2"] and before <= row["n1"] <= dt.datetime.now(dt.UTC).replace(
        tzinfo=None)


def test_now_is_one_instant_per_pipeline() -> None:
    plan = plan_pipeline(SOURCE + "SELECT now() AS t FROM fn_src; "
                                  "SELECT a, now() AS t FROM fn_src;")
    stamps = {q.output_sql.split("CAST(")[1].split(" AS")[0] for q in plan.queries}
    assert len(stamps) == 1


def test_arrays_structs_hashes_encodings_casts(source: Any) -> None:
    row = run(source, "make_array(1, 2) AS mk, array_append(arr, 9) AS ap, "
                      "array_has(arr, 2) AS has, array_length(arr) AS len, "
                      "cardinality(arr) AS card, array_distinct(arr) AS dis, "
                      "named_struct('p', 1, 'q', 'z') AS ns, get_field(s, 'k') AS gf, "
                      "md5('abc') AS md, sha256('abc') AS sh, sha224('abc') AS s224, "
                      "encode('hi', 'hex') AS hx, encode('hi', 'base64') AS b64, "
                      "decode('aGk=', 'base64') AS raw, arrow_cast(x, 'Int64') AS i, "
                      "arrow_cast(n, 'Utf8') AS txt")
    assert row == {
        "mk": [1, 2], "ap": [1, 2, 2, 9], "has": True, "len": 3, "card": 3, "dis": [1, 2],
        "ns": {"p": 1, "q": "z"}, "gf": "v", "md": "900150983cd24fb0d6963f7d28e17f72",
        "sh": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        "s224": "23097d223405d8228642a477bda255b32aadbce4bda0b3f7e36c9da7",
        "hx": "6869", "b64": "aGk=", "raw": bytearray(b"hi"), "i": -2, "txt": "1700000000",
    }


def test_json(source: Any) -> None:
    row = run(source, "json_get(j, 'a', 1, 'b') AS g, j->'o'->>'p' AS op, j->>'s' AS s, "
                      "json_get_str(j, 's') AS gs, json_get_int(j, 'n') AS gi, "
                      "json_get_float(j, 'f') AS gf, json_get_bool(j, 't') AS gb, "
                      "json_get_int(j, 's') AS bad_int, json_get_json(j, 'o') AS gj, "
                      "json_as_text(j, 'a', 0) AS at, json_contains(j, 'nul') AS has_null, "
                      "json_contains(j, 'zz') AS missing, j ? 'o' AS op_has, "
                      "json_contains(j, 'a', 1) AS has_index, json_length(j, 'a') AS la, "
                      "json_length(j, 'o') AS lo, json_length(j) AS lj, "
                      "extract_json(j, '$.o.q') AS ej, extract_json(j, '$.zz') AS ej_none, "
                      "extract_json_string(j, '$.a[1].b') AS ejs, "
                      "get_first_json_object(j, '$.o') AS gfo")
    assert row == {
        "g": '"x y"', "op": "1", "s": "hi", "gs": "hi", "gi": 3, "gf": 2.5, "gb": True,
        "bad_int": None, "gj": '{"p":1,"q":2}', "at": "10", "has_null": True,
        "missing": False, "op_has": True, "has_index": True, "la": 2, "lo": 2, "lj": 7,
        "ej": ["2"], "ej_none": [], "ejs": "x y", "gfo": '{"p":1,"q":2}',
    }


def test_arrow_returns_json_and_double_arrow_text(source: Any) -> None:
    row = run(source, "j->'s' AS s, j->>'s' AS st, j->'nul' AS n, j->>'nul' AS nt, "
                      "j->'zz' AS missing, j->'a'->0 AS first, j->'a'->1 AS obj, "
                      "j->'a'->1->'b' AS inner, j->'t' AS t, j->'f' AS f, a->'x' AS not_json")
    assert row == {"s": '"hi"', "st": "hi", "n": "null", "nt": None, "missing": "null",
                   "first": "10", "obj": '{"b":"x y"}', "inner": '"x y"', "t": "true",
                   "f": "2.5", "not_json": "null"}


def test_more_math_and_strings(source: Any) -> None:
    row = run(source, "log(100) AS l, log(2, 8) AS l2, log2(8) AS lb, trunc(x) AS t, "
                      "trunc(-2.567, 2) AS t2, trunc(2.567, 1) AS t3, signum(x) AS sg, "
                      "cbrt(27.0) AS cb, character_length(trim(a)) AS cl, "
                      "octet_length('é') AS ol, ascii('A') AS asc, chr(66) AS ch, "
                      "to_hex(255) AS hx, ends_with(trim(a), 'ld') AS ew, "
                      "contains(a, 'lo,') AS co, instr(a, 'W') AS ins, "
                      "translate('abc', 'ab', 'xy') AS tr, nvl2(NULL, 1, 2) AS n2, "
                      "levenshtein('kitten', 'sitting') AS lv")
    # -2.567 is a DECIMAL literal in Spark: trunc keeps the type.
    row["t2"], row["t3"] = float(row["t2"]), float(row["t3"])
    assert row == {"l": 2.0, "l2": 3.0, "lb": 3.0, "t": -2, "t2": -2.56, "t3": 2.5,
                   "sg": -1.0, "cb": 3.0, "cl": 12, "ol": 2, "asc": 65, "ch": "B",
                   "hx": "ff", "ew": True, "co": True, "ins": 10, "tr": "xyc", "n2": 2,
                   "lv": 3}


def test_more_arrays_time_and_hashes(source: Any) -> None:
    row = run(source, "array_slice(arr, 2, 3) AS sl, range(0, 6, 2) AS r, range(3) AS r1, "
                      "generate_series(1, 3) AS gs, range(5, 1, -2) AS down, "
                      "range(3, 1) AS none, string_to_array('a.b.c', '.') AS sa, "
                      "array_has_all(arr, make_array(1, 2)) AS ha, "
                      "array_has_any(arr, make_array(5, 2)) AS hy, empty(arr) AS e, "
                      "array_element(arr, 1) AS el, array_to_string(arr, '-') AS js, "
                      "array_max(arr) AS mx, array_sort(make_array(3, 1, 2)) AS so, "
                      "to_timestamp_millis(1000) AS tm, to_unixtime(ts) AS ux, "
                      "datepart('hour', ts) AS h, sha384('') AS s384, "
                      "digest('', 'sha256') AS dg")
    assert row["sl"] == [2, 2] and row["r"] == [0, 2, 4] and row["r1"] == [0, 1, 2]
    assert row["gs"] == [1, 2, 3] and row["down"] == [5, 3] and row["none"] == []
    assert row["sa"] == ["a", "b", "c"] and row["ha"] is True and row["hy"] is True
    assert row["e"] is False and row["el"] == 1 and row["js"] == "1-2-2" and row["mx"] == 2
    assert row["so"] == [1, 2, 3] and row["tm"] == dt.datetime(1970, 1, 1, 0, 0, 1)
    assert row["ux"] == 1704067651 and row["h"] == 0
    assert row["s384"].startswith("38b060a751ac9638")
    assert row["dg"] == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_unaliased_calls_keep_their_written_names() -> None:
    plan = plan_pipeline(SOURCE + "SELECT json_length(j), row_time(), abs(x) FROM fn_src;")
    assert plan.queries[0].output_columns == ("JSON_LENGTH(j)", "ROW_TIME()", "ABS(x)")


def test_unaliased_operators_are_named_as_written() -> None:
    plan = plan_pipeline(SOURCE + "SELECT j -> 'a', j ->> 'a', UNNEST(arr) FROM fn_src;")
    assert plan.queries[0].output_columns == ("j -> 'a'", "j ->> 'a'", "UNNEST(arr)")


def test_an_arrow_inside_a_call_is_the_json_operator_not_a_lambda() -> None:
    plan = plan_pipeline(SOURCE + "SELECT length(j -> 'a' ->> 'b') AS n FROM fn_src;")
    # the chain is one path, read from the document once
    assert "LENGTH(GET_JSON_OBJECT(`j`, '$.a.b'))" in plan.queries[0].output_sql


def test_functions_inside_windowed_aggregate_plan() -> None:
    plan = plan_pipeline(SOURCE + """
SELECT lower(a) AS k, TUMBLE(INTERVAL '1' MINUTE) AS w, count(*) AS c,
       sum(json_get_int(j, 'n')) AS total
FROM fn_src WHERE regexp_like(a, 'H') GROUP BY 1, 2;""")
    aggregate = plan.queries[0].aggregate
    assert aggregate is not None
    assert "LOWER(`a`)" in aggregate.input_sql
    assert "TRY_VARIANT_GET(TRY_PARSE_JSON(`j`), '$.n', 'variant')" in aggregate.input_sql
    assert "RLIKE" in aggregate.input_sql


@pytest.mark.parametrize(("sql", "line", "column", "message"), [
    ("SELECT a,\n       lowr(a) AS b FROM fn_src", 6, 8,
     "unknown function 'lowr' (did you mean lower?)"),
    ("SELECT soundex_distance(a, 'x') FROM fn_src", 5, 8, "unknown function 'soundex_distance'"),
    ("SELECT a FROM fn_src\nWHERE  nosuch() > 1", 6, 8, "unknown function 'nosuch'"),
    ("SELECT json_get(j, a) FROM fn_src", 5, 20, "keys must be string or integer literals"),
    ("SELECT encode(a, 'rot13') FROM fn_src", 5, 18, "format 'rot13' is not supported"),
    ("SELECT arrow_cast(x, 'Float16') FROM fn_src", 5, 22, "cannot cast to 'Float16'"),
    ("SELECT extract_json(j, '$.a[*]') FROM fn_src", 5, 24, "without wildcards"),
    ("SELECT row_time(a) FROM fn_src", 5, 8, "row_time() takes 0 argument(s), got 1"),
])
def test_bad_calls_are_located_planning_errors(sql: str, line: int, column: int,
                                               message: str) -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(SOURCE + sql + ";")
    assert message in caught.value.message
    assert (caught.value.line, caught.value.column) == (line, column), str(caught.value)


def test_committed_function_table_is_up_to_date() -> None:
    committed = (ROOT / DOCS_PATH).read_text()
    assert committed == markdown(), (
        f"{DOCS_PATH} is stale: run "
        f"python -m spate.engine.planner.functions --markdown > {DOCS_PATH}")
    for name in FUNCTIONS:
        assert f"| `{name}` |" in committed
