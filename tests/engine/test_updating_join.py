"""Updating (non-windowed) joins end to end: the change stream a debezium_json sink
receives, applied in order, must leave exactly the batch join of the inputs
(computed by DuckDB), for every join kind, whatever the epoch boundaries; and
``SET updating_ttl`` forgets keys the watermark has left behind."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spate.engine.planner import PlanningError, plan_pipeline
from tests.engine.harness import run_pipeline

pytestmark = pytest.mark.spark

KINDS = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT OUTER JOIN",
         "full": "FULL OUTER JOIN"}


def _pipeline(directory: Path, kind: str, lines_per_epoch: int, ttl: str = "") -> str:
    source = ("CREATE TABLE {name} ({columns}, ts TIMESTAMP NOT NULL, WATERMARK FOR ts) "
              "WITH (connector = 'single_file', path = '{path}', format = 'json', "
              "type = 'source', max_lines_per_batch = '{lines}');\n")
    return (ttl + source.format(name="orders", columns="id BIGINT, customer BIGINT, amount BIGINT",
                                path=directory / "orders.jsonl", lines=lines_per_epoch)
            + source.format(name="customers", columns="cid BIGINT, name TEXT",
                            path=directory / "customers.jsonl", lines=lines_per_epoch)
            + f"CREATE TABLE out WITH (connector = 'single_file', path = '{directory}/out.jsonl',"
              " format = 'debezium_json', type = 'sink');\n"
            + f"INSERT INTO out SELECT o.id, o.amount, c.name FROM orders AS o {KINDS[kind]} "
              "customers AS c ON o.customer = c.cid AND o.amount >= 0;\n")


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _applied(path: Path) -> Counter[tuple[Any, ...]]:
    """The table a consumer of the change stream ends with."""
    table: Counter[tuple[Any, ...]] = Counter()
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["before"] is not None:
            before = tuple(record["before"].values())
            assert table[before] > 0, f"retraction of a row never added: {record}"
            table[before] -= 1
        if record["after"] is not None:
            table[tuple(record["after"].values())] += 1
    return +table


def _batch_join(orders: list[dict[str, Any]], customers: list[dict[str, Any]],
                kind: str) -> Counter[tuple[Any, ...]]:
    db = duckdb.connect()
    db.execute("CREATE TABLE orders (id BIGINT, customer BIGINT, amount BIGINT)")
    db.execute("CREATE TABLE customers (cid BIGINT, name TEXT)")
    for o in orders:
        db.execute("INSERT INTO orders VALUES (?, ?, ?)", (o["id"], o["customer"], o["amount"]))
    for c in customers:
        db.execute("INSERT INTO customers VALUES (?, ?)", (c["cid"], c["name"]))
    rows = db.execute(f"SELECT o.id, o.amount, c.name FROM orders AS o {KINDS[kind]} customers "
                      "AS c ON o.customer = c.cid AND o.amount >= 0").fetchall()
    return Counter(tuple(r) for r in rows)


def _stamp(rows: list[dict[str, Any]], start_s: int) -> list[dict[str, Any]]:
    return [{**r, "ts": f"2026-01-01T00:{(start_s + i) // 60:02d}:{(start_s + i) % 60:02d}Z"}
            for i, r in enumerate(rows)]


@pytest.mark.parametrize("kind", list(KINDS))
def test_change_stream_of_each_join_kind_applies_to_the_batch_join(kind: str, spark,
                                                                   tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Customers arrive late (some after their orders), some never; one order's amount
    # fails the non-equi term; customer 3 has two orders, customer 5 none.
    orders = _stamp([{"id": i, "customer": c, "amount": a} for i, (c, a) in enumerate(
        [(1, 10), (2, 5), (3, 7), (3, -1), (4, 2), (9, 3), (3, 8), (1, 1)])], 0)
    customers = _stamp([{"cid": c, "name": f"c{c}"} for c in (5, 3, 4, 1, 2)], 3)
    _write(tmp_path / "orders.jsonl", orders)
    _write(tmp_path / "customers.jsonl", customers)
    run_pipeline(spark, _pipeline(tmp_path, kind, 2), tmp_path)
    assert _applied(tmp_path / "out.jsonl") == _batch_join(orders, customers, kind)
    records = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    if kind == "inner":
        assert {r["op"] for r in records} == {"c"}  # docs/sql/joins.md: inner output is append-only
    else:  # a NULL-padded row was written, then withdrawn when its match arrived
        assert any(r["op"] == "d" for r in records)


@settings(max_examples=4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(kind=st.sampled_from(list(KINDS)),
       orders=st.lists(st.tuples(st.integers(0, 3), st.integers(-2, 5)), max_size=8),
       customers=st.lists(st.integers(0, 4), max_size=5),
       lines=st.integers(1, 3))
def test_random_inputs_and_epoch_sizes(kind: str, orders: list[tuple[int, int]],
                                       customers: list[int], lines: int, spark,
                                       tmp_path_factory: pytest.TempPathFactory) -> None:  # type: ignore[no-untyped-def]
    directory = tmp_path_factory.mktemp("join")
    order_rows = _stamp([{"id": i, "customer": c, "amount": a}
                         for i, (c, a) in enumerate(orders)], 0)
    customer_rows = _stamp([{"cid": c, "name": f"c{c}"} for c in customers], 2)
    _write(directory / "orders.jsonl", order_rows)
    _write(directory / "customers.jsonl", customer_rows)
    run_pipeline(spark, _pipeline(directory, kind, lines), directory)
    assert _applied(directory / "out.jsonl") == _batch_join(order_rows, customer_rows, kind)


def test_updating_ttl_forgets_keys_behind_the_watermark(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # One line per source and epoch.  Epoch 1 moves the watermark to 0:19, past
    # customer 1's order (0:00) plus 5 s, so with the TTL the order is forgotten
    # before customer 1 arrives in epoch 2; with the default 24 h they match.
    orders = [{"id": 1, "customer": 1, "amount": 1, "ts": "2026-01-01T00:00:00Z"},
              {"id": 2, "customer": 2, "amount": 1, "ts": "2026-01-01T00:00:20Z"},
              {"id": 3, "customer": 3, "amount": 1, "ts": "2026-01-01T00:00:40Z"}]
    customers = [{"cid": 9, "name": "c9", "ts": "2026-01-01T00:00:21Z"},
                 {"cid": 8, "name": "c8", "ts": "2026-01-01T00:00:35Z"},
                 {"cid": 1, "name": "c1", "ts": "2026-01-01T00:00:50Z"}]
    results = {}
    for ttl in ("", "SET updating_ttl = INTERVAL '5' SECOND;\n"):
        directory = tmp_path / ("ttl" if ttl else "default")
        directory.mkdir()
        _write(directory / "orders.jsonl", orders)
        _write(directory / "customers.jsonl", customers)
        run_pipeline(spark, _pipeline(directory, "inner", 1, ttl), directory)
        results[bool(ttl)] = _applied(directory / "out.jsonl")
    assert results[False] == Counter({(1, 1, "c1"): 1})
    assert results[True] == Counter()


def test_a_key_seen_again_as_its_ttl_passes_keeps_its_rows(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # Epoch 1 brings customer 1's second order (0:30) and moves the watermark to 0:29,
    # past the first order (0:00) plus 5 s: the key was seen again, so it stays, and
    # customer 1 (epoch 2) matches both orders.
    orders = [{"id": 1, "customer": 1, "amount": 1, "ts": "2026-01-01T00:00:00Z"},
              {"id": 2, "customer": 1, "amount": 1, "ts": "2026-01-01T00:00:30Z"},
              {"id": 3, "customer": 7, "amount": 1, "ts": "2026-01-01T00:01:00Z"}]
    customers = [{"cid": 9, "name": "c9", "ts": "2026-01-01T00:00:00Z"},
                 {"cid": 8, "name": "c8", "ts": "2026-01-01T00:00:30Z"},
                 {"cid": 1, "name": "c1", "ts": "2026-01-01T00:01:00Z"}]
    _write(tmp_path / "orders.jsonl", orders)
    _write(tmp_path / "customers.jsonl", customers)
    ttl = "SET updating_ttl = INTERVAL '5' SECOND;\n"
    run_pipeline(spark, _pipeline(tmp_path, "inner", 1, ttl), tmp_path)
    assert _applied(tmp_path / "out.jsonl") == Counter({(1, 1, "c1"): 1, (2, 1, "c1"): 1})


@pytest.mark.parametrize(("sql", "message"), [
    ("SELECT o.id FROM orders AS o JOIN customers AS c ON o.amount > c.cid",
     "needs at least one equality"),
    ("SELECT o.id FROM orders AS o JOIN customers AS c ON o.customer = c.cid "
     "JOIN customers AS d ON o.customer = d.cid", "one updating join per SELECT"),
    ("SELECT o.id FROM (SELECT customer AS id, count(*) AS n FROM orders GROUP BY customer) "
     "AS o JOIN customers AS c ON o.id = c.cid", "cannot read updating rows"),
])
def test_updating_join_errors(sql: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(_pipeline(tmp_path, "inner", 1).split("INSERT INTO")[0] + sql + ";")
    assert message in caught.value.message


def test_outer_join_output_needs_a_debezium_sink(tmp_path: Path) -> None:
    sql = _pipeline(tmp_path, "left", 1).replace("'debezium_json'", "'json'")
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(sql)
    assert "debezium_json" in caught.value.message
    plan_pipeline(_pipeline(tmp_path, "inner", 1).replace("'debezium_json'", "'json'"))


def test_aggregates_in_the_joining_select_and_over_it(spark, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The first GROUP BY sits in the SELECT that joins (it reads the join's rows and
    # their event time); a second aggregate reads its changes (Nexmark q4's shape).
    orders = _stamp([{"id": i, "customer": c, "amount": a} for i, (c, a) in enumerate(
        [(1, 10), (2, 5), (1, 7), (3, 1), (2, 2), (1, 4)])], 0)
    customers = _stamp([{"cid": c, "name": n} for c, n in
                        ((3, "x"), (1, "y"), (2, "x"))], 1)
    _write(tmp_path / "orders.jsonl", orders)
    _write(tmp_path / "customers.jsonl", customers)
    sql = _pipeline(tmp_path, "inner", 2).split("INSERT INTO")[0] + """
