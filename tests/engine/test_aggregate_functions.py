"""The aggregates (docs/sql/functions.md) beyond count/sum/avg/min/max, in windowed (TUMBLE,
HOP) and updating aggregates, against the same queries in batch in DuckDB.  The variances,
(y, x) aggregates, distinct counts, first and last values, bit_and, bit_or and
bit_xor, median, percentile_cont (also weighted) and array_agg also run alone in a HOP
and in a SESSION window: with no other aggregate beside them, those queries take the
columnar window and session operators.

One pipeline runs every case (CI time): an append-only ``events`` source read
by a TUMBLE, a HOP and an updating GROUP BY, and a ``debezium_json`` source
``items`` (updates and deletes) read by an updating GROUP BY, whose withdrawn
rows exercise the aggregates' retraction.  ``items`` ends first: the
updating aggregate over ``events`` would otherwise be expired when ``events``
ends while ``items`` (which has no watermark) still runs.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import duckdb
import pytest

from tests.engine.harness import run_pipeline
from tests.engine.test_updating_oracle import _applied, _changes

pytestmark = pytest.mark.spark

BASE = datetime(2024, 1, 1, tzinfo=UTC)
BASE_US = int(BASE.timestamp() * 1_000_000)


def _weighted(x: str, weight: str, p: float) -> str:
    """DuckDB's quantile_cont of x repeated weight times (weights of at most 0 count none)."""
    return (f"list_aggregate(flatten(list(list_resize([{x}], greatest({weight}, 0), {x}))), "
            f"'quantile_cont', {p})")


#: (Spate's call, DuckDB's, output name); approx_* are exact in Spate
CALLS = [("stddev(v)", "stddev(v)", "sd"), ("stddev_samp(v)", "stddev_samp(v)", "sds"),
         ("stddev_pop(v)", "stddev_pop(v)", "sdp"), ("var(v)", "variance(v)", "var"),
         ("var_samp(v)", "var_samp(v)", "vs"), ("var_pop(v)", "var_pop(v)", "vp"),
         ("bit_xor(v)", "bit_xor(v)", "bx"), ("bit_and(v)", "bit_and(v)", "ba"),
         ("bit_or(v)", "bit_or(v)", "bo"), ("bool_and(v > 0)", "bool_and(v > 0)", "band"),
         ("bool_or(v > 2)", "bool_or(v > 2)", "bor"), ("median(v)", "median(v)", "med"),
         ("approx_median(v)", "median(v)", "amed"),
         ("approx_percentile_cont(0.3) WITHIN GROUP (ORDER BY v)", "quantile_cont(v, 0.3)",
          "pc"),
         ("approx_percentile_cont_with_weight(v, abs(v) % 3 + 1, 0.3)",
          _weighted("v", "abs(v) % 3 + 1", 0.3), "pw"),
         ("approx_percentile_cont_with_weight(v % 3, 0.8) WITHIN GROUP (ORDER BY v)",
          _weighted("v", "v % 3", 0.8), "pwg"),
         ("approx_distinct(v)", "count(DISTINCT v)", "ad"), ("array_agg(v)", "array_agg(v)", "aa"),
         # DuckDB has no covar (covar_samp); its NaN (a 0 divisor) is Spate's NULL
         *((f"{f}(v, v % 7)", f"{'covar_samp' if f == 'covar' else f}(v, v % 7)", f)
           for f in ("corr", "covar", "covar_samp", "covar_pop", "regr_slope",
                     "regr_intercept", "regr_count", "regr_r2", "regr_avgx", "regr_avgy",
                     "regr_sxx", "regr_syy", "regr_sxy")),
         ("first_value(v)", "first(v ORDER BY t)", "fv"),
         ("last_value(v)", "last(v ORDER BY t)", "lv")]
NAMES = [name for _, _, name in CALLS]
SPATE_AGGREGATES = ", ".join(f"{spate} AS {name}" for spate, _, name in CALLS)
DUCKDB_AGGREGATES = ", ".join(duck for _, duck, _ in CALLS)
#: first_value and last_value go by event time, which ``items`` rows lack
TIMED = NAMES.index("fv")
#: The variances and (y, x) aggregates (kept as moments), distinct counts, first and
#: last values, the bitwise aggregates and the unweighted bags: what TUMBLE and HOP windows
#: compute in columns
COLUMNAR = [call for call in CALLS
            if call[2].startswith(("sd", "v", "co", "regr", "ad", "fv", "lv"))
            or call[2] in ("bx", "ba", "bo", "med", "amed", "pc", "pw", "pwg", "aa")]
