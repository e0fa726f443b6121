"""Planning of the aggregates (docs/sql/functions.md) beyond count/sum/avg/min/max."""

from __future__ import annotations

import pytest

from spate.engine.planner import PlanningError, plan_pipeline
from spate.engine.planner.plan import UpdatingAggregate, WindowAggregate

TABLES = """
CREATE TABLE t (k TEXT, v BIGINT, ts TIMESTAMP NOT NULL) WITH (connector = 'single_file',
  path = 'in.jsonl', format = 'json', type = 'source', event_time_field = 'ts');
CREATE TABLE dbz WITH (connector = 'single_file', path = 'o.jsonl', format = 'debezium_json',
  type = 'sink');
"""
CALLS = ", ".join(f"{call} AS c{i}" for i, call in enumerate([
    "stddev(v)", "stddev_samp(v)", "stddev_pop(v)", "var(v)", "var_samp(v)", "variance(v)",
    "var_pop(v)", "bit_xor(v)", "bit_and(v)", "bit_or(v)", "bool_and(v > 0)",
    "bool_or(v > 0)", "median(v)", "approx_median(v)", "array_agg(v)", "approx_distinct(v)",
    "approx_percentile_cont(0.25) WITHIN GROUP (ORDER BY v)",
    "first_value(v)", "last_value(v)",
    "approx_percentile_cont(0.75) WITHIN GROUP (ORDER BY v)"]))
FUNCTIONS = ["stddev_samp", "stddev_samp", "stddev_pop", "var_samp", "var_samp", "var_samp",
             "var_pop", "bit_xor", "bit_and", "bit_or", "min", "max", "median", "median",
             "array_agg", "count_distinct", "percentile_cont", "first_value", "last_value",
             "percentile_cont"]


def _operator(sql: str) -> WindowAggregate | UpdatingAggregate:
    (operator,) = plan_pipeline(TABLES + sql).queries[-1].operators
    assert isinstance(operator, WindowAggregate | UpdatingAggregate)
    return operator


@pytest.mark.parametrize("group_by", ["k, TUMBLE(INTERVAL '1' SECOND)",
                                      "k, HOP(INTERVAL '1' SECOND, INTERVAL '3' SECOND)",
                                      "k, SESSION(INTERVAL '1' SECOND)", "k"])
def test_more_aggregates_plan_in_windowed_and_updating_aggregates(group_by: str) -> None:
    operator = _operator(f"INSERT INTO dbz SELECT k, {CALLS} FROM t GROUP BY {group_by};")
    # calls of one function over one argument share their aggregate
    fractions = iter([0.25, 0.75])
    expected = [(f, next(fractions) if f == "percentile_cont" else None) for f in FUNCTIONS]
    assert [(a.function, a.fraction) for a in operator.aggregates] == \
        list(dict.fromkeys(expected))
    # bool_and and bool_or are min and max of their argument as a boolean
    assert "CAST(`v` > 0 AS BOOLEAN) AS `a1`" in operator.input_sql


@pytest.mark.parametrize("call", ["kurtosis(v)", "any_value(v)"])
def test_other_aggregates_are_located_errors(call: str) -> None:
    sql = f"INSERT INTO dbz SELECT k, {call} FROM t GROUP BY k;"
    with pytest.raises(PlanningError, match="not supported yet in updating aggregates") \
            as caught:
        plan_pipeline(TABLES + sql)
    assert "bool_or" in str(caught.value)  # the message lists what is supported
    assert caught.value.column == len("INSERT INTO dbz SELECT k, ") + 1


@pytest.mark.parametrize("call, message", [
    ("approx_percentile_cont(1.5) WITHIN GROUP (ORDER BY v)", "p must be one number from 0 to 1"),
    ("approx_percentile_cont(0.5) WITHIN GROUP (ORDER BY v DESC)", "one ascending x"),
    ("percentile_cont(0.5) WITHIN GROUP (ORDER BY v)", "only for approx_percentile_cont"),
    ("approx_percentile_cont_with_weight(v, 0.5)", "takes 3 or 4 arguments"),
    ("approx_percentile_cont_with_weight(v, v, 2)", "p must be one number from 0 to 1"),
    ("approx_percentile_cont_with_weight(0.5) WITHIN GROUP (ORDER BY v)",
     "p must be one number from 0 to 1"),
])
def test_percentile_errors(call: str, message: str) -> None:
    with pytest.raises(PlanningError, match=message) as caught:
        plan_pipeline(TABLES + f"INSERT INTO dbz SELECT k, {call} FROM t GROUP BY k;")
    assert caught.value.column == len("INSERT INTO dbz SELECT k, ") + 1


def test_paired_aggregates_take_y_and_x_as_doubles() -> None:
    operator = _operator("INSERT INTO dbz SELECT k, corr(v, v + 1) AS c, covar(v, v) AS s, "
                         "regr_count(v, v) AS n FROM t GROUP BY k, TUMBLE(INTERVAL '1' SECOND);")
    assert [a.function for a in operator.aggregates] == ["corr", "covar_samp", "regr_count"]
    # a pair with a NULL is left out
    assert "IF(`v` IS NULL OR `v` + 1 IS NULL, NULL, ARRAY(CAST(`v` AS DOUBLE), " \
        "CAST(`v` + 1 AS DOUBLE))) AS `a0`" in operator.input_sql


def test_weighted_percentile_takes_value_and_weight_pairs() -> None:
    operator = _operator(
        "INSERT INTO dbz SELECT k, approx_percentile_cont_with_weight(v, v % 3, 0.25) AS a, "
        "approx_percentile_cont_with_weight(v % 3, 0.9, 100) WITHIN GROUP (ORDER BY v) AS b "
        "FROM t GROUP BY k, TUMBLE(INTERVAL '1' SECOND);")
    assert [(a.function, a.fraction, a.argument) for a in operator.aggregates] == [
        ("percentile_cont_weighted", 0.25, "a0"), ("percentile_cont_weighted", 0.9, "a0")]
    # a row without a value or a positive weight is left out
    assert "IF(`v` IS NULL OR `v` % 3 IS NULL OR `v` % 3 <= 0, NULL, ARRAY(CAST(`v` AS " \
        "DOUBLE), CAST(`v` % 3 AS DOUBLE))) AS `a0`" in operator.input_sql
    call = "approx_percentile_cont_with_weight(v, v, 0.5, 'x')"
    with pytest.raises(PlanningError, match="centroids must be a positive integer") as caught:
        plan_pipeline(TABLES + f"INSERT INTO dbz SELECT k, {call} FROM t GROUP BY k;")
    assert caught.value.column == len("INSERT INTO dbz SELECT k, ") + call.index("'x'") + 1
