"""Planning of updating aggregates, SELECT DISTINCT, UNION and updating sinks."""

from __future__ import annotations

import pytest

from spate.engine.planner import PlanningError, plan_pipeline
from spate.engine.planner.plan import QueryPlan, UpdatingAggregate

TABLES = """
CREATE TABLE t (k TEXT, v BIGINT) WITH (connector = 'single_file', path = 'in.jsonl',
  format = 'json', type = 'source');
CREATE TABLE changes (id BIGINT PRIMARY KEY, k TEXT, v BIGINT) WITH (
  connector = 'single_file', path = 'c.jsonl', format = 'debezium_json', type = 'source');
CREATE TABLE dbz WITH (connector = 'single_file', path = 'o.jsonl', format = 'debezium_json',
  type = 'sink');
CREATE TABLE plain WITH (connector = 'single_file', path = 'p.jsonl', format = 'json',
  type = 'sink');
CREATE TABLE hole WITH (connector = 'blackhole');
"""


def _query(sql: str) -> QueryPlan:
    return plan_pipeline(TABLES + sql).queries[-1]


def _aggregates(query: QueryPlan) -> list[UpdatingAggregate]:
    found = [o for o in query.operators if isinstance(o, UpdatingAggregate)]
    assert len(found) == len(query.operators)
    return found


def test_group_by_without_window_is_an_updating_aggregate() -> None:
    query = _query("INSERT INTO dbz SELECT k, count(*) AS n, min(v) AS low FROM t "
                   "GROUP BY k HAVING sum(v) > 2;")
    (operator,) = _aggregates(query)
    assert query.updating and query.output_columns == ("k", "n", "low")
    assert [a.function for a in operator.aggregates] == ["count_star", "min", "sum"]
    assert not operator.updating_input
    assert operator.ttl_us == 24 * 3600 * 1_000_000
    # HAVING filters the changes (a withdrawal like the row it withdraws)
    assert "WHERE `agg2` > 2" in query.output_sql
    assert "`_spate_retract`, `_spate_key`" in query.output_sql


def test_updating_input_and_ttl() -> None:
    query = _query("SET updating_ttl = INTERVAL '1' HOUR; INSERT INTO dbz SELECT n, "
                   "count(*) AS c FROM (SELECT k, count(*) AS n FROM changes GROUP BY k) "
                   "WHERE n > 1 GROUP BY n;")
    inner, outer = _aggregates(query)
    assert inner.updating_input and outer.updating_input
    assert "`_spate_retract`" in outer.input_sql and "WHERE `n` > 1" in outer.input_sql
    assert outer.ttl_us == 3600 * 1_000_000


def test_distinct_and_union_group_by_every_column() -> None:
    distinct = _query("INSERT INTO dbz SELECT DISTINCT k, v + 1 AS w FROM t;")
    (operator,) = _aggregates(distinct)
    assert operator.key_columns == ("k0", "k1") and operator.aggregates == ()
    assert distinct.output_columns == ("k", "w")
    union = _query("INSERT INTO dbz SELECT k FROM t UNION SELECT k FROM changes "
                   "UNION SELECT 'x' FROM t;")
    (operator,) = _aggregates(union)  # one DISTINCT over the three branches
    assert operator.updating_input
    # the append-only branches add rows without a key
    assert "FALSE AS `_spate_retract`" in operator.input_sql


@pytest.mark.parametrize("sink", ["dbz", "hole"])
def test_updating_rows_go_to_debezium_or_formatless_sinks(sink: str) -> None:
    assert _query(f"INSERT INTO {sink} SELECT id, v FROM changes WHERE v > 0;").updating


@pytest.mark.parametrize("sql, message, column", [
    ("INSERT INTO plain SELECT k, count(*) FROM t GROUP BY k;", "use format = 'debezium_json'",
     13),
    ("INSERT INTO plain SELECT k FROM changes;", "use format = 'debezium_json'", 13),
    ("SELECT DISTINCT ON (k) k FROM t;", "DISTINCT ON", 21),
    ("SELECT k, TUMBLE(INTERVAL '1' SECOND) AS w, count(*) FROM changes GROUP BY k, w;",
     "cannot read updating rows", 11),
    ("SELECT k, kurtosis(v) FROM t GROUP BY k;", "not supported yet in updating aggregates", 11),
])
def test_errors(sql: str, message: str, column: int) -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(TABLES + sql)
    assert message in caught.value.message
    assert (caught.value.line, caught.value.column) == (TABLES.count("\n") + 1, column)