COLUMNAR.append(("count(DISTINCT v % 5)", "count(DISTINCT v % 5)", "cd"))
COLUMNAR_NAMES = [name for _, _, name in COLUMNAR]
#: What updating aggregates compute in columns, of these: the variances, (y, x) aggregates,
#: distinct counts, the percentiles (also weighted), the bitwise aggregates and array_agg
#: (over updating input too).
COLUMNAR_UPDATING = [call for call in CALLS
                     if call[2].startswith(("sd", "v", "co", "regr", "ad"))
                     or call[2] in ("med", "amed", "pc", "pw", "pwg", "bx", "ba", "bo", "aa")]
#: ... and first_value and last_value, over ``events`` (``items`` rows have no event time)
COLUMNAR_TIMED = COLUMNAR_UPDATING + CALLS[TIMED:]


WINDOWED = """
CREATE TABLE {name} WITH (connector = 'single_file', path = '{dir}/{name}.jsonl',
                          format = 'json', type = 'sink');
INSERT INTO {name}
SELECT k, unix_micros(w.start) AS ws, {names}
FROM (SELECT k, {window} AS w, {aggregates} FROM events GROUP BY k, w);
"""
UPDATING = """
CREATE TABLE {name} WITH (connector = 'single_file', path = '{dir}/{name}.jsonl',
                          format = 'debezium_json', type = 'sink');
INSERT INTO {name} SELECT k, {aggregates} FROM {source} GROUP BY k;
"""
SOURCES = """
CREATE TABLE events (k BIGINT, v BIGINT, ts TIMESTAMP NOT NULL,
                     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'single_file', path = '{dir}/events.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '7');
CREATE TABLE items (id BIGINT PRIMARY KEY, k BIGINT, v BIGINT)
WITH (connector = 'single_file', path = '{dir}/items.jsonl', format = 'debezium_json',
      type = 'source', max_lines_per_batch = '20');
"""
#: (sink, window SQL, (slide, width) in µs)
WINDOWS = [("tumbled", "TUMBLE(INTERVAL '5' SECOND)", (5_000_000, 5_000_000)),
           ("hopped", "HOP(INTERVAL '2' SECOND, INTERVAL '6' SECOND)", (2_000_000, 6_000_000))]
#: the aggregates of :data:`COLUMNAR` alone, over a HOP: the columnar window operator
COLUMNAR_WINDOW = ("columnar_hops", "HOP(INTERVAL '1' SECOND, INTERVAL '5' SECOND)",
                 (1_000_000, 5_000_000))
#: the same over SESSION windows (the columnar session operator), and their gap in µs
COLUMNAR_SESSIONS = ("columnar_sessions", "SESSION(INTERVAL '1' SECOND)", 1_000_000)


def _calls(calls: list[tuple[str, str, str]]) -> str:
    return ", ".join(f"{spate} AS {name}" for spate, _, name in calls)


def _pipeline(workdir: Any) -> str:
    aliased = SPATE_AGGREGATES
    parts = [SOURCES.format(dir=workdir)]
    parts += [WINDOWED.format(name=name, dir=workdir, window=window, aggregates=aliased,
                              names=", ".join(NAMES)) for name, window, _ in WINDOWS]
    parts.append(WINDOWED.format(name=COLUMNAR_WINDOW[0], dir=workdir, window=COLUMNAR_WINDOW[1],
                                 aggregates=_calls(COLUMNAR), names=", ".join(COLUMNAR_NAMES)))
    parts.append(WINDOWED.format(name=COLUMNAR_SESSIONS[0], dir=workdir,
                                 window=COLUMNAR_SESSIONS[1], aggregates=_calls(COLUMNAR),
                                 names=", ".join(COLUMNAR_NAMES)))
    parts.append(UPDATING.format(name="totals", dir=workdir, aggregates=aliased,
                                 source="events"))
    untimed = SPATE_AGGREGATES.split(", first_value")[0]
    parts.append(UPDATING.format(name="current", dir=workdir, aggregates=untimed,
                                 source="items"))
    for name, source, calls in (("columnar_totals", "events", COLUMNAR_TIMED),
                                ("columnar_current", "items", COLUMNAR_UPDATING)):
        parts.append(UPDATING.format(name=name, dir=workdir, source=source,
                                     aggregates=_calls(calls)))
    return "\n".join(parts)


def _events(rng: random.Random) -> list[tuple[int, int | None, int]]:
    """(k, v, ms) in event-time order: small and negative values, some NULLs."""
    rows = []
    for i in range(70):
        v = None if rng.random() < 0.1 else rng.randint(-6, 40)
        rows.append((rng.randint(1, 3), v, i * 450 + rng.randint(0, 300)))
    return sorted(rows, key=lambda r: r[2])


