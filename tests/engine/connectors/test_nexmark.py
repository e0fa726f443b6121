"""The nexmark generator and source: determinism, proportions, ids, offsets."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from pyspark.sql import types as T
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from spate.engine.connectors import CONNECTORS, HIDDEN_CONTROL, HIDDEN_PARTITION, HIDDEN_TIMESTAMP
from spate.engine.connectors.arrow_batches import arrow_schema
from spate.engine.connectors.nexmark import NexmarkDataSource, NexmarkStreamReader
from spate.engine.connectors.nexmark_gen import NEXMARK_TYPES, Events, generate
from tests.engine.connectors.support import make_table, run_stream

BASE_NS = 1_700_000_000_000_000_000
ARROW_TYPES = tuple(arrow_schema(T.StructType([T.StructField(n, t) for n, t in NEXMARK_TYPES])
                                 ).field(i).type for i in range(3))


def _events(ids: np.ndarray, ns_per_event: float = 1000.0) -> Events:
    return generate(ids, BASE_NS, ns_per_event, ARROW_TYPES)


def _rows(events: Events) -> list[dict[str, Any]]:
    table = pa.table({"person": events.person, "auction": events.auction, "bid": events.bid})
    return table.to_pylist()


def test_event_content_depends_only_on_its_index() -> None:
    ids = np.arange(1_000, 6_000)
    whole = _rows(_events(ids))
    strided = {}
    for k in range(3):
        part = ids[k::3]
        strided.update(zip(part.tolist(), _rows(_events(part)), strict=True))
    assert [strided[i] for i in ids.tolist()] == whole
    shuffled = np.random.default_rng(7).permutation(ids)
    again = dict(zip(shuffled.tolist(), _rows(_events(shuffled)), strict=True))
    assert [again[i] for i in ids.tolist()] == whole


def test_proportions_and_one_struct_per_row() -> None:
    rows = _rows(_events(np.arange(50_000)))
    kinds = Counter(next(k for k in ("person", "auction", "bid") if row[k] is not None)
                    for row in rows)
    assert kinds == {"person": 1_000, "auction": 3_000, "bid": 46_000}
    assert all(sum(row[k] is not None for k in row) == 1 for row in rows)


def test_ids_refer_to_existing_entities_with_hot_skew() -> None:
    rows = _rows(_events(np.arange(100_000)))
    persons: set[int] = set()
    auctions: set[int] = set()
    hot_bids = bids = 0
    for row in rows:
        if (person := row["person"]) is not None:
            persons.add(person["id"])
        elif (auction := row["auction"]) is not None:
            assert auction["seller"] in persons
            auctions.add(auction["id"])
        else:
            bid = row["bid"]
            assert bid["auction"] in auctions and bid["bidder"] in persons
            bids += 1
            hot_bids += (bid["auction"] - 1000) % 100 == 0
    assert persons == set(range(1000, 3000))
    assert auctions == set(range(1000, 7000))
    assert hot_bids / bids > 0.45  # half the bids go to the current hot auction


def test_field_shapes_and_event_times() -> None:
    events = _events(np.arange(0, 2_000), ns_per_event=2_500.0)
    rows = _rows(events)
    stamps = np.asarray(events.timestamps.cast(pa.int64()))
    assert stamps.tolist() == [(BASE_NS + int(np.floor(i * 2_500.0))) // 1000
                               for i in range(2_000)]
    for row in rows:
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


def _reader(parallelism: int, **options: Any) -> NexmarkStreamReader:
    table = make_table("nexmark", nexmark__base_time_ms=BASE_NS // 10**6, **options)
    source = NexmarkDataSource(CONNECTORS["nexmark"].reader_options(table, parallelism))
    reader = source.streamReader(source.schema())
    assert isinstance(reader, NexmarkStreamReader)
    reader.clock_ns = lambda: 5 * 10**18
    return reader


def test_offsets_rate_limited_and_read_limits() -> None:
    reader = _reader(2, event_rate=1_000, max_events_per_batch=300)
    start = reader.initialOffset()
    assert start["base_ns"] == BASE_NS and start["next"] == 0
    reader.clock_ns = lambda: 5 * 10**18 + 1_000_000_000  # 1 s later: events 0..1000 due
    assert reader.latestOffset(start, ReadAllAvailable())["next"] == 1_001
    assert reader.latestOffset(start, reader.getDefaultReadLimit())["next"] == 300
    assert reader.latestOffset(start, ReadMaxRows(10))["next"] == 10


def test_unlimited_bounded_source_ends_with_one_eof() -> None:
    reader = _reader(3, event_rate=100, runtime=2.5, rate_limited=False)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["next"] == 250 and end["eof"]
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    partitions = reader.partitions(start, end)
    assert len(partitions) == 3
    rows = [(partition.value["index"], row) for partition in partitions
            for batch in reader.read(partition) for row in batch.to_pylist()]
    assert len(rows) == 251
    assert [row[HIDDEN_CONTROL] for _, row in rows if row[HIDDEN_CONTROL]] == ["eof"]
    assert all(row[HIDDEN_PARTITION] == index for index, row in rows)


def test_offsets_tell_a_batchs_rows_and_its_end() -> None:
    """What the runner takes instead of counting rows (Connector.batch_facts)."""
    options = {"event_rate": 100, "runtime": 2.5, "rate_limited": False}
    table = make_table("nexmark", nexmark__base_time_ms=BASE_NS // 10**6, **options)
    reader = _reader(2, **options)
    start = reader.initialOffset()
    middle = reader.latestOffset(start, ReadMaxRows(90))
    end = reader.latestOffset(middle, ReadAllAvailable())
    for first, last in ((None, middle), (middle, end)):
        rows = [row for partition in reader.partitions(first or start, last)
                for batch in reader.read(partition) for row in batch.to_pylist()]
        facts = CONNECTORS["nexmark"].batch_facts(table, 2, first, last)
        assert facts is not None
        assert facts.rows == sum(1 for r in rows if r[HIDDEN_CONTROL] is None)
        assert facts.finished == any(r[HIDDEN_CONTROL] == "eof" for r in rows)
    assert facts.finished and facts.rows == 160


def _canonical(rows: list[dict[str, Any]]) -> Counter[str]:
    return Counter(json.dumps({k: v for k, v in row.items() if k != HIDDEN_PARTITION},
                              sort_keys=True, default=str) for row in rows)


@pytest.mark.spark
def test_same_events_at_any_parallelism(spark: SparkSession, tmp_path: Path) -> None:
    table = make_table("nexmark", event_rate=1_000, runtime=8, rate_limited=False,
                       max_events_per_batch=3_000, nexmark__base_time_ms=1_700_000_000_000)
    runs = {}
    for parallelism in (1, 3):
        df = CONNECTORS["nexmark"].read_stream(spark, table, parallelism)
        runs[parallelism] = run_stream(df, tmp_path / f"checkpoint{parallelism}")
        assert runs[parallelism].failure is None
    one, three = runs[1], runs[3]
    assert len(one.data_rows()) == 8_000
    assert _canonical(one.data_rows()) == _canonical(three.data_rows())
    assert {row[HIDDEN_PARTITION] for row in three.data_rows()} == {0, 1, 2}
    assert one.controls() == [(2, "eof")] and three.controls() == [(2, "eof")]
    first = min(one.data_rows(), key=lambda row: row[HIDDEN_TIMESTAMP])
    assert first["person"] is not None and first["person"]["id"] == 1000


@pytest.mark.spark
def test_replayed_batch_regenerates_identical_events(spark: SparkSession,
                                                     tmp_path: Path) -> None:
    table = make_table("nexmark", event_rate=1_000, runtime=6, rate_limited=False,
                       max_events_per_batch=2_000)
    checkpoint = tmp_path / "checkpoint"
    crashed = run_stream(CONNECTORS["nexmark"].read_stream(spark, table, 2), checkpoint,
                         crash_at=1)
    assert crashed.failure is not None
    resumed = run_stream(CONNECTORS["nexmark"].read_stream(spark, table, 2), checkpoint)
    assert resumed.failure is None and min(resumed.batches) == 1
    assert _canonical(resumed.batches[1]) == _canonical(crashed.batches[1])
    everything = crashed.batches[0] + [r for b in resumed.batches.values() for r in b]
    assert sum(r[HIDDEN_CONTROL] is None for r in everything) == 6_000
