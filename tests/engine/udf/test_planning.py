"""UDF calls at planning: a pipeline's UDFs are callable and type-checked, names
clashing with built-ins are refused, and other names still fail, all located."""

from __future__ import annotations

import textwrap

import pytest

from spate.engine.planner import PlanningError, plan_pipeline
from spate.engine.udf import UdfDefinitionError, UdfRegistry, load_udfs

SOURCE = """CREATE TABLE t (n BIGINT, x DOUBLE, s TEXT, ts TIMESTAMP NOT NULL, WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
"""
UDFS = textwrap.dedent("""\
    from datetime import datetime
    from typing import Optional
    import pyarrow as pa
    from spate.engine.udf import udaf, udf, vectorized_udf

    @udf
    def ratio(a: int, b: Optional[int]) -> Optional[float]:
        return None if not b else a / b

    @udf
    def shout(s: str) -> str:
        return s.upper()

    @vectorized_udf(args=[float], returns=float)
    def halved(x: pa.Array) -> pa.Array:
        return x

    @udaf
    def spread(values: list[float]) -> float:
        return max(values) - min(values)
    """)


@pytest.fixture(scope="module")
def udfs() -> UdfRegistry:
    return load_udfs(UDFS, "udfs.py")


def test_udf_calls_plan_into_spark_calls_of_their_name(udfs: UdfRegistry) -> None:
    plan = plan_pipeline(SOURCE + "SELECT ratio(n, 2) AS r, shout(s), halved(ratio(n, n)) "
                                  "AS h FROM t;", {}, udfs=udfs)
    (query,) = plan.queries
    assert "RATIO(" in query.output_sql.upper() and "HALVED(" in query.output_sql.upper()
    # an unaliased call is named as written, with the function's name in capitals
    assert query.output_columns == ("r", "SHOUT(s)", "h")


# Each case: the SELECT list (line 3 of the script, after "SELECT "), the error's
# column and a fragment of its message.
CALL_ERRORS = [
    ("ratio(n)", 8, "scalar UDF ratio(a: int, b: Optional[int]) -> Optional[float] takes 2 "
                    "argument(s), got 1"),
    ("n + shout(s, s)", 12, "takes 1 argument(s), got 2"),
    ("ratio('7', n)", 14, "argument 1 of ratio() is TEXT, but parameter 'a' is int (BIGINT)"),
    ("ratio(n, 1.5)", 17, "argument 2 of ratio() is DECIMAL, but parameter 'b' is "
                          "Optional[int]"),
    ("shout(CAST(n AS DOUBLE))", 8, "argument 1 of shout() is DOUBLE"),
    ("ratio(n, ratio(n, n))", 17, "argument 2 of ratio() is DOUBLE"),
    ("shout(TRUE)", 8, "argument 1 of shout() is BOOLEAN"),
    ("rato(n, n)", 8, "unknown function 'rato' (did you mean ratio?)"),
]


@pytest.mark.parametrize(("select_list", "column", "fragment"), CALL_ERRORS)
def test_bad_calls_are_located(udfs: UdfRegistry, select_list: str, column: int,
                               fragment: str) -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(SOURCE + f"SELECT {select_list} FROM t;", {}, udfs=udfs)
    assert fragment in caught.value.message
    assert (caught.value.line, caught.value.column) == (3, column), str(caught.value)


@pytest.mark.parametrize("select_list", [
    "ratio(n, NULL)", "ratio(7, CAST(x AS BIGINT))", "halved(1)", "ratio(-3, n)",
    "halved(1.5)", "shout(s || 'x')",
])
def test_compatible_calls_plan(udfs: UdfRegistry, select_list: str) -> None:
    plan_pipeline(SOURCE + f"SELECT {select_list} AS v FROM t;", {}, udfs=udfs)


@pytest.mark.parametrize(("sql", "line", "column", "fragment"), [
    ("SELECT s, spread(x) AS sp FROM t GROUP BY s;", 3, 11,
     "aggregate UDF spread() is not supported yet in updating aggregates"),
    ("SELECT shout(s) OVER (PARTITION BY n) FROM t;", 3, 8,
     "UDF shout() cannot be used with OVER"),
    ("SELECT n, spread(x, x) FROM t GROUP BY n, TUMBLE(INTERVAL '1' SECOND);", 3, 11,
     "aggregate UDF spread(values: list[float]) -> float takes 1 argument(s), got 2"),
])
def test_aggregate_udfs_only_in_windowed_aggregates(udfs: UdfRegistry, sql: str, line: int,
                                                    column: int, fragment: str) -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(SOURCE + sql, {}, udfs=udfs)
    assert fragment in caught.value.message
    assert (caught.value.line, caught.value.column) == (line, column), str(caught.value)


def test_an_aggregate_udf_plans_into_the_window_operator(udfs: UdfRegistry) -> None:
    plan = plan_pipeline(SOURCE + "SELECT n, w.end AS e, sp FROM (SELECT n, TUMBLE(INTERVAL "
                                  "'1' SECOND) AS w, spread(x) AS sp FROM t GROUP BY n, w);",
                         {}, udfs=udfs)
    (query,) = plan.queries
    (operator,) = query.operators
    assert [a.function for a in operator.aggregates] == ["udaf_rows"]  # type: ignore[attr-defined]
    assert "STRUCT(`x` AS `a0`)" in operator.input_sql  # type: ignore[attr-defined]
    # the UDF itself runs over the collected rows when the window fires
    assert "SPREAD(`agg0`)" in query.output_sql


def test_udfs_are_unknown_without_the_file() -> None:
    with pytest.raises(PlanningError, match="unknown function 'ratio'"):
        plan_pipeline(SOURCE + "SELECT ratio(n, n) FROM t;", {})


@pytest.mark.parametrize(("name", "fragment"), [
    ("upper", "the built-in function upper()"),
    ("json_get", "the built-in function json_get()"),
    ("approx_median", "the built-in function approx_median()"),
    ("tumble", "the built-in function tumble()"),
    ("like", "the built-in function like()"),
    ("interval", "the SQL keyword INTERVAL"),
])
def test_a_udf_named_like_a_built_in_is_refused_at_its_definition(name: str,
                                                                  fragment: str) -> None:
    clashing = load_udfs("from spate.engine.udf import udf\n\n"
                         f"@udf\ndef {name}(s: str) -> str:\n    return s\n", "mine.py")
    with pytest.raises(UdfDefinitionError) as caught:
        plan_pipeline(SOURCE + "SELECT s FROM t;", {}, udfs=clashing)
    assert fragment in caught.value.message
    assert (caught.value.filename, caught.value.line, caught.value.column) == ("mine.py", 4, 5)
