"""Planning of windowed joins and of window functions (OVER): both run natively in
Spark over the rows the window operators fire in an epoch."""

from __future__ import annotations

import pytest

from spate.engine.planner import PlanningError, plan_pipeline
from spate.engine.planner.plan import WindowAggregate

SOURCES = """
CREATE TABLE clicks (user TEXT, page TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'c.jsonl', format = 'json', type = 'source');
CREATE TABLE buys (user TEXT, amount BIGINT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'b.jsonl', format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'blackhole');
"""
CLICKS = ("(SELECT user, TUMBLE(INTERVAL '10' SECOND) AS window, count(*) AS n "
          "FROM clicks GROUP BY 1, 2)")
BUYS = ("(SELECT user, TUMBLE(INTERVAL '10' SECOND) AS window, sum(amount) AS total "
        "FROM buys GROUP BY 1, 2)")


def _error(sql: str) -> PlanningError:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(SOURCES + sql)
    return caught.value


@pytest.mark.parametrize("kind", ["JOIN", "INNER JOIN", "LEFT JOIN", "RIGHT OUTER JOIN",
                                  "FULL OUTER JOIN"])
def test_windowed_join_is_two_window_operators_and_a_native_join(kind: str) -> None:
    plan = plan_pipeline(SOURCES + f"INSERT INTO out SELECT c.user, c.n, b.total "
                         f"FROM {CLICKS} AS c {kind} {BUYS} AS b ON c.user = b.user;")
    (query,) = plan.queries
    assert [type(o) for o in query.operators] == [WindowAggregate, WindowAggregate]
    assert query.sources == ("clicks", "buys")
    assert not query.updating
    # Rows match only within one window: Spate adds the window equality.
    assert "`c`.`window` = `b`.`window`" in query.output_sql
    assert all(o.output_view in query.output_sql for o in query.operators)
    assert query.output_columns == ("user", "n", "total")


def test_an_explicit_window_equality_is_not_added_twice() -> None:
    plan = plan_pipeline(SOURCES + f"INSERT INTO out SELECT c.user FROM {CLICKS} AS c "
                         f"JOIN {BUYS} AS b ON c.window = b.window AND c.user = b.user;")
    assert plan.queries[0].output_sql.count("`c`.`window` = `b`.`window`") == 1


def test_windowed_join_output_can_be_aggregated_again_in_its_window() -> None:
    plan = plan_pipeline(SOURCES + f"""
INSERT INTO out SELECT window, count(*) AS users, sum(total) AS spent FROM (
  SELECT c.user, c.window, b.total FROM {CLICKS} AS c JOIN {BUYS} AS b ON c.user = b.user)
GROUP BY window;""")
    operators = plan.queries[0].operators
    assert len(operators) == 3
    assert operators[2].input_sql.count("__spate_q0_window") == 2  # type: ignore[attr-defined]


def test_windowed_join_errors_are_located() -> None:
    error = _error(f"INSERT INTO out SELECT c.user FROM {CLICKS} AS c JOIN buys AS b "
                   "ON c.user = b.user;")
    assert "both sides windowed" in error.message and "'b' is not windowed" in error.message
    hop = BUYS.replace("TUMBLE(INTERVAL '10' SECOND)", "HOP(INTERVAL '5' SECOND, "
                       "INTERVAL '10' SECOND)")
    error = _error(f"INSERT INTO out SELECT c.user FROM {CLICKS} AS c JOIN {hop} AS b "
                   "ON c.user = b.user;")
    assert "same window" in error.message and "HOP" in error.message
    session = CLICKS.replace("TUMBLE", "SESSION")
    error = _error(f"INSERT INTO out SELECT c.user FROM {session} AS c JOIN "
                   f"{BUYS.replace('TUMBLE', 'SESSION')} AS b ON c.user = b.user;")
    assert "SESSION windows cannot be joined" in error.message
    no_window = "(SELECT user, count(*) AS n FROM clicks GROUP BY user, " \
                "TUMBLE(INTERVAL '10' SECOND))"
    error = _error(f"INSERT INTO out SELECT c.user FROM {no_window} AS c JOIN {BUYS} AS b "
                   "ON c.user = b.user;")
    assert "must select its window" in error.message
    error = _error(f"INSERT INTO out SELECT user FROM {CLICKS} AS c JOIN {BUYS} AS b "
                   "ON c.user = b.user;")
    assert "ambiguous" in error.message and (error.line, error.column) == (7, 24)
    error = _error(f"INSERT INTO out SELECT c.user FROM {CLICKS} AS c CROSS JOIN {BUYS} AS b;")
    assert "CROSS JOIN is not supported" in error.message
    error = _error(f"INSERT INTO out SELECT c.user FROM {CLICKS} AS c JOIN {BUYS} "
                   "ON c.user = c.user;")
    assert "needs an alias" in error.message


TOP = """
INSERT INTO out SELECT page, views, rk FROM (
  SELECT page, views, {call} OVER (PARTITION BY {partition} ORDER BY views DESC) AS rk
  FROM (SELECT page, TUMBLE(INTERVAL '1' MINUTE) AS w, count(*) AS views
        FROM clicks GROUP BY 1, 2))
WHERE rk <= 3;"""


@pytest.mark.parametrize("call", ["row_number()", "rank()", "dense_rank()", "lag(views)",
                                  "lead(views, 1)", "first_value(page)", "last_value(page)"])
def test_window_functions_over_a_windowed_aggregate_stay_native(call: str) -> None:
    plan = plan_pipeline(SOURCES + TOP.format(call=call, partition="w"))
    (query,) = plan.queries
    assert len(query.operators) == 1
    assert "OVER (PARTITION BY `w`" in query.output_sql


def test_window_function_rules() -> None:
    error = _error(TOP.format(call="row_number()", partition="page"))
    assert "PARTITION BY the input's window column (w)" in error.message
    assert (error.line, error.column) == (9, 55)
    error = _error("INSERT INTO out SELECT page, row_number() OVER (PARTITION BY page "
                   "ORDER BY ts) AS rk FROM clicks;")
    assert "need TUMBLE- or HOP-windowed input" in error.message
    error = _error("INSERT INTO out SELECT page, rk FROM (SELECT page, row_number() OVER "
                   "(PARTITION BY w ORDER BY n) AS rk, rank() OVER (PARTITION BY w ORDER BY "
                   "page) AS r2 FROM (SELECT page, TUMBLE(INTERVAL '1' MINUTE) AS w, count(*) "
                   "AS n FROM clicks GROUP BY 1, 2));")
    assert "one OVER (...) specification" in error.message
