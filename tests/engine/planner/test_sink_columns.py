"""INSERT INTO a sink with declared columns writes those columns, by position, cast to
their types; a count or an evident type that cannot fit is a located planning error."""

from __future__ import annotations

import pytest

from spate.engine.planner import PlanningError, plan_pipeline

SOURCE = """CREATE TABLE rides (driver BIGINT, zone TEXT, fare DOUBLE, ts TIMESTAMP NOT NULL,
                    WATERMARK FOR ts)
WITH (connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source');
"""


def sink(columns: str, fmt: str = "json", extra: str = "") -> str:
    return (f"CREATE TABLE out ({columns}) WITH (connector = 'single_file', "
            f"path = 'out.jsonl', format = '{fmt}', type = 'sink'{extra});\n")


def test_the_query_writes_the_sinks_names_cast_to_its_types() -> None:
    plan = plan_pipeline(SOURCE + sink("drivers BIGINT, label TEXT")
                         + "INSERT INTO out SELECT count(*), max(fare) FROM rides "
                           "GROUP BY TUMBLE(INTERVAL '1' MINUTE);")
    query = plan.queries[0]
    assert query.output_columns == ("drivers", "label")
    assert "CAST(`COUNT(*)` AS bigint) AS `drivers`" in query.output_sql
    assert "CAST(`MAX(fare)` AS string) AS `label`" in query.output_sql


def test_window_fields_land_in_the_declared_columns() -> None:
    plan = plan_pipeline(SOURCE + sink("w_start TIMESTAMP, w_end TIMESTAMP, n BIGINT")
                         + "INSERT INTO out SELECT w.start, w.end, n FROM (SELECT "
                           "TUMBLE(INTERVAL '1' MINUTE) AS w, count(*) AS n FROM rides "
                           "GROUP BY w);")
    assert plan.queries[0].output_columns == ("w_start", "w_end", "n")


def test_updating_rows_keep_their_change_columns() -> None:
    plan = plan_pipeline(SOURCE + sink("zone TEXT PRIMARY KEY, rides BIGINT", "debezium_json")
                         + "INSERT INTO out SELECT zone, count(*) FROM rides GROUP BY zone;")
    query = plan.queries[0]
    assert query.output_columns == ("zone", "rides") and query.updating
    assert query.output_sql.index("`_spate_retract`") > query.output_sql.index("AS `rides`")
    assert plan.tables["out"].primary_key == ("zone",)


def test_a_sink_without_columns_takes_the_querys_names() -> None:
    plan = plan_pipeline(SOURCE + "CREATE TABLE out WITH (connector = 'blackhole');\n"
                         "INSERT INTO out SELECT driver AS d, fare FROM rides;")
    assert plan.queries[0].output_columns == ("d", "fare")


@pytest.mark.parametrize(("insert", "where", "words"), [
    ("INSERT INTO out SELECT driver FROM rides;", (5, 17), "gives 1 column(s) (driver) but "
                                                          "out declares 2 (a, b)"),
    ("INSERT INTO out SELECT driver, zone, fare FROM rides;", (5, 17), "gives 3 column(s)"),
    ("INSERT INTO out SELECT driver, [1, 2] FROM rides;", (5, 33), "column 2 is an array"),
])
def test_mismatches_are_located(insert: str, where: tuple[int, int], words: str) -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(SOURCE + sink("a BIGINT, b TEXT").replace("b TEXT", "b BIGINT")
                      + insert)
    assert (caught.value.line, caught.value.column) == where
    assert words in caught.value.message


def test_a_pipeline_that_runs_needs_a_sink_for_every_query() -> None:
    sql = SOURCE + "\nSELECT driver FROM rides;"
    assert plan_pipeline(sql).queries[0].sink == "preview"  # a preview may
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(sql, previews=False)
    assert (caught.value.line, caught.value.column) == (5, 1)
    assert "INSERT INTO <sink>" in caught.value.message


def test_primary_key_on_an_append_source_still_means_nothing() -> None:
    with pytest.raises(PlanningError, match="only meaningful"):
        plan_pipeline("CREATE TABLE s (id BIGINT PRIMARY KEY) WITH (connector = "
                      "'single_file', path = 'x', format = 'json', type = 'source');\n"
                      "SELECT id FROM s;")


@pytest.mark.parametrize(("columns", "insert"), [
    # a number into TEXT is written as a string
    ("a TEXT, b BIGINT", "INSERT INTO out SELECT driver AS d, driver FROM rides;"),
    ("a TEXT, b BIGINT", "INSERT INTO out SELECT zone, '12' FROM rides;"),  # reads as one
    ("a DOUBLE, b BIGINT", "INSERT INTO out SELECT fare, ts FROM rides;"),  # its seconds
    ("a TEXT, b TEXT", "INSERT INTO out SELECT struct(driver, zone), array_agg(fare) "
                       "FROM rides GROUP BY TUMBLE(INTERVAL '1' MINUTE), driver, zone;"),
    ("a TEXT, b BIGINT", "INSERT INTO out SELECT zone, NULL FROM rides;"),
])
def test_casts_spark_makes_are_planned(columns: str, insert: str) -> None:
    plan = plan_pipeline(SOURCE + sink(columns) + insert)
    assert plan.queries[0].output_columns == ("a", "b")


def test_a_struct_goes_field_by_field_into_a_struct_column() -> None:
    plan = plan_pipeline(SOURCE + sink("s STRUCT<d BIGINT, z TEXT>, f DOUBLE[]")
                         + "INSERT INTO out SELECT struct(driver, zone), ARRAY[fare] "
                           "FROM rides;")
    assert "CAST(" in plan.queries[0].output_sql


def test_a_view_column_of_another_kind_is_found_in_every_branch() -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(SOURCE + sink("a TEXT, b BIGINT")
                      + "CREATE VIEW packed AS SELECT zone, struct(driver, fare) AS d FROM rides;\n"
                        "INSERT INTO out SELECT zone, driver FROM rides\n"
                        "UNION ALL SELECT zone, d FROM packed;")
    assert (caught.value.line, caught.value.column) == (7, 24)
    assert "column 2 is a struct" in caught.value.message
