"""The one rule saying whether new SQL can resume from old state: what is state (keys,
windows, aggregates, join sides, column types) and what is not (output columns,
filters, TTLs), and how a layout is stored with an epoch."""

from __future__ import annotations

import json

import msgpack
import pytest

from spate.engine.planner import plan_pipeline
from spate.engine.runtime.errors import PipelineFailedError
from spate.engine.state_layout import (
    LAYOUT_VERSION,
    StateVerdict,
    compare_layouts,
    layout_of,
    resumed_layout,
    state_layout,
    stored_layout,
)

SOURCE = ("CREATE TABLE src (k TEXT, price INT, qty BIGINT, at TIMESTAMP) WITH ("
          "connector = 'single_file', path = 'in.jsonl', format = 'json', type = 'source', "
          "event_time_field = 'at');\nCREATE TABLE out WITH (connector = 'blackhole');\n")
WINDOW = SOURCE + ("INSERT INTO out SELECT w.start, k, total FROM (SELECT TUMBLE(INTERVAL "
                   "'1' MINUTE) AS w, k, sum(price) AS total FROM src GROUP BY 1, 2);\n")
UPDATING = SOURCE + "INSERT INTO out SELECT k, count(*) AS n, max(qty) FROM src GROUP BY k;\n"
JOIN = SOURCE + ("CREATE TABLE other (id TEXT, name TEXT, at TIMESTAMP) WITH (connector = "
                 "'single_file', path = 'o.jsonl', format = 'json', type = 'source', "
                 "event_time_field = 'at');\n"
                 "INSERT INTO out SELECT s.k, o.name FROM src s JOIN other o ON s.k = o.id;\n")


def verdict(old_sql: str, new_sql: str) -> StateVerdict:
    old = state_layout(plan_pipeline(old_sql, connect=False))
    return compare_layouts(old, state_layout(plan_pipeline(new_sql, connect=False)))


def reasons(old_sql: str, new_sql: str) -> list[str]:
    judged = verdict(old_sql, new_sql)
    assert not judged.compatible
    return [reason for o in judged.dropped for reason in o.reasons]


@pytest.mark.parametrize(("old", "new"), [
    # output columns computed from what the state holds
    (WINDOW, WINDOW.replace("SELECT w.start, k, total", "SELECT w.start, w.end, k, total, "
                                                        "total * 2 AS twice")),
    (UPDATING, UPDATING.replace("max(qty) FROM", "max(qty), count(*) + 1 FROM")),
    # filters and HAVING, TTLs, the sink and the source's options
    (WINDOW, WINDOW.replace("FROM src GROUP BY", "FROM src WHERE price > 0 GROUP BY")),
    (UPDATING, UPDATING.replace("GROUP BY k;", "GROUP BY k HAVING count(*) > 2;")),
    (UPDATING, "SET updating_ttl = INTERVAL '1' HOUR;\n" + UPDATING),
    (JOIN, JOIN.replace("SELECT s.k, o.name", "SELECT o.name, s.k, upper(o.name)")),
    (WINDOW, WINDOW.replace("'in.jsonl'", "'elsewhere.jsonl'")),
], ids=["window output", "aggregate output", "where", "having", "ttl", "join output",
        "source options"])
def test_what_is_not_state_can_change(old: str, new: str) -> None:
    judged = verdict(old, new)
    assert judged.compatible and judged.dropped == ()
    assert {o.status for o in judged.operators} == {"kept"}