def _sorted(values: list[Any], names: list[str]) -> list[Any]:
    """``values`` (of ``names``) with array_agg's sorted (its order is not specified), as a
    string, which approx compares exactly."""
    if "aa" not in names:
        return values
    at = names.index("aa")
    array = values[at]
    if array is not None:
        array = repr(sorted(array, key=lambda v: (v is None, v or 0)))
    return [*values[:at], array, *values[at + 1:]]


def _approx(rows: list[tuple[Any, ...]], names: list[str]) -> dict[tuple[Any, ...], Any]:
    """Keyed by the leading integer columns, the rest compared with a tolerance (numbers;
    the sorted array_agg text exactly)."""
    return {tuple(r[:2]) if len(r) > len(names) + 1 else (r[0],):
            [v if isinstance(v, str) or v is None else pytest.approx(v, rel=1e-7, abs=1e-7)
             for v in _sorted([None if v != v else v for v in r[-len(names):]], names)]
            for r in rows}


def _got_windowed(path: Any, names: list[str]) -> dict[tuple[Any, ...], list[Any]]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {(r["k"], r["ws"]): _sorted([r[n] for n in names], names) for r in rows}


def _got_updating(path: Any, names: list[str]) -> dict[tuple[Any, ...], list[Any]]:
    lines = path.read_text().splitlines()
    def comparable_image(image: dict[str, Any]) -> dict[str, Any]:
        if "aa" not in names:
            return image
        return {**image, "aa": _sorted([image[n] for n in names], names)[names.index("aa")]}

    hashable = [json.dumps({side: None if change[side] is None else
                            comparable_image(change[side]) for side in ("before", "after")})
                for change in map(json.loads, lines)]
    comparable = path.with_suffix(".sorted.jsonl")  # array_agg as a string: hashable
    comparable.write_text("".join(line + "\n" for line in hashable))
    applied = _applied(comparable, ["k", *names])
    assert all(count == 1 for count in applied.values())
    return {(row[0],): list(row[1:]) for row in applied}


def test_more_aggregates_equal_duckdb(spark, tmp_path_factory):  # type: ignore[no-untyped-def]
    workdir = tmp_path_factory.mktemp("aggregate_functions")
    rng = random.Random(7)
    events = _events(rng)
    with open(workdir / "events.jsonl", "w") as handle:
        for k, v, ms in events:
            ts = (BASE + timedelta(milliseconds=ms)).isoformat().replace("+00:00", "Z")
            handle.write(json.dumps({"k": k, "v": v, "ts": ts}) + "\n")
    operations = [(rng.randint(0, 12), rng.randint(0, 3),
                   None if rng.random() < 0.1 else rng.randint(-6, 40)) for _ in range(60)]
    lines, table = _changes(operations)
    (workdir / "items.jsonl").write_text("".join(line + "\n" for line in lines))

    counters = run_pipeline(spark, _pipeline(workdir), workdir, update_flush_interval_ms=0)
    assert counters.get("rows_late", 0) == 0

    db = duckdb.connect()
    db.execute("CREATE TABLE events (k BIGINT, v BIGINT, t BIGINT)")  # t: µs
    db.executemany("INSERT INTO events VALUES (?, ?, ?)",
                   [(k, v, BASE_US + ms * 1000) for k, v, ms in events])
    db.execute("CREATE TABLE items (id BIGINT, k BIGINT, v BIGINT)")
    db.executemany("INSERT INTO items VALUES (?, ?, ?)",
                   [(r["id"], r["k"], r["v"]) for r in table.values()])
    for (name, _, (slide, width)), calls in (*((w, CALLS) for w in WINDOWS),
                                             (COLUMNAR_WINDOW, COLUMNAR)):
        names = [name for _, _, name in calls]
        expected = db.execute(f"""
            SELECT k, start, {", ".join(duck for _, duck, _ in calls)}
            FROM events, range(t - t % {slide} - {width} + {slide}, t - t % {slide} + 1,
                               {slide}) AS r(start)
            GROUP BY k, start""").fetchall()
        assert _got_windowed(workdir / f"{name}.jsonl", names) == _approx(expected, names), name
    # A key's sessions: a row more than the gap after the key's previous one starts one.
    name, _, gap = COLUMNAR_SESSIONS
    expected = db.execute(f"""
        WITH marked AS (
            SELECT *, CASE WHEN t - lag(t) OVER (PARTITION BY k ORDER BY t) <= {gap}
                           THEN 0 ELSE 1 END AS begins FROM events),
        numbered AS (
            SELECT *, sum(begins) OVER (PARTITION BY k ORDER BY t
                                        ROWS UNBOUNDED PRECEDING) AS session FROM marked)
        SELECT k, min(t), {", ".join(duck for _, duck, _ in COLUMNAR)}
        FROM numbered GROUP BY k, session""").fetchall()
    assert len(expected) > 3 * 3  # several sessions per key
    assert (_got_windowed(workdir / f"{name}.jsonl", COLUMNAR_NAMES)
            == _approx(expected, COLUMNAR_NAMES)), name
    for name, source, calls in (("totals", "events", CALLS), ("current", "items", CALLS[:TIMED]),
                                ("columnar_totals", "events", COLUMNAR_TIMED),
                                ("columnar_current", "items", COLUMNAR_UPDATING)):
        names = [name for _, _, name in calls]
        aggregates = ", ".join(duck for _, duck, _ in calls)
        expected = db.execute(f"SELECT k, {aggregates} FROM {source} GROUP BY k").fetchall()
        assert _got_updating(workdir / f"{name}.jsonl", names) == _approx(expected, names), name
    assert table  # the change stream left rows


