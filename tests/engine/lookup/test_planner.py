"""Planning lookup joins (docs/sql/joins.md): the operator a lookup join becomes, and a located
error for every rule (right side only, INNER/LEFT, PRIMARY KEY terms, no filters,
no subquery, no updating input)."""

from __future__ import annotations

import pytest

from spate.engine.planner import PlanningError, plan_pipeline
from spate.engine.planner.plan import LookupJoin, WindowAggregate

DDL = (
    "CREATE TABLE orders (id BIGINT, cid BIGINT, region TEXT) WITH (connector = "
    "'single_file', type = 'source', path = 'in.json', format = 'json');\n"
    "CREATE TABLE out WITH (connector = 'single_file', type = 'sink', path = 'out.json', "
    "format = 'json');\n"
    "CREATE TEMPORARY TABLE customers (id TEXT PRIMARY KEY, region TEXT PRIMARY KEY, "
    "name TEXT, address STRUCT<city TEXT>) WITH (connector = 'redis', address = 'redis://h', "
    "format = 'json');\n")
ON = "ON c.id = o.cid AND c.region = o.region"


def _operators(query: str) -> tuple[list[LookupJoin], str]:
    plan = plan_pipeline(DDL + query)
    operators = plan.queries[0].operators
    return [o for o in operators if isinstance(o, LookupJoin)], plan.queries[0].output_sql


def test_a_lookup_join_reads_its_keys_natively_and_renames_the_lookup_columns() -> None:
    [lookup], output = _operators(
        "INSERT INTO out SELECT o.id, c.name, c.address.city, upper(name) AS shout FROM "
        f"orders o LEFT JOIN customers c {ON} WHERE c.name IS NOT NULL;")
    assert lookup.keep_unmatched and lookup.table.name == "customers"
    assert lookup.input_sql == (
        "SELECT `o`.*, TRY_CAST(`o`.`cid` AS STRING) AS `__spate_q0_lookup_key0`, "
        "TRY_CAST(`o`.`region` AS STRING) AS `__spate_q0_lookup_key1` FROM `orders` AS `o`")
    assert lookup.key_inputs == ("__spate_q0_lookup_key0", "__spate_q0_lookup_key1")
    assert lookup.outputs == tuple(f"__spate_q0_lookup_{c}"
                                   for c in ("id", "region", "name", "address"))
    assert output == (
        "SELECT `o`.`id`, `o`.`__spate_q0_lookup_name` AS `name`, "
        "`o`.`__spate_q0_lookup_address`.`city` AS `city`, "
        "UPPER(`o`.`__spate_q0_lookup_name`) AS `shout` FROM `__spate_q0_lookup` AS `o` "
        "WHERE NOT `o`.`__spate_q0_lookup_name` IS NULL")
    assert "INNER" not in lookup.describe() and "LEFT lookup join" in lookup.describe()


def test_chained_lookups_and_an_aggregate_over_a_lookup() -> None:
    lookups, output = _operators(
        "INSERT INTO out SELECT o.id, c.name, d.name AS other FROM orders o "
        f"JOIN customers c {ON} JOIN customers d ON d.id = c.name AND d.region = 'eu';")
    assert [lk.keep_unmatched for lk in lookups] == [False, False]
    assert "TRY_CAST(`o`.`__spate_q0_lookup_name` AS STRING)" in lookups[1].input_sql
    assert "FROM `__spate_q0_lookup` AS `o`" in lookups[1].input_sql
    assert output.endswith("FROM `__spate_q0_lookup2` AS `o`")
    plan = plan_pipeline(DDL + "INSERT INTO out SELECT c.name, count(*) AS n FROM orders o "
                         f"JOIN customers c {ON} GROUP BY TUMBLE(INTERVAL '1' MINUTE), c.name;")
    kinds = [type(op) for op in plan.queries[0].operators]
    assert kinds == [LookupJoin, WindowAggregate]
    assert "FROM `__spate_q0_lookup` AS `o`" in plan.queries[0].operators[1].input_sql


