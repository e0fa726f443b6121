"""A pipeline written in Arroyo's dialect plans on Spate unchanged, or is refused at
its place with a message saying what "is not supported yet".

Each case is a feature of that dialect (windows, updating tables, joins, lookup
tables, DDL forms and options, types, functions) written for Spate's
connectors: ``single_file``, ``nexmark`` and ``impulse`` stand in for the
sources Spate lacks. Functions whose Spark translation is not the Spark
built-in of the same name run on a one-row table and must give the dialect's
results. docs/sql/differences.md lists what remains different.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from spate.engine.connectors import CONNECTOR_OPTIONS, CONNECTORS
from spate.engine.planner import PlanningError, plan_pipeline
from spate.engine.planner.catalog import NOT_YET_CONNECTORS
from spate.engine.planner.functions import FUNCTIONS, NOT_YET
from spate.engine.planner.plan import WindowSpec

ORDERS = """CREATE TABLE orders (id BIGINT, shop TEXT, amount DOUBLE, tags TEXT[], doc JSON,
  placed_at TIMESTAMP NOT NULL, WATERMARK FOR placed_at AS placed_at - INTERVAL '2' SECOND)
WITH (connector = 'single_file', path = 'orders.jsonl', format = 'json', type = 'source');
"""
RETURNS = """CREATE TABLE returns (id BIGINT, shop TEXT, reason TEXT, at TIMESTAMP NOT NULL,
  WATERMARK FOR at) WITH (connector = 'single_file', path = 'returns.jsonl', format = 'json',
  type = 'source');
"""
TICKS = "CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '50');\n"
AUCTIONS = "CREATE TABLE auctions WITH (connector = 'nexmark', event_rate = 20);\n"
SHOPS = """CREATE TEMPORARY TABLE shops (name TEXT METADATA FROM 'key' PRIMARY KEY, owner TEXT)
WITH (connector = 'redis', address = 'redis://localhost:6379', format = 'json',
      'lookup.cache.max_bytes' = 500000, 'lookup.cache.ttl' = INTERVAL '10' SECOND);
"""
CHANGES = """CREATE TABLE changes WITH (connector = 'single_file', path = 'changes.jsonl',
  format = 'debezium_json', type = 'sink');