#: DECIMAL sums and extremes, and the least and greatest text, as a trading desk keeps them
TRADE_AGGREGATES = ("sum(price) AS s, avg(price) AS a, min(price) AS lo, max(price) AS hi, "
                    "min(trader) AS ft, max(trader) AS lt")
DECIMAL_WINDOWS = """
CREATE TABLE trades (k BIGINT, price DECIMAL(20, 2), trader TEXT, ts TIMESTAMP NOT NULL,
                     WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)
WITH (connector = 'single_file', path = '{dir}/trades.jsonl', format = 'json',
      type = 'source', max_lines_per_batch = '4');
""" + "".join(WINDOWED.format(name=name, dir="{dir}", window=window,
                              aggregates=TRADE_AGGREGATES, names="s, a, lo, hi, ft, lt")
              .replace("FROM events", "FROM trades")
              for name, window in (("tumbled", "TUMBLE(INTERVAL '10' SECOND)"),
                                   ("hopped", "HOP(INTERVAL '5' SECOND, INTERVAL '10' SECOND)"),
                                   ("sessions", "SESSION(INTERVAL '3' SECOND)"))) \
    + UPDATING.format(name="balances", dir="{dir}", source="trades", aggregates=TRADE_AGGREGATES)


def test_decimal_sums_in_windows_and_sessions_are_the_exact_sums(spark, tmp_path):  # type: ignore[no-untyped-def]
    """A window's, session's or updating aggregate's sum of DECIMALs is the exact sum
    rounded once to a double: three dimes are 0.3 (adding doubles gives
    0.30000000000000004), and cents on a balance of 10^13 are kept until the end (a
    double holds them only roughly). The least and greatest text go by its bytes, as
    in Spark ("Zoë" < "zed" < "Ängström")."""
    prices = {1: ["0.10", "0.10", "0.10"], 2: ["12345678901234.57", "0.01", "-0.03"]}
    traders = ["zed", "Ängström", "Zoë"]
    with open(tmp_path / "trades.jsonl", "w") as handle:
        for i in range(3):
            for k, values in prices.items():
                ts = (BASE + timedelta(seconds=i)).isoformat().replace("+00:00", "Z")
                handle.write(json.dumps({"k": k, "price": float(values[i]),
                                         "trader": traders[i], "ts": ts}) + "\n")
    run_pipeline(spark, DECIMAL_WINDOWS.format(dir=tmp_path), tmp_path)
    names = ["s", "a", "lo", "hi", "ft", "lt"]
    for k, values in prices.items():
        exact = sum(Decimal(v) for v in values)
        expected = [float(exact), float(exact) / 3, float(min(map(Decimal, values))),
                    float(max(map(Decimal, values))), "Zoë", "Ängström"]
        for name in ("tumbled", "hopped", "sessions"):
            rows = [json.loads(line) for line in (tmp_path / f"{name}.jsonl").open()]
            whole = [[r[n] for n in names] for r in rows
                     if r["k"] == k and r["ws"] <= BASE_US and r["ws"] + 3_000_000 > BASE_US]
            assert whole == [expected], (name, k, rows)
        changes = [json.loads(line) for line in (tmp_path / "balances.jsonl").open()]
        latest = [change["after"] for change in changes
                  if change["after"] is not None and change["after"]["k"] == k][-1]
        assert [latest[n] for n in names] == expected