@pytest.mark.parametrize(("old", "new", "expected"), [
    (WINDOW, WINDOW.replace("'1' MINUTE", "'2' MINUTE"),
     "its window changed: TUMBLE 1 min → TUMBLE 2 min"),
    (WINDOW, WINDOW.replace("TUMBLE(INTERVAL '1' MINUTE)",
                            "HOP(INTERVAL '10' SECOND, INTERVAL '1' MINUTE)"),
     "its window changed: TUMBLE 1 min → HOP 1 min every 10 s"),
    (WINDOW, WINDOW.replace("sum(price)", "sum(qty)"),
     "its aggregates changed: sum(price) → sum(qty)"),
    (UPDATING, UPDATING.replace("GROUP BY k", "GROUP BY k, price").replace("SELECT k,",
                                                                           "SELECT k, price,"),
     "its GROUP BY keys changed: k → k, price"),
    (UPDATING, UPDATING.replace("count(*) AS n, max(qty)", "max(qty), count(*) AS n"),
     "its aggregates changed: count(*), max(qty) → max(qty), count(*)"),
    (WINDOW, WINDOW.replace("price INT", "price DOUBLE"),
     "the type of source column price changed: int → double"),
    (JOIN, JOIN.replace("s JOIN other", "s LEFT JOIN other"),
     "its join type changed: inner → left"),
    (JOIN, JOIN.replace("ON s.k = o.id", "ON s.k = o.name"),
     "its join condition changed: s.k = o.id → s.k = o.name"),
], ids=["width", "tumble to hop", "aggregate argument", "keys", "aggregate order",
        "column type", "join type", "join condition"])
def test_what_is_state_cannot_change(old: str, new: str, expected: str) -> None:
    assert expected in reasons(old, new)


def test_an_operator_of_another_kind_under_the_same_id() -> None:
    # q0's only stateful operator becomes an updating aggregate: ids differ by kind
    judged = verdict(WINDOW, UPDATING)
    assert judged.compatible
    assert [(o.operator, o.status) for o in judged.operators] == [
        ("q0_window", "removed"), ("q0_aggregate", "new")]
    renamed = {"q0_window": state_layout(plan_pipeline(UPDATING, connect=False))[
        "q0_aggregate"]}
    judged = compare_layouts(state_layout(plan_pipeline(WINDOW, connect=False)), renamed)
    [changed] = judged.dropped
    assert changed.reasons == (
        "it was a window aggregate (TUMBLE 1 min by k: sum(price) AS total) and is now an "
        "updating aggregate",)


def test_a_query_added_in_front_moves_the_ids() -> None:
    # the ids number queries in order: the old q0 state now meets another query's window
    front = SOURCE + WINDOW.removeprefix(SOURCE).replace("sum(price)", "count(*)") \
        + WINDOW.removeprefix(SOURCE)
    judged = verdict(WINDOW, front)
    assert not judged.compatible
    assert [(o.operator, o.status) for o in judged.operators] == [
        ("q0_window", "changed"), ("q1_window", "new")]
    assert "q0_window (TUMBLE 1 min by k: count(*) AS total): its aggregates changed" \
        in judged.summary()


def test_a_stored_layout_reads_back_as_it_was_written() -> None:
    plan = plan_pipeline(JOIN, connect=False)
    stored = stored_layout(plan)
    assert stored["version"] == LAYOUT_VERSION
    for encoded in (msgpack.unpackb(msgpack.packb(stored)), json.loads(json.dumps(stored))):
        layout = layout_of(encoded)
        assert layout == state_layout(plan)
        assert layout is not None and compare_layouts(layout, state_layout(plan)).compatible
    assert layout_of(None) is None
    assert layout_of({"version": LAYOUT_VERSION + 1, "operators": {}}) is None


def test_a_run_resumes_only_from_state_its_plan_can_read() -> None:
    stored = stored_layout(plan_pipeline(WINDOW, connect=False))
    wider = plan_pipeline(WINDOW.replace("'1' MINUTE", "'2' MINUTE"), connect=False)
    with pytest.raises(PipelineFailedError, match="cannot resume from the pipeline's state") \
            as refused:
        resumed_layout(wider, stored)
    assert "q0_window (TUMBLE 2 min by k: sum(price) AS total): its window changed: " \
           "TUMBLE 1 min → TUMBLE 2 min" in str(refused.value)
    assert "restart the pipeline without state" in str(refused.value)

    # a run without the window keeps its layout, so the window cannot come back changed
    stateless = plan_pipeline(SOURCE + "INSERT INTO out SELECT k FROM src;\n", connect=False)
    carried = resumed_layout(stateless, stored)
    assert carried["operators"] == stored["operators"]
    with pytest.raises(PipelineFailedError):
        resumed_layout(wider, carried)
    # state written before layouts were stored is not judged
    assert resumed_layout(wider, None) == stored_layout(wider)