"""
PER_SHOP = ("(SELECT shop, TUMBLE(INTERVAL '1 minute') AS window, count(*) AS n "
            "FROM {} GROUP BY 1, 2)")

PLANS = [
    # windows: the three kinds, string intervals, the window struct, re-aggregation, top-N
    pytest.param(ORDERS + "SELECT shop, TUMBLE(INTERVAL '1' MINUTE) AS window, sum(amount) "
                 "AS total FROM orders GROUP BY 1, 2;", id="tumble"),
    pytest.param(ORDERS + "SELECT hop(interval '10 seconds', interval '1 minute') AS window, "
                 "count(DISTINCT shop) AS shops FROM orders GROUP BY 1;", id="hop"),
    pytest.param(ORDERS + "SELECT shop, SESSION(INTERVAL '30' SECOND) AS s, count(*) AS n "
                 "FROM orders GROUP BY shop, s;", id="session"),
    pytest.param(TICKS + "SELECT count(*) FROM ticks GROUP BY tumble('5 seconds');",
                 id="window-width-as-text"),
    pytest.param(TICKS + "SELECT count(*) FROM ticks GROUP BY hop('1 second', '4 seconds');",
                 id="hop-as-text"),
    pytest.param(ORDERS + "SELECT window.start AS opened, window.end AS closed, n FROM "
                 + PER_SHOP.format("orders") + ";", id="window-struct"),
    pytest.param(ORDERS + "SELECT window, max(n) AS busiest FROM " + PER_SHOP.format("orders")
                 + " GROUP BY window;", id="reaggregate-in-window"),
    pytest.param(AUCTIONS + "SELECT * FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY window "
                 "ORDER BY count DESC) AS place FROM (SELECT bid.auction AS auction, "
                 "hop(interval '1 second', interval '30 seconds') AS window, count(*) AS count "
                 "FROM auctions WHERE bid IS NOT NULL GROUP BY 1, 2)) WHERE place <= 3;",
                 id="top-n"),
    pytest.param(TICKS + "SELECT *, rank() OVER (PARTITION BY window, counter % 2 ORDER BY n) "
                 "AS r FROM (SELECT counter, tumble(interval '2 seconds') AS window, count(*) "
                 "AS n FROM ticks GROUP BY 1, 2);", id="partition-by-expression"),
    pytest.param(TICKS + "SELECT count(*) FROM ticks GROUP BY hop(interval '3 seconds', "
                 "interval '3 seconds');", id="hop-equal-to-tumble"),
    # updating aggregates, debezium in and out, TTL
    pytest.param(TICKS + "SELECT count(*) AS seen FROM ticks;", id="updating-count"),
    pytest.param(TICKS + "SELECT counter % 4, count(*) FROM ticks GROUP BY counter % 4;",
                 id="updating-group-by-expression"),
    pytest.param(TICKS + CHANGES + "INSERT INTO changes SELECT subtask_index, count(*) AS n "
                 "FROM ticks GROUP BY 1;", id="updating-into-debezium-sink"),
    pytest.param(TICKS + "SET updating_ttl = INTERVAL '90' MINUTE; SELECT counter % 3 AS k, "
                 "count(*) AS n FROM ticks GROUP BY 1;", id="set-updating-ttl"),
    pytest.param(TICKS + "SET updating_ttl = '30 seconds'; SELECT count(*) FROM ticks;",
                 id="set-updating-ttl-as-text"),
    pytest.param("CREATE TABLE accounts (id BIGINT PRIMARY KEY, plan TEXT) WITH (connector = "
                 "'single_file', path = 'accounts.jsonl', format = 'debezium_json', type = "
                 "'source'); SELECT id, plan FROM accounts WHERE plan <> 'free';",
                 id="debezium-source"),
    # joins: windowed of each kind, updating, lookup
    *(pytest.param(ORDERS + RETURNS + "SELECT o.shop, o.window, o.n, r.n AS returned FROM "
                   + PER_SHOP.format("orders") + f" o {kind} JOIN " + PER_SHOP.format("returns")
                   + " r ON o.shop = r.shop AND o.window = r.window;", id=f"window-join-{kind}")
      for kind in ("INNER", "LEFT", "RIGHT", "FULL")),
    pytest.param(ORDERS + RETURNS + "SELECT o.id, o.shop, r.reason FROM orders o JOIN returns "
                 "r ON o.id = r.id;", id="updating-join"),
    pytest.param(ORDERS + SHOPS + "SELECT o.id, s.owner FROM orders o LEFT JOIN shops s "
                 "ON concat('shop:', o.shop) = s.name WHERE s.owner IS NOT NULL;",
                 id="lookup-join-metadata-key"),
    pytest.param(ORDERS + SHOPS.replace("METADATA FROM 'key'", "GENERATED ALWAYS AS "
                                        "(metadata('key')) STORED") +
                 "SELECT o.id, s.owner FROM orders o JOIN shops s ON o.shop = s.name;",
                 id="lookup-join-legacy-metadata-key"),
    # DDL and queries
    pytest.param(TICKS + "CREATE VIEW evens AS (SELECT counter FROM ticks WHERE counter % 2 = 0);"
                 " SELECT counter FROM evens;", id="parenthesized-view"),
    pytest.param(TICKS + "CREATE TABLE totals AS (SELECT count(*) AS n FROM ticks); "
                 "SELECT n FROM totals;", id="create-table-as"),
    pytest.param(ORDERS + "CREATE TABLE big (id BIGINT, amount DOUBLE); INSERT INTO big SELECT "
                 "id, amount FROM orders WHERE amount > 100; SELECT id FROM big;",
                 id="memory-table"),
    pytest.param(AUCTIONS + "WITH bids AS (SELECT bid.auction AS auction FROM auctions WHERE "
                 "bid IS NOT NULL), items AS (SELECT auction.id AS id FROM auctions WHERE "
                 "auction IS NOT NULL) SELECT * FROM bids b JOIN items i ON b.auction = i.id;",
                 id="ctes"),
    pytest.param(ORDERS + "SELECT UNNEST(tags) AS tag FROM ORDERS;", id="unnest-upper-case-table"),
    pytest.param(ORDERS + "SELECT UNNEST(make_array(1, 2, 3)) AS x FROM orders;",
                 id="unnest-literal-array"),
    pytest.param("CREATE TABLE readings (value TEXT NOT NULL, at TIMESTAMP GENERATED ALWAYS AS "
                 "(CAST(extract_json_string(value, '$.at') AS TIMESTAMP)), watermark FOR at AS "
                 "at - INTERVAL '5 seconds') WITH (connector = 'single_file', path = 'r.txt', "
                 "format = 'raw_string', type = 'source'); SELECT count(*) FROM readings GROUP BY "
                 "tumble(interval '1 minute');", id="generated-watermark-column"),
    pytest.param("CREATE TABLE logs (host TEXT, ts TIMESTAMP, size INT) WITH (connector = "
                 "'single_file', path = 'logs.jsonl', format = 'json', type = 'source', "
                 "event_time_field = ts, idle_micros = '-1', bad_data = 'drop', framing = "
                 "'newline', 'framing.newline.max_length' = '4096'); SELECT host, size FROM "
                 "logs;", id="source-options"),
    pytest.param("CREATE TABLE nested (id TEXT, t struct<a int, x struct<b text>>) WITH "
                 "(connector = 'single_file', path = 'n.jsonl', format = 'json', type = "
                 "'source'); SELECT id, t.a, t.x.b FROM nested;", id="struct-ddl"),
    pytest.param(ORDERS + "CREATE TABLE out WITH (connector = 'single_file', path = 'out.jsonl',"
                 " format = 'json', type = 'sink'); INSERT INTO out SELECT * FROM orders WHERE "
                 "shop = 'a'; INSERT INTO out SELECT * FROM orders WHERE shop = 'b';",
                 id="two-inserts-into-one-sink"),
    pytest.param("CREATE TABLE events (value JSON) WITH (connector = 'single_file', path = "
                 "'e.jsonl', format = 'json', type = 'source', 'json.unstructured' = 'true'); "
                 "SELECT json_get(value, 'user', 'id')::TEXT AS who, value->'kind' AS kind, "
                 "value ? 'id' AS has_id FROM events;", id="unstructured-json"),
    pytest.param(TICKS + "SELECT row_time() AS at, sha256(CAST(counter AS TEXT)) AS h FROM "
                 "ticks;", id="row-time-and-hash"),
    # aggregates
    pytest.param(ORDERS + "SELECT shop, approx_percentile_cont(amount, 0.9) AS p90, "
                 "approx_percentile_cont(amount, 0.5, 200) AS p50, median(amount) AS m, "
                 "variance(amount) AS v, mean(amount) AS a FROM orders GROUP BY shop;",
                 id="aggregate-call-forms"),
    pytest.param(ORDERS + "SELECT shop, approx_percentile_cont_with_weight(amount, "
                 "character_length(shop), 0.5) AS w50, approx_percentile_cont_with_weight(id, "
                 "0.9) WITHIN GROUP (ORDER BY amount) AS w90 FROM orders GROUP BY shop;",
                 id="weighted-percentile"),
    # types and casts
    pytest.param("CREATE TABLE wide (a BOOLEAN, b INT, c INTEGER UNSIGNED, d BIGINT UNSIGNED, "
                 "e REAL, f DOUBLE, g VARCHAR, h CHAR, i STRING, j BYTEA, k JSON, l DECIMAL(10, "
                 "5), m TIMESTAMP, n SMALLINT UNSIGNED, o TINYINT UNSIGNED, p TEXT[]) WITH "
                 "(connector = 'single_file', path = 'w.jsonl', format = 'json', type = 'source');"
                 " SELECT CAST(b AS INT UNSIGNED) AS b2, d::BIGINT UNSIGNED AS d2, CAST(g AS JSON)"
                 " AS k2, p[1:2] AS head FROM wide;", id="types-and-casts"),
]


@pytest.mark.parametrize("sql", PLANS)
def test_plans(sql: str) -> None:
    assert plan_pipeline(sql).queries


def test_a_window_width_written_as_text_is_the_interval() -> None:
    spelled = plan_pipeline(TICKS + "SELECT count(*) FROM ticks GROUP BY hop('1 second', "
                                    "'4 seconds');").queries[0].aggregate
    assert spelled is not None
    assert spelled.window == WindowSpec("hop", 4_000_000, 1_000_000)


def test_create_table_as_is_a_view_read_by_the_query() -> None:
    plan = plan_pipeline(TICKS + "CREATE TABLE totals AS (SELECT count(*) AS n FROM ticks); "
                                 "SELECT n FROM totals;")
    assert "totals" not in plan.tables
    assert plan.queries[0].sources == ("ticks",)


def test_the_metadata_key_of_a_redis_lookup_table_is_its_primary_key_column() -> None:
    plan = plan_pipeline(ORDERS + SHOPS + "SELECT o.id, s.owner FROM orders o JOIN shops s "
                                          "ON o.shop = s.name;")
    shops = plan.tables["shops"]
    assert shops.primary_key == ("name",)
    assert [c.name for c in shops.columns] == ["name", "owner"]


def test_generated_columns_call_the_function_library() -> None:
    plan = plan_pipeline("CREATE TABLE raw (doc TEXT, kind TEXT GENERATED ALWAYS AS "
                         "(extract_json_string(doc, '$.kind'))) WITH (connector = "
                         "'single_file', path = 'r.jsonl', format = 'json', type = 'source');"
                         " SELECT kind FROM raw;")
    assert plan.tables["raw"].generated == {
        "kind": "CAST(GET_JSON_OBJECT(doc, '$.kind') AS STRING)"}


DOTTED_OPTIONS = [
    ("CREATE TABLE events (value TEXT) WITH (connector = 'single_file', path = 'e.jsonl', "
     "format = 'json', type = 'source', {json.unstructured} = true); SELECT value FROM events;",
     "events"),
    ("CREATE TEMPORARY TABLE users (id TEXT PRIMARY KEY, name TEXT) WITH (connector = 'redis', "
     "address = 'redis://localhost:6379', {value.type} = 'hash', {key.prefix} = 'user:', "
     "{lookup.cache.ttl} = INTERVAL '10' SECOND);\n" + TICKS + "SELECT u.name FROM ticks t "
     "JOIN users u ON CAST(t.counter AS TEXT) = u.id;", "users"),
]


@pytest.mark.parametrize(("template", "table"), DOTTED_OPTIONS, ids=["json", "redis"])
def test_dotted_option_names_plan_the_same_bare_or_quoted(template: str, table: str) -> None:
    def options(quote: str) -> dict[str, str]:
        sql = re.sub(r"\{([a-z.]+)\}", lambda key: f"{quote}{key.group(1)}{quote}", template)
        return dict(plan_pipeline(sql).tables[table].config.options)

    bare = options("")
    assert bare == options("'")
    assert set(re.findall(r"\{([a-z.]+)\}", template)) <= set(bare)


def test_the_call_form_of_approx_percentile_cont_is_its_fraction() -> None:
    plan = plan_pipeline(ORDERS + "SELECT shop, TUMBLE(INTERVAL '1' MINUTE) AS w, "
                                  "approx_percentile_cont(amount, 0.25) AS q FROM orders "
                                  "GROUP BY 1, 2;")
    aggregate = plan.queries[0].aggregate
    assert aggregate is not None
    assert [(a.function, a.fraction) for a in aggregate.aggregates] == [
        ("percentile_cont", 0.25)]


#: The connectors an error about an unknown or missing one lists.
KNOWN = ", ".join(sorted(CONNECTOR_OPTIONS))

REFUSED = [
    pytest.param("CREATE TABLE hits (url TEXT, at TIMESTAMP) WITH (connector = 'single_file', "
                 "path = 'h.jsonl', format = 'json', type = 'source');\nSELECT count(*) FROM "
                 "TUMBLE(hits, at, INTERVAL '1' MINUTE);", 2, 22,
                 "the table-valued form of TUMBLE (FROM TUMBLE(table, column, ...)) is not "
                 "supported yet; window in GROUP BY instead: SELECT ... FROM table GROUP BY "
                 "TUMBLE(...)", id="table-valued-window"),
    pytest.param("CREATE TABLE q (v TEXT) WITH (connector = 'fluvio', topic = 'q', "
                 "format = 'json');\nSELECT v FROM q;", 1, 43,
                 f"connector 'fluvio' is not supported yet; Spate's connectors: {KNOWN}",
                 id="fluvio"),
    pytest.param("CREATE TABLE q (v TEXT) WITH (connector = 'single_file', path = 'q.pq', "
                 "type = 'source', format = 'parquet');\nSELECT v FROM q;", 1, 99,
                 "format 'parquet' is not supported yet; Spate reads and writes 'json', "
                 "'debezium_json', 'avro', 'protobuf', 'raw_string' and 'raw_bytes'",
                 id="parquet"),
    pytest.param("CREATE TABLE q (v TEXT) WITH (connector = 'single_file', path = 'q.jsonl', "
                 "type = 'sink', format = 'json', 'json.include_schema' = 'true');\nINSERT INTO "
                 "q SELECT 'x';", 1, 108,
                 "table q: option 'json.include_schema' is not supported yet (by single_file "
                 "sink 'q'); remove it", id="json-include-schema"),
    pytest.param("CREATE TABLE q (v TEXT) WITH (connection = 'saved', type = 'source');\n"
                 "SELECT v FROM q;", 1, 31,
                 "option 'connection' (a saved connection, by name) is not supported yet: give "
                 "table q WITH (connector = ..., ...) and its options", id="saved-connection"),
    pytest.param("CREATE TABLE q (v TEXT, topic TEXT METADATA FROM 'topic') WITH (connector = "
                 "'single_file', path = 'q.jsonl', type = 'source', format = 'json');\n"
                 "SELECT topic FROM q;", 1, 50,
                 "METADATA FROM 'topic' is not supported: connector 'single_file' exposes no "
                 "metadata to a source", id="metadata-field"),
    pytest.param("CREATE TABLE q (k TEXT, v TEXT) WITH (connector = 'redis', type = 'sink', "
                 "address = 'redis://localhost:6379', format = 'json', target = 'list', "
                 "'target.key_prefix' = 'q:', 'target.ttl_secs' = '5');\nINSERT INTO q SELECT "
                 "'a', 'b';", 1, 173,
                 "table q: option 'target.ttl_secs' is not supported yet by redis sinks; "
                 "remove it", id="redis-sink-ttl"),
    pytest.param(ORDERS + "SELECT gcd(id, 6) FROM orders;", 4, 8,
                 "function 'gcd' is not supported yet (Spark has no native gcd)", id="gcd"),
    pytest.param(ORDERS + "SELECT shop, array_agg(id ORDER BY amount) AS ids FROM orders "
                 "GROUP BY shop;", 4, 14,
                 "ordering inside an aggregate (array_agg(x ORDER BY y)) is not supported yet",
                 id="ordered-aggregate"),
    pytest.param(ORDERS + "SELECT shop, count(*) FILTER (WHERE amount > 1) AS big FROM orders "
                 "GROUP BY shop;", 4, 23,
                 "an aggregate's FILTER (WHERE ...) is not supported yet; use CASE WHEN inside "
                 "the aggregate", id="aggregate-filter"),
    pytest.param(ORDERS + "SELECT shop, sum(DISTINCT amount) AS s FROM orders GROUP BY shop;",
                 4, 14, "sum(DISTINCT ...) is not supported yet; of the aggregates only count "
                 "takes DISTINCT", id="sum-distinct"),
    pytest.param(ORDERS + RETURNS + "SELECT id, shop FROM orders JOIN returns USING (id);",
                 7, 29, "JOIN ... USING is not supported yet; write ON a.k = b.k", id="using"),
    pytest.param(ORDERS + RETURNS + "SELECT o.n FROM (SELECT shop, SESSION(INTERVAL '1' MINUTE)"
                 " AS w, count(*) AS n FROM orders GROUP BY 1, 2) o JOIN (SELECT shop, SESSION("
                 "INTERVAL '1' MINUTE) AS w, count(*) AS n FROM returns GROUP BY 1, 2) r ON "
                 "o.shop = r.shop AND o.w = r.w;", 7, 122,
                 "SESSION windows cannot be joined (a windowed join of SESSION windows is not "
                 "supported yet); use TUMBLE or HOP", id="session-join"),
    pytest.param("CREATE TABLE q (\"UserId\" TEXT) WITH (connector = 'single_file', path = "
                 "'q.jsonl', type = 'source', format = 'json');\nSELECT userid FROM q;", 1, 17,
                 "case-sensitive column names (\"UserId\") are not supported yet: Spate folds "
                 "names to lower case, so the column would not match its field",
                 id="case-sensitive-column"),
    pytest.param(ORDERS + "SELECT regexp_like(shop, 'a*', 'U') FROM orders;", 4, 32,
                 "regexp_like(): flag 'U' is not supported yet (supported: i, m, s)",
                 id="regex-flag"),
    pytest.param(ORDERS + "SELECT to_char(placed_at, 'week %U') FROM orders;", 4, 27,
                 "to_char(): format specifier %U is not supported yet (supported: %Y %y %m %b "
                 "%h %B %d %e %a %A %j %H %k %I %l %p %P %M %S %f %Z %z %T %X %R %D %x %F %r %c "
                 "%+ %.f %-d ...)", id="time-format"),
    pytest.param(ORDERS + "SELECT extract_json(doc, '$.lines[*].sku') FROM orders;", 4, 26,
                 "extract_json(): JSONPath '$.lines[*].sku' is not supported yet; use a path from"
                 " '$' of .field and [index] steps, without wildcards", id="jsonpath-wildcard"),
    pytest.param(ORDERS + "SELECT digest(shop, 'blake3') FROM orders;", 4, 21,
                 "digest() algorithm 'blake3' is not supported yet; use one of md5, sha1, sha224,"
                 " sha256, sha384, sha512", id="blake3"),
    pytest.param(TICKS + "SELECT window, avg(n) AS a FROM (SELECT counter % 2 AS k, HOP("
                 "INTERVAL '1' SECOND, INTERVAL '3' SECOND) AS window, count(*) AS n FROM ticks "
                 "GROUP BY 1, 2) GROUP BY window;", 2, 165,
                 "re-aggregating the output of a HOP window is not supported yet; re-aggregate "
                 "TUMBLE output, or aggregate the source rows in the window directly",
                 id="reaggregate-hop"),
    pytest.param(ORDERS + "SELECT array_length(tags, 2) FROM orders;", 4, 27,
                 "array_length(): dimensions other than 1 are not supported yet",
                 id="array-dimension"),
]


@pytest.mark.parametrize(("sql", "line", "column", "message"), REFUSED)
def test_refused_where_it_is_written(sql: str, line: int, column: int, message: str) -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(sql)
    assert caught.value.message == message
    assert (caught.value.line, caught.value.column) == (line, column), str(caught.value)


def test_not_yet_functions_are_not_in_the_library() -> None:
    assert not set(NOT_YET) & set(FUNCTIONS)


def test_not_yet_connectors_are_not_in_the_registry() -> None:
    assert not NOT_YET_CONNECTORS & set(CONNECTORS)


#: Expressions over the one row of ``t`` and the dialect's result for each.
RESULTS: list[tuple[str, Any]] = [
    ("array_remove(arr, 2)", [1, 2, 3, 2]),
    ("array_remove_n(arr, 2, 2)", [1, 3, 2]),
    ("array_remove_all(arr, 2)", [1, 3]),
    ("array_replace(arr, 2, 5)", [1, 5, 2, 3, 2]),
    ("array_replace_n(arr, 2, 5, 2)", [1, 5, 5, 3, 2]),
    ("array_replace_all(arr, 2, 5)", [1, 5, 5, 3, 5]),
    ("array_positions(arr, 2)", [2, 3, 5]),
    ("array_position(arr, 2, 3)", 3),
    ("array_position(arr, 9)", None),
    ("array_slice(arr, -3, -1)", [2, 3, 2]),
    ("array_slice(arr, 2, -4)", [2]),
    ("arr[2:3]", [2, 2]),
    ("array_pop_front(arr)", [2, 2, 3, 2]),
    ("array_pop_back(arr)", [1, 2, 2, 3]),
    ("trim_array(arr, 4)", [1]),
    ("array_resize(arr, 7, 0)", [1, 2, 2, 3, 2, 0, 0]),
    ("array_sort(holes)", [None, 1, 3]),
    ("array_sort(holes, 'DESC', 'NULLS LAST')", [3, 1, None]),
    ("list_prepend(0, arr)", [0, 1, 2, 2, 3, 2]),
    ("string_to_array('a b -', ' ', '-')", ["a", "b", None]),
    ("struct(word, n AS num)", {"c0": "aBc", "num": 7}),
    ("regexp_like(word, '(b|d)', 'i')", True),
    ("regexp_match(word, '(b|d)', 'i')", ["B"]),
    ("regexp_replace('foobarbaz', 'b(..)', 'X\\1Y', 'g')", "fooXarYXazY"),
    ("to_timestamp('05-17-2023 03:59:00.25', '%Y', '%m-%d-%Y %H:%M:%S%.f')",
     dt.datetime(2023, 5, 17, 3, 59, 0, 250000)),
    ("to_char(ts, '%A %-d %B %Y, %H:%M')", "Sunday 7 January 2024, 00:07"),
    ("date_part('dow', ts)", 0),
    ("extract(epoch FROM ts)", 1704586051.5),
    ("date_part('millisecond', ts)", 31500.0),
    ("date_bin(INTERVAL '15' MINUTE, ts, TIMESTAMP '2024-01-07 00:05:00')",
     dt.datetime(2024, 1, 7, 0, 5)),
    ("to_timestamp_nanos(1704586051500000999)", dt.datetime(2024, 1, 7, 0, 7, 31, 500000)),
    ("iszero(n - 7)", True),
    ("position('c' IN word)", 3),
    ("overlay('Txxxxas' PLACING 'hom' FROM 2 FOR 4)", "Thomas"),
    ("CAST(n AS BIGINT UNSIGNED)", 7),
    ("array_element(arr, 0)", None),
    ("regexp_replace('a1b22', '(?P<d>[0-9]+)', '<$1>', 'g')", "a<1>b<22>"),
]


@pytest.mark.spark
def test_translated_functions_give_the_dialects_results(spark: Any) -> None:
    source = ("CREATE TABLE t (word TEXT, n BIGINT, arr BIGINT[], holes BIGINT[], ts TIMESTAMP "
              "NOT NULL, WATERMARK FOR ts) WITH (connector = 'single_file', path = 't.jsonl', "
              "format = 'json', type = 'source');\n")
    items = ", ".join(f"{expression} AS r{i}" for i, (expression, _) in enumerate(RESULTS))
    sql = plan_pipeline(source + f"SELECT {items} FROM t;").queries[0].output_sql
    at = dt.datetime(2024, 1, 7, 0, 7, 31, 500000)
    spark.createDataFrame(
        [("aBc", 7, [1, 2, 2, 3, 2], [3, None, 1], at, at)],
        "word string, n bigint, arr array<bigint>, holes array<bigint>, ts timestamp, "
        "_spate_event_time timestamp").createOrReplaceTempView("t")
    (row,) = spark.sql(sql).collect()
    got = row.asDict(recursive=True)
    for i, (expression, expected) in enumerate(RESULTS):
        assert got[f"r{i}"] == expected, expression