INSERT INTO out SELECT name, count(*) AS customers, sum(total) AS total FROM (
  SELECT c.name, o.customer, sum(o.amount) AS total
  FROM orders AS o JOIN customers AS c ON o.customer = c.cid GROUP BY c.name, o.customer)
GROUP BY name;"""
    run_pipeline(spark, sql, tmp_path)
    assert _applied(tmp_path / "out.jsonl") == Counter({("x", 2, 8): 1, ("y", 1, 21): 1})


@pytest.mark.parametrize("others", [0, 1, 2])
def test_a_stored_outer_row_matched_in_two_epochs_is_retracted_once(  # type: ignore[no-untyped-def]
        spark, tmp_path: Path, others: int) -> None:
    # c3 arrives unmatched (a NULL-padded row), then orders match it in later epochs
    # that bring no new customer to its task: its padded row is withdrawn once, when
    # it first matches (the stored count of its matches is written back even so).
    customers = [{"cid": 3, "name": "c3"}, *({"cid": 10 + i, "name": f"x{i}"}
                                             for i in range(others))]
    orders = [{"id": 0, "customer": 99, "amount": 1}, *({"id": i, "customer": 3, "amount": 1}
                                                        for i in range(1, 4))]
    _write(tmp_path / "orders.jsonl", _stamp(orders, 0))
    _write(tmp_path / "customers.jsonl", _stamp(customers, 0))
    run_pipeline(spark, _pipeline(tmp_path, "right", 1), tmp_path / "work", parallelism=2)
    assert _applied(tmp_path / "out.jsonl") == _batch_join(
        _stamp(orders, 0), _stamp(customers, 0), "right")
