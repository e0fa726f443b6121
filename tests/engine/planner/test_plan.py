"""Planning of valid pipelines: what runs natively and what as Spate operators."""

from __future__ import annotations

from spate.engine.explain import explain_plan
from spate.engine.planner import plan_pipeline

SOURCE = """
CREATE TABLE bids (auction BIGINT, price BIGINT, ts TIMESTAMP NOT NULL,
                   WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)
WITH (connector = 'single_file', path = 'data/bids.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = 'data/out.jsonl', format = 'json',
                       type = 'sink');
"""


def test_hop_aggregate_splits_into_native_and_operator_parts() -> None:
    plan = plan_pipeline(SOURCE + """
INSERT INTO out
SELECT auction, w.end AS closed_at, views FROM (
  SELECT auction, HOP(INTERVAL '10' SECOND, INTERVAL '1' MINUTE) AS w, count(*) AS views
  FROM bids WHERE price > 10 GROUP BY auction, w);
""")
    (query,) = plan.queries
    agg = query.aggregate
    assert agg is not None
    assert (agg.window.kind, agg.window.slide_us, agg.window.width_us) == \
        ("hop", 10_000_000, 60_000_000)
    assert [a.function for a in agg.aggregates] == ["count_star"]
    assert "`price` > 10" in agg.input_sql
    assert agg.output_view in query.output_sql
    assert query.output_columns == ("auction", "closed_at", "views")
    assert plan.tables["bids"].watermark_sql is not None
    explained = explain_plan(plan)
    assert "[spate]" in explained and "[spark]" in explained


def test_stateless_query_has_no_operator_and_expands_star() -> None:
    plan = plan_pipeline(SOURCE + "INSERT INTO out SELECT * FROM bids WHERE price > 3;")
    (query,) = plan.queries
    assert query.aggregate is None
    assert query.output_columns == ("auction", "price", "ts")
    assert "_spate" not in query.output_sql.replace("`_spate_event_time`", "")


def test_group_by_ordinals_aliases_and_repeated_aggregates() -> None:
    plan = plan_pipeline(SOURCE + """
INSERT INTO out SELECT auction % 10 AS bucket, TUMBLE(INTERVAL '1' MINUTE) AS w,
  count(*) AS n, count(*) + 1 AS n1, sum(price) AS total, avg(price) AS mean_price,
  count(DISTINCT price) AS prices, min(price) AS low, max(price) AS high
FROM bids GROUP BY 1, w;
""")
    agg = plan.queries[0].aggregate
    assert agg is not None and agg.window.kind == "tumble"
    assert [a.function for a in agg.aggregates] == \
        ["count_star", "sum", "avg", "count_distinct", "min", "max"]
    assert len(agg.key_columns) == 1


def test_two_sinks_in_one_pipeline() -> None:
    plan = plan_pipeline(SOURCE + """
CREATE TABLE audit WITH (connector = 'blackhole');
INSERT INTO out SELECT auction FROM bids;
INSERT INTO audit SELECT price FROM bids;
""")
    assert [q.sink for q in plan.queries] == ["out", "audit"]
    assert [t.name for t in plan.sources] == ["bids"]


def test_session_window_and_views() -> None:
    plan = plan_pipeline(SOURCE + """
CREATE VIEW pricey AS SELECT * FROM bids WHERE price > 100;
INSERT INTO out SELECT auction, SESSION(INTERVAL '30' SECOND) AS s, count(*) AS n
FROM pricey GROUP BY auction, s;
""")
    agg = plan.queries[0].aggregate
    assert agg is not None and agg.window.kind == "session"
    assert agg.window.gap_us == 30_000_000