@pytest.mark.parametrize("query, position, message", [
    ("INSERT INTO out SELECT c.name FROM customers c JOIN orders o ON c.id = o.cid", 36,
     "lookup table 'customers' can only be the right side of a JOIN"),
    ("INSERT INTO out SELECT * FROM customers", 31,
     "lookup table 'customers' can only be the right side of a JOIN"),
    (f"INSERT INTO out SELECT c.name FROM orders o RIGHT JOIN customers c {ON}", 45,
     "a lookup join is INNER or LEFT, not RIGHT"),
    (f"INSERT INTO out SELECT c.name FROM orders o FULL OUTER JOIN customers c {ON}", 45,
     "a lookup join is INNER or LEFT, not FULL"),
    ("INSERT INTO out SELECT c.name FROM orders o JOIN customers c ON c.id = o.cid", 65,
     "must give every PRIMARY KEY column of lookup table 'c'; missing: region"),
    (f"INSERT INTO out SELECT c.name FROM orders o JOIN customers c {ON} AND c.name = 'x'",
     106, "column 'name' of lookup table 'c' is not part of its PRIMARY KEY (id, region)"),
    ("INSERT INTO out SELECT c.name FROM orders o JOIN customers c ON c.id > o.cid AND "
     "c.region = o.region", 65, "may only equate PRIMARY KEY columns of 'c' (id, region) "
     "with expressions of the left side"),
    ("INSERT INTO out SELECT c.name FROM orders o JOIN customers c ON c.id = o.cid AND "
     "(c.region = o.region OR o.id > 1)", 83, "move other conditions to WHERE"),
    (f"INSERT INTO out SELECT c.name FROM orders o JOIN customers c {ON} AND o.id > 3", 106,
     "move other conditions to WHERE"),
    ("INSERT INTO out SELECT c.name FROM orders o JOIN customers c ON true", 45,
     "move other conditions to WHERE"),
    ("INSERT INTO out SELECT c.name FROM orders o JOIN customers c ON c.id = o.cid AND "
     "c.region = c.name", 82, "the other side of '=' must not use 'c'"),
    (f"INSERT INTO out SELECT c.name FROM orders o JOIN customers c {ON} AND "
     "o.region = c.id", 106, "PRIMARY KEY column 'id' of lookup table 'c' is given twice"),
    (f"INSERT INTO out SELECT c.name FROM orders o JOIN (SELECT * FROM customers) c {ON}", 65,
     "named directly (not in a subquery or view)"),
    (f"CREATE VIEW v AS SELECT * FROM customers; INSERT INTO out SELECT v.name FROM orders "
     f"o JOIN v {ON.replace('c.', 'v.')}", 32, "named directly (not in a subquery or view)"),
    (f"INSERT INTO out SELECT c.name FROM orders o JOIN orders p ON o.id = p.id JOIN "
     f"customers c {ON}", 45, "a SELECT with a lookup join cannot join anything else"),
    ("INSERT INTO customers SELECT 'a', region, 'x', NULL FROM orders", 13,
     "cannot INSERT INTO 'customers': it is a lookup table"),
])
def test_lookup_join_errors(query: str, position: int, message: str) -> None:
    with pytest.raises(PlanningError) as caught:
        plan_pipeline(DDL + query)
    assert message in caught.value.message
    assert (caught.value.line, caught.value.column) == (4, position), str(caught.value)


def test_a_lookup_join_cannot_read_updating_rows() -> None:
    sql = ("CREATE TABLE changes (id BIGINT PRIMARY KEY, cid TEXT) WITH (connector = "
           "'single_file', type = 'source', path = 'in.json', format = 'debezium_json');\n"
           "CREATE TABLE out WITH (connector = 'single_file', type = 'sink', path = 'o.json', "
           "format = 'debezium_json');\n"
           "CREATE TEMPORARY TABLE customers (id TEXT PRIMARY KEY, name TEXT) WITH "
           "(connector = 'postgres', url = 'postgresql://h/db', table = 'customers');\n"
           "INSERT INTO out SELECT x.id, c.name FROM changes x JOIN customers c ON "
           "c.id = x.cid;")
    with pytest.raises(PlanningError, match="cannot read updating rows") as caught:
        plan_pipeline(sql)
    assert (caught.value.line, caught.value.column) == (4, 52)
