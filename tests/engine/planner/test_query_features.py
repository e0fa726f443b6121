"""Planning of UNION ALL, CTEs and FROM subqueries, views, memory tables and UNNEST:
all of them stay native Spark SQL in front of the window operator."""

from __future__ import annotations

import pytest

from spate.engine.planner import PlanningError, plan_pipeline
from spate.engine.planner.plan import UpdatingJoin, WindowAggregate

SOURCES = """
CREATE TABLE a (page TEXT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'a.jsonl', format = 'json', type = 'source');
CREATE TABLE b (page TEXT, tags TEXT[], ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'b.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
CREATE TABLE out2 WITH (connector = 'blackhole');
"""
WINDOWED = "SELECT page, TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n FROM {} GROUP BY 1, 2"


def test_union_all_of_two_sources_feeds_one_window_operator() -> None:
    plan = plan_pipeline(SOURCES + "INSERT INTO out SELECT page, n FROM ("
                         + WINDOWED.format("(SELECT page FROM a UNION ALL SELECT page FROM b)")
                         + ");")
    (query,) = plan.queries
    assert query.sources == ("a", "b")
    assert query.aggregate is not None
    # Both branches pass their rows' event time to the operator's input.
    assert query.aggregate.input_sql.count("`_spate_event_time`") == 3
    assert "UNION ALL" in query.aggregate.input_sql


def test_ctes_nest_and_are_inlined_as_subqueries() -> None:
    plan = plan_pipeline(SOURCES + """
INSERT INTO out
WITH x AS (SELECT page, ts FROM a WHERE page <> '/'),
     y AS (SELECT upper(page) AS page FROM x)
SELECT page, count(*) AS n FROM y GROUP BY page, TUMBLE(INTERVAL '1' SECOND);""")
    (query,) = plan.queries
    assert query.aggregate is not None
    assert "WITH" not in query.aggregate.input_sql
    assert "AS `x`" in query.aggregate.input_sql and "AS `y`" in query.aggregate.input_sql
    # A top-level windowed SELECT reads the operator's output, not the source.
    assert query.aggregate.output_view in query.output_sql
    assert query.output_columns == ("page", "n")


def test_cte_shadows_a_table_and_sees_only_earlier_ctes() -> None:
    plan = plan_pipeline(SOURCES + "INSERT INTO out WITH b AS (SELECT page FROM a) "
                         "SELECT page FROM b;")
    assert plan.queries[0].sources == ("a",)


def test_view_read_by_two_queries_reads_its_source_in_each() -> None:
    plan = plan_pipeline(SOURCES + """
CREATE VIEW v AS SELECT page, ts FROM a WHERE page LIKE '/%';
INSERT INTO out SELECT page FROM v;
INSERT INTO out2 SELECT page, n FROM (""" + WINDOWED.format("v") + ");")
    assert [q.sources for q in plan.queries] == [("a",), ("a",)]
    assert [q.sink for q in plan.queries] == ["out", "out2"]
    assert plan.queries[1].aggregate is not None
    assert [t.name for t in plan.sources] == ["a"]  # the runner reads it once per epoch


def test_memory_table_is_its_insert_inlined_with_declared_types() -> None:
    plan = plan_pipeline(SOURCES + """
CREATE TABLE m (section TEXT, n BIGINT);
INSERT INTO m SELECT page, cardinality(tags) FROM a;
INSERT INTO out SELECT section FROM m WHERE n > 1;""")
    (query,) = plan.queries  # the INSERT INTO m is no query of its own
    assert query.sink == "out" and query.sources == ("a",)
    assert "CAST(" in query.output_sql and "AS BIGINT)" in query.output_sql
    assert "m" not in plan.tables


def test_unnest_explodes_one_array_natively() -> None:
    plan = plan_pipeline(SOURCES + "INSERT INTO out SELECT page, UNNEST(tags) AS t1, "
                         "UNNEST(tags) AS t2 FROM a WHERE page <> '/';")
    (query,) = plan.queries
    assert query.output_columns == ("page", "t1", "t2")
    assert query.output_sql.count("EXPLODE(") == 1  # the same array, unnested once
    assert query.aggregate is None


def test_unnest_feeds_a_window_aggregate() -> None:
    plan = plan_pipeline(SOURCES + "INSERT INTO out SELECT tag, n FROM (SELECT UNNEST(tags) "
                         "AS tag, TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n FROM a "
                         "GROUP BY 1, 2);")
    aggregate = plan.queries[0].aggregate
    assert aggregate is not None and "EXPLODE(`tags`)" in aggregate.input_sql


def test_unnest_in_a_view_can_be_joined() -> None:
    plan = plan_pipeline(SOURCES + """
CREATE VIEW tagged AS SELECT page, UNNEST(tags) AS tag FROM a;
INSERT INTO out SELECT t.tag, b.page FROM tagged AS t JOIN b ON t.page = b.page;""")
    (join,) = plan.queries[0].operators
    assert isinstance(join, UpdatingJoin)
    assert "EXPLODE(`tags`)" in join.left_sql and "EXPLODE" not in join.right_sql
    assert plan.queries[0].output_columns == ("tag", "page")


def test_unnest_in_a_subquery_of_a_windowed_join() -> None:
    plan = plan_pipeline(SOURCES + """
INSERT INTO out SELECT x.page, x.n, y.n AS m
FROM (SELECT UNNEST(tags) AS page, TUMBLE(INTERVAL '1' SECOND) AS w, count(*) AS n
      FROM a GROUP BY 1, 2) AS x
JOIN (""" + WINDOWED.format("b") + ") AS y ON x.page = y.page;")
    first, second = plan.queries[0].operators
    assert isinstance(first, WindowAggregate) and isinstance(second, WindowAggregate)
    assert ["EXPLODE(`tags`)" in o.input_sql for o in (first, second)].count(True) == 1


def test_unnest_in_the_joining_select_itself_is_refused() -> None:
    with pytest.raises(PlanningError, match="UNNEST cannot be used in a SELECT with a JOIN"):
        plan_pipeline(SOURCES + "INSERT INTO out SELECT UNNEST(a.tags) AS tag "
                      "FROM a JOIN b ON a.page = b.page;")


def test_group_by_may_end_with_a_column_named_window() -> None:
    # ``window`` is a name here, not the WINDOW clause: the comma before it ends nothing.
    plan = plan_pipeline(SOURCES + "INSERT INTO out SELECT page, n FROM (SELECT page, "
                         "TUMBLE(INTERVAL '1' SECOND) AS window, count(*) AS n FROM a "
                         "GROUP BY page, window);")
    assert plan.queries[0].aggregate is not None
    with pytest.raises(PlanningError, match="GROUP BY ends with a comma"):
        plan_pipeline(SOURCES + "INSERT INTO out SELECT page, n FROM (SELECT page, "
                      "TUMBLE(INTERVAL '1' SECOND) AS window, count(*) AS n FROM a "
                      "GROUP BY page, window, );")
