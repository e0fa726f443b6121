"""The nexmark source: its events (Spark's, value for value the NumPy reference
generator's), their proportions and ids, its offsets."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession

from spate.engine.connectors import CONNECTORS, HIDDEN_CONTROL, HIDDEN_PARTITION, HIDDEN_TIMESTAMP
from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.core.base import ConnectorError, stream_schema
from spate.engine.connectors.generators.nexmark import COLUMNS
from tests.engine.connectors.generators.nexmark_reference import generate
from tests.engine.connectors.support import make_table

BASE_NS = 1_700_000_000_000_000_000
NEXMARK = CONNECTORS["nexmark"]
ARROW_TYPES = tuple(arrow_schema(stream_schema(COLUMNS)).field(i).type for i in range(3))


def _offset(next_event: int, eof: bool = False, base_ns: int = BASE_NS) -> dict[str, Any]:
    return {"start_wall_ns": 5 * 10**18, "base_ns": base_ns, "next": next_event, "eof": eof}


def _rows(spark: SparkSession, start: dict[str, Any] | None, end: dict[str, Any],
          parallelism: int = 1, **options: Any) -> list[dict[str, Any]]:
    frame = NEXMARK.rows(spark, make_table("nexmark", **options), parallelism, start, end)
    assert frame.schema == stream_schema(COLUMNS)
    return [row.asDict(recursive=True) for row in frame.collect()]


def _canonical(event: dict[str, Any]) -> str:
    """An event as text, its times as µs since the epoch (aware or naive alike)."""
    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if hasattr(value, "timestamp"):
            return round(value.replace(tzinfo=None).timestamp() * 1e6)
        return value
    return json.dumps(plain(event), sort_keys=True)


@pytest.mark.spark
@pytest.mark.parametrize(("rate", "first", "count"), [
    (1_000, 0, 6_000), (7.5, 10**9, 1_500), (123_456.0, 10**12 + 17, 1_500)])
def test_events_are_the_reference_generators(spark: SparkSession, rate: float, first: int,
                                             count: int) -> None:
    """Every field of every event, at any position of the stream and any rate."""
    rows = _rows(spark, _offset(first), _offset(first + count), 3, event_rate=rate)
    got = sorted(_canonical({k: r[k] for k in ("person", "auction", "bid", HIDDEN_TIMESTAMP)})
                 for r in rows)
    events = generate(np.arange(first, first + count), BASE_NS, 1e9 / rate, ARROW_TYPES)
    expected = pa.table({"person": events.person, "auction": events.auction,
                         "bid": events.bid, HIDDEN_TIMESTAMP: events.timestamps}).to_pylist()
    assert got == sorted(_canonical(e) for e in expected)


@pytest.mark.spark
def test_proportions_and_ids_refer_to_existing_entities(spark: SparkSession) -> None:
    frame = NEXMARK.rows(spark, make_table("nexmark", event_rate=1000), 2, None,
                         _offset(50_000))
    rows = frame.selectExpr("person.id AS person", "auction.id AS auction",
                            "auction.seller AS seller", "bid.auction AS bid_auction",
                            "bid.bidder AS bidder", HIDDEN_TIMESTAMP).collect()
    kinds = Counter("person" if r.person is not None else "auction" if r.auction is not None
                    else "bid" for r in rows)
    assert kinds == {"person": 1_000, "auction": 3_000, "bid": 46_000}
    persons, auctions, hot_bids = set(), set(), 0
    for row in sorted(rows, key=lambda r: r[HIDDEN_TIMESTAMP]):
        if row.person is not None:
            persons.add(row.person)
        elif row.auction is not None:
            assert row.seller in persons
            auctions.add(row.auction)
        else:
            assert row.bid_auction in auctions and row.bidder in persons
            hot_bids += (row.bid_auction - 1000) % 100 == 0
    assert persons == set(range(1000, 2000)) and auctions == set(range(1000, 4000))
    assert hot_bids / kinds["bid"] > 0.45  # half the bids go to the current hot auction


@pytest.mark.spark
def test_field_shapes(spark: SparkSession) -> None:
    for row in _rows(spark, None, _offset(500), 1, event_rate=1000):
        if (person := row["person"]) is not None:
            assert re.fullmatch(r"\d{4} \d{4} \d{4} \d{4}", person["credit_card"])
            assert re.fullmatch(r"[a-z]+@[a-z]+\.com", person["email_address"])
            assert len(person["name"].split()) == 2
        elif (auction := row["auction"]) is not None:
            assert auction["reserve"] >= auction["initial_bid"] >= 100
            assert auction["expires"] > auction["datetime"]
            assert 10 <= auction["category"] < 15
        else:
            assert row["bid"]["url"].startswith("https://www.nexmark.com/")
            assert row["bid"]["channel"] in row["bid"]["url"]


@pytest.mark.spark
def test_events_are_dealt_to_partitions_and_the_last_batch_ends_the_input(
        spark: SparkSession) -> None:
    options = {"event_rate": 100, "runtime": 2.5, "rate_limited": False}
    rows = _rows(spark, _offset(40), _offset(250, eof=True), 3, **options)
    data = [r for r in rows if r[HIDDEN_CONTROL] is None]
    assert len(data) == 210
    first = min(data, key=lambda r: r[HIDDEN_TIMESTAMP])
    assert first["bid"] is not None and first[HIDDEN_PARTITION] == 40 % 3
    assert {r[HIDDEN_PARTITION] for r in data} == {0, 1, 2}
    [control] = [r for r in rows if r[HIDDEN_CONTROL] is not None]
    assert control == {"person": None, "auction": None, "bid": None, HIDDEN_PARTITION: 0,
                       HIDDEN_TIMESTAMP: None, HIDDEN_CONTROL: "eof"}
    facts = NEXMARK.batch_facts(make_table("nexmark", **options), 3, _offset(40),
                                _offset(250, eof=True))
    assert facts.rows == len(data) and facts.finished


def _advance(start: dict[str, Any] | None, now_ms: int, **options: Any) -> dict[str, Any]:
    table = make_table("nexmark", nexmark__base_time_ms=BASE_NS // 10**6, **options)
    result: dict[str, Any] = NEXMARK.advance(table, 2, start, now_ms)
    return result


def test_offsets_rate_limited_and_capped_per_batch() -> None:
    start = _advance(None, 5 * 10**12, event_rate=1_000, max_events_per_batch=300)
    # the schedule starts at the first batch, the event times at the fixed base
    assert start == {"start_wall_ns": 5 * 10**18, "base_ns": BASE_NS, "next": 1, "eof": False}
    later = 5 * 10**12 + 1_000  # 1 s later: events 0..1000 are due, 300 a batch
    assert _advance(start, later, event_rate=1_000, max_events_per_batch=300)["next"] == 301
    assert _advance(start, later, event_rate=1_000, max_events_per_batch=5_000)["next"] == 1_001
    assert _advance(start, 5 * 10**12, event_rate=1_000) == start  # nothing new due


def test_an_unlimited_bounded_source_ends() -> None:
    options = {"event_rate": 100, "runtime": 2.5, "rate_limited": False}
    end = _advance(_offset(0), 0, **options)  # the wall clock does not matter
    assert end == _offset(50, eof=False)  # a replay: in at least five epochs
    last = _advance(_offset(240), 0, **options)
    assert last == _offset(250, eof=True)
    assert _advance(last, 0, **options) == last
    fresh = _advance(None, 7, event_rate=10)
    assert fresh["next"] == 1 and fresh["start_wall_ns"] == 7_000_000


def test_an_offset_of_another_connector_is_refused() -> None:
    impulse_offset = {"start_ns": 5, "next": 42, "eof": False}
    with pytest.raises(ConnectorError, match="source 't' cannot resume"):
        _advance(impulse_offset, 0, event_rate=10)
