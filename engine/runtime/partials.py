"""The native Spark SQL computing each aggregate's partial over a group of rows:
what the window and updating steps merge into their state.  ``{a}`` stands
for the aggregate's argument."""

from __future__ import annotations

from spate.engine.operators.aggregates import BAGS, COMOMENTS, MOMENTS
from spate.engine.planner.plan import EVENT_TIME

#: The partial of a variance: ``[count, mean, sum of squared deviations]``.
MOMENTS_SQL = ["count({a})", "avg(CAST({a} AS DOUBLE))",
               "var_pop(CAST({a} AS DOUBLE)) * count({a})"]
#: The partial of a (y, x) aggregate over ``[y, x]`` arrays (NULL: a pair left out):
#: ``[count, mean y, mean x, y squares, x squares, products]`` (deviations summed).
COMOMENTS_SQL = ["count({a})", "avg({a}[0])", "avg({a}[1])", "var_pop({a}[0]) * count({a})",
                 "var_pop({a}[1]) * count({a})", "covar_pop({a}[0], {a}[1]) * count({a})"]
#: A row's event time and value (first_value, last_value), ordered by time then value.
TIMED_SQL = f"named_struct('t', unix_micros(`{EVENT_TIME}`), 'v', {{a}})"
PARTIAL_SQL = {
    "count_star": ["count(1)"],
    "count": ["count({a})"],
    "count_distinct": ["collect_set({a})"],
    "sum": ["sum({a})", "count({a})"],
    "avg": ["sum({a})", "count({a})"],
    "min": ["min({a})"],
    "max": ["max({a})"],
    "bit_xor": ["bit_xor({a})", "count({a})"],
    "bit_and": ["collect_list({a})"],
    "bit_or": ["collect_list({a})"],
    **{name: MOMENTS_SQL for name in MOMENTS},
    **{name: COMOMENTS_SQL for name in COMOMENTS},
    "first_value": ["min(" + TIMED_SQL + ")"],
    "last_value": ["max(" + TIMED_SQL + ")"],
    # NULLs kept (array_agg has them), sorted so that a replay collects them alike
    **{name: ["array_sort(collect_list(named_struct('v', {a})))"] for name in BAGS},
    # an aggregate UDF's argument rows, sorted so that a replay collects them alike
    "udaf_rows": ["array_sort(collect_list({a}))"],
}
