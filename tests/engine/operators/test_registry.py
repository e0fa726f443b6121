"""The aggregate registry: every function name the planner emits is declared once,
with a window form, and (but for aggregate UDFs) an updating form."""

from __future__ import annotations

import re

import pyarrow as pa
import pytest

from spate.engine.operators.aggregates import AGGREGATES, make_accumulator, make_aggregate
from spate.engine.planner import aggregates as planning

#: Names the planner builds outside its tables (count(*), count(DISTINCT), UDAFs).
_BUILT = {"count_star", "count", "count_distinct", "udaf_rows", "percentile_cont",
          "percentile_cont_weighted"}


def _planned_names() -> set[str]:
    names = set(planning._AGGREGATES.values()) | set(planning._ANONYMOUS.values())
    # the (y, x) aggregates are named after their sqlglot class: RegrR2 -> regr_r2
    names |= {re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower() for cls in planning._PAIRED}
    return names | _BUILT


def test_every_planned_function_is_registered() -> None:
    assert _planned_names() <= set(AGGREGATES)
    assert all(function.name == name for name, function in AGGREGATES.items())


@pytest.mark.parametrize("name", sorted(AGGREGATES))
def test_each_function_declares_its_window_form(name: str) -> None:
    function = AGGREGATES[name]
    assert function.pane_sql() and all("{a}" in sql or sql == "count(1)"
                                       for sql in function.pane_sql())
    aggregate = make_aggregate(name, 0.5)
    assert aggregate.result(aggregate.initialize()) in (None, 0, [])


@pytest.mark.parametrize("name", sorted(set(AGGREGATES) - {"udaf_rows"}))
@pytest.mark.parametrize("updating_input", [False, True])
def test_each_function_declares_its_updating_form(name: str, updating_input: bool) -> None:
    function = AGGREGATES[name]
    assert function.signed_sql("`x`", "1", updating_input)
    accumulator = make_accumulator(name, updating_input, 0.5)
    assert accumulator.result(accumulator.initialize()) in (None, 0)


def test_an_aggregate_udf_has_no_updating_form() -> None:
    with pytest.raises(NotImplementedError, match="udaf_rows"):
        make_accumulator("udaf_rows", updating_input=True)
    assert AGGREGATES["udaf_rows"].window_type(pa.int64()) == pa.int64()
