"""``spate run --explain`` speaks the query's language: windows as ``TUMBLE 1 s``,
aggregates as written, keys and results by their names, no planner-made names."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from spate.engine.explain import duration, explain_plan, window_name
from spate.engine.planner import plan_pipeline
from spate.engine.planner.plan import WindowSpec

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = sorted((ROOT / "tests" / "engine" / "golden").glob("*/pipeline.sql"))
EXAMPLES = sorted((ROOT / "examples").glob("*.sql"))

#: What the planner calls things and a reader should never see.
INTERNAL = re.compile(r"\b(?:k\d+|a\d+|agg\d+|count_star|count_distinct)\b|__|_spate_|\d+us\b"
                      r"|panes by|no keys|`[A-Za-z_]\w*`")

ORDERS = ("CREATE TABLE orders (id BIGINT, cid BIGINT, region TEXT, price DOUBLE) WITH ("
          "connector = 'single_file', type = 'source', path = 'in.json', format = 'json');\n"
          "CREATE TABLE out WITH (connector = 'single_file', type = 'sink', path = 'out.json', "
          "format = 'json');\n")
CUSTOMERS = ("CREATE TEMPORARY TABLE customers (id TEXT PRIMARY KEY, name TEXT, address "
             "STRUCT<city TEXT>) WITH (connector = 'redis', address = 'redis://h', "
             "format = 'json');\n")


def _explain(sql: str) -> str:
    return explain_plan(plan_pipeline(sql, check_inputs=False))


def test_the_quick_start_explains_itself_in_the_queries_terms() -> None:
    text = _explain((ROOT / "examples" / "quickstart.sql").read_text())
    assert text.splitlines()[5:] == [
        "Query 0 -> sink per_second",
        "  read        nexmark",
        "  [spark]     SELECT bid.price FROM nexmark WHERE NOT bid IS NULL",
        "  [spark]     pre-aggregate by (all rows) into 1 s panes",
        "  [spate]     window: TUMBLE 1 s AS w by (all rows): count(*) AS bids, "
        "max(bid.price) AS top_price; state in statestore by key group",
        "  [spark]     SELECT w.start AS second, bids, top_price FROM "
        "(SELECT w, bids, top_price FROM window)",
        "  write       per_second",
    ]
    assert "watermark connector clock - INTERVAL '1' SECOND" in text


@pytest.mark.parametrize("pipeline", [*GOLDEN, *EXAMPLES],
                         ids=[p.parent.name if p.name == "pipeline.sql" else p.stem
                              for p in [*GOLDEN, *EXAMPLES]])
def test_no_planner_made_name_shows(pipeline: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOLDEN_DIR", str(pipeline.parent))
    monkeypatch.setenv("OUT_DIR", str(pipeline.parent))
    text = _explain(pipeline.read_text())
    assert "[spark]" in text
    found = [line for line in text.splitlines() if INTERNAL.search(line)]
    assert not found, "internal names in:\n" + "\n".join(found)


def test_keys_aggregates_and_windows_by_the_names_the_query_gives_them() -> None:
    text = _explain(ORDERS + "INSERT INTO out SELECT area, w.end AS window_end, buyers, doubled "
                    "FROM (SELECT HOP(INTERVAL '10' SECOND, INTERVAL '1' MINUTE) AS w, "
                    "upper(region) AS area, count(DISTINCT cid) AS buyers, sum(price * 2) AS "
                    "doubled, max(price) FROM orders GROUP BY w, upper(region));")
    assert "  [spark]     SELECT UPPER(region) AS area, cid, price * 2, price FROM orders" in text
    assert "  [spark]     pre-aggregate by area into 10 s panes" in text
    assert ("  [spate]     window: HOP 1 min every 10 s AS w by area: count(DISTINCT cid) "
            "AS buyers, sum(price * 2) AS doubled, max(price); state") in text


def test_an_updating_aggregate_and_a_session() -> None:
    updating = _explain(ORDERS + "SELECT region, count(*) AS n, corr(price, id) AS c "
                        "FROM orders GROUP BY region;")
    assert "  [spark]     pre-aggregate by region (signed partials)" in updating
    assert "aggregate: updating aggregate by region: count(*) AS n, corr(price, id) AS c;" \
        in updating
    session = _explain(ORDERS + "INSERT INTO out SELECT count(*) AS n FROM orders "
                       "GROUP BY SESSION(INTERVAL '5' SECOND);")
    assert "pre-aggregate by (all rows), per event time" in session
    assert "window: SESSION gap 5 s by (all rows): count(*) AS n;" in session


def test_lookup_columns_are_named_by_their_table() -> None:
    text = _explain(ORDERS + CUSTOMERS + "INSERT INTO out SELECT o.id, c.name, c.address.city "
                    "FROM orders o LEFT JOIN customers c ON c.id = o.cid;")
    assert "  [spark]     SELECT o.*, TRY_CAST(o.cid AS STRING) FROM orders AS o" in text
    assert "lookup: LEFT lookup join with customers (redis) by id;" in text
    assert ("  [spark]     SELECT o.id, customers.name, customers.address.city FROM lookup AS o"
            in text)
    assert not INTERNAL.search(text)


@pytest.mark.parametrize(("window", "name"), [
    (WindowSpec("tumble", 1_000_000, 1_000_000), "TUMBLE 1 s"),
    (WindowSpec("hop", 10_000_000, 1_000_000), "HOP 10 s every 1 s"),
    (WindowSpec("session", 0, 0, 5_000_000), "SESSION gap 5 s"),
    (WindowSpec("tumble", 5_400_000_000, 5_400_000_000), "TUMBLE 1 h 30 min"),
    (WindowSpec("hop", 86_400_000_000, 250_000), "HOP 1 d every 250 ms"),
])
def test_window_names(window: WindowSpec, name: str) -> None:
    assert window_name(window) == name


def test_durations_keep_two_units_and_fall_back_to_microseconds() -> None:
    assert duration(90_061_000_000) == "1 d 1 h"
    assert duration(1_500) == "1 ms"
    assert duration(7) == "7 µs"
    assert duration(0) == "0 s"
