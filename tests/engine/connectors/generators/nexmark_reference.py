"""The Nexmark generator in NumPy: the oracle the native one is checked against.

Spate's ``nexmark`` source computed its events with this module in a Python data
source until it became native Spark (``engine/connectors/generators/nexmark_events.py``, the
same definition in Spark SQL expressions); the tests hold the two to the same
events, value for value.

Event ``i`` depends only on ``i`` and a fixed seed: every random draw is a
counter-based hash (splitmix64) of ``(i, draw number)``, never a stateful RNG,
so any index range regenerates identically on replay, in any batch and at any
parallelism. Shape and proportions follow the Nexmark reference generator (Beam
/ Flink / Arroyo): per 50 events 1 person, 3 auctions, 46 bids; sellers and
bidders are recently created persons, bids go to recent auctions, with hot
auctions, sellers and bidders. Unlike the reference (which lets bids run ahead of
auction creation by up to 10 ids) every id refers to an already created entity.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import types as T

from spate.engine.connectors.core.arrow_batches import TIMESTAMP_US, string_array

# The generator's parameters are the engine's: the oracle checks its arithmetic, not them.
from spate.engine.connectors.generators.nexmark_expressions import (  # noqa: F401  (some are read by tests)
    AUCTION_PROPORTION,
    AVG_AUCTION_BYTES,
    AVG_BID_BYTES,
    AVG_PERSON_BYTES,
    FIRST_AUCTION_ID,
    FIRST_CATEGORY_ID,
    FIRST_NAMES,
    FIRST_PERSON_ID,
    HOT_AUCTION_RATIO,
    HOT_BIDDER_RATIO,
    HOT_CHANNELS,
    HOT_GROUP,
    HOT_SELLER_RATIO,
    LAST_NAMES,
    NUM_ACTIVE_PEOPLE,
    NUM_CATEGORIES,
    NUM_CHANNELS,
    NUM_IN_FLIGHT_AUCTIONS,
    PERSON_PROPORTION,
    PROPORTION_DENOMINATOR,
    SEED,
    US_CITIES,
    US_STATES,
)

_TEXT_BYTES = 1 << 20
_MAX_TEXT = 1024
_U32 = np.uint64(0xFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser over uint64 (wrapping arithmetic)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return np.asarray(x ^ (x >> np.uint64(31)))


def draw(ids: np.ndarray, salt: int) -> tuple[np.ndarray, np.ndarray]:
    """Two independent uniform 32-bit draws per id for draw number ``salt``."""
    h = _mix(ids.astype(np.uint64) * np.uint64(0xD1B54A32D192ED03)
             + np.uint64((SEED + salt * 0x632BE59BD9B4E019) % (1 << 64)))
    return h >> np.uint64(32), h & _U32


def below(u32: np.ndarray, bound: np.ndarray | int) -> np.ndarray:
    """Map uniform 32-bit draws onto ``[0, bound)`` (multiply-shift, as int64)."""
    return ((u32 * np.asarray(bound, dtype=np.uint64)) >> np.uint64(32)).astype(np.int64)


@functools.cache
def _text_buffers() -> tuple[np.ndarray, np.ndarray]:
    """Deterministic pools of random letters, and of letters with ~1/13 spaces."""
    hi, lo = draw(np.arange(_TEXT_BYTES, dtype=np.int64), 9_999)
    letters = (below(hi, 26) + ord("a")).astype(np.uint8)
    words = np.where(below(lo, 13) == 0, ord(" "), letters).astype(np.uint8)
    return letters, words


@functools.cache
def _channel_tables() -> tuple[pa.Array, pa.Array]:
    """Channel names and their URLs: 4 hot channels, then NUM_CHANNELS cold ones."""
    letters, _ = _text_buffers()
    names = list(HOT_CHANNELS) + [f"channel-{i}" for i in range(NUM_CHANNELS)]
    urls = []
    for i, name in enumerate(names):
        start = (i * 7919) % (_TEXT_BYTES - 15)
        part = letters[start:start + 15].tobytes().decode("ascii")
        urls.append(f"https://www.nexmark.com/{part[:5]}/{part[5:10]}/{part[10:]}"
                    f"/item.htm?query=1&channel={name}")
    return pa.array(names, pa.string()), pa.array(urls, pa.string())


@functools.cache
def _price_table() -> np.ndarray:
    """Prices in cents, log-uniform between $1 and $1M (the reference distribution)."""
    steps = np.arange(1 << 16, dtype=np.float64) / (1 << 16)
    return np.rint(np.power(10.0, steps * 6.0) * 100.0).astype(np.int64)


def random_text(u_start: np.ndarray, lengths: np.ndarray, words: bool = False) -> pa.Array:
    """Strings of the given lengths cut from a deterministic text pool."""
    letters, spaced = _text_buffers()
    pool = spaced if words else letters
    starts = below(u_start, _TEXT_BYTES - _MAX_TEXT).astype(np.int32)
    return pool_strings(pool, starts, np.minimum(lengths, _MAX_TEXT).astype(np.int32))


def pool_strings(pool: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """``pool[start:start+length]`` per row, as a string array.

    Builds an Arrow string *view* array pointing into the pool (16 bytes per row,
    no text copied by Python), then lets Arrow's C++ cast copy the text out.
    """
    views = np.zeros((len(lengths), 4), dtype=np.int32)
    views[:, 0] = lengths
    prefixes = np.lib.stride_tricks.sliding_window_view(pool, 4)[starts]
    views[:, 1] = np.ascontiguousarray(prefixes).view(np.int32).ravel()
    views[:, 3] = starts
    short = lengths <= 12  # short strings are stored inline in the view
    if short.any():
        inline = np.ascontiguousarray(
            np.lib.stride_tricks.sliding_window_view(pool, 12)[starts[short]])
        inline[np.arange(12)[None, :] >= lengths[short][:, None]] = 0
        views[short, 1:] = inline.view(np.int32)
    array = pa.Array.from_buffers(pa.string_view(), len(lengths),
                                  [None, pa.py_buffer(views), pa.py_buffer(pool)])
    return array.cast(pa.string())


def _lengths(array: pa.Array) -> np.ndarray:
    return np.asarray(pc.binary_length(array), dtype=np.int64)


def extra(u_size: np.ndarray, u_start: np.ndarray, current: np.ndarray,
          average: int) -> pa.Array:
    """Padding bringing an event to about ``average`` bytes (the reference's ``extra``)."""
    desired = np.maximum(average - current, 0)
    delta = np.rint(desired * 0.2).astype(np.int64)
    size = desired - delta + np.where(delta > 0, below(u_size, np.maximum(2 * delta, 1)), 0)
    return random_text(u_start, size, words=True)


# -- ids ------------------------------------------------------------------------------


def last_person(ids: np.ndarray) -> np.ndarray:
    """Base-0 id of the newest person created at or before each event."""
    return ids // PROPORTION_DENOMINATOR


def last_auction(ids: np.ndarray) -> np.ndarray:
    """Base-0 id of the newest auction created at or before each event (-1: none yet)."""
    epoch, offset = np.divmod(ids, PROPORTION_DENOMINATOR)
    in_auctions = offset - PERSON_PROPORTION
    return np.where(offset < PERSON_PROPORTION, epoch * AUCTION_PROPORTION - 1,
                    epoch * AUCTION_PROPORTION + np.minimum(in_auctions, AUCTION_PROPORTION - 1))


def recent_person(ids: np.ndarray, u32: np.ndarray) -> np.ndarray:
    """A uniformly chosen base-0 id among the last NUM_ACTIVE_PEOPLE persons."""
    created = last_person(ids) + 1
    active = np.minimum(created, NUM_ACTIVE_PEOPLE)
    return np.asarray(created - active + below(u32, active))


def recent_auction(ids: np.ndarray, u32: np.ndarray) -> np.ndarray:
    """A uniformly chosen base-0 id among the last NUM_IN_FLIGHT_AUCTIONS auctions."""
    newest = last_auction(ids)
    oldest = np.maximum(newest - NUM_IN_FLIGHT_AUCTIONS, 0)
    return np.asarray(oldest + below(u32, newest - oldest + 1))


def _hot_or(u32: np.ndarray, ratio: int, hot: np.ndarray, cold: np.ndarray) -> np.ndarray:
    return np.where(below(u32, ratio) > 0, hot, cold)


@dataclass(frozen=True)
class Events:
    """A generated index range, as Arrow arrays aligned with the event ids."""

    ids: np.ndarray
    person: pa.StructArray
    auction: pa.StructArray
    bid: pa.StructArray
    timestamps: pa.Array


def event_kinds(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Boolean masks (person, auction, bid) of the events ``ids``."""
    offset = ids % PROPORTION_DENOMINATOR
    person = offset < PERSON_PROPORTION
    auction = ~person & (offset < PERSON_PROPORTION + AUCTION_PROPORTION)
    return person, auction, ~(person | auction)


def _struct(*fields: tuple[str, T.DataType]) -> T.StructType:
    return T.StructType([T.StructField(name, kind, False) for name, kind in fields])


_TS, _LONG, _TEXT = T.TimestampType(), T.LongType(), T.StringType()
PERSON_TYPE = _struct(("id", _LONG), ("name", _TEXT), ("email_address", _TEXT),
                      ("credit_card", _TEXT), ("city", _TEXT), ("state", _TEXT),
                      ("datetime", _TS), ("extra", _TEXT))
AUCTION_TYPE = _struct(("id", _LONG), ("description", _TEXT), ("item_name", _TEXT),
                       ("initial_bid", _LONG), ("reserve", _LONG), ("datetime", _TS),
                       ("expires", _TS), ("seller", _LONG), ("category", _LONG),
                       ("extra", _TEXT))
BID_TYPE = _struct(("auction", _LONG), ("bidder", _LONG), ("price", _LONG), ("channel", _TEXT),
                   ("url", _TEXT), ("datetime", _TS), ("extra", _TEXT))
#: The nexmark table's columns (docs/sql/connectors.md): one non-NULL struct per row.
NEXMARK_TYPES = (("person", PERSON_TYPE), ("auction", AUCTION_TYPE), ("bid", BID_TYPE))

Column: TypeAlias = np.ndarray | pa.Array


@functools.cache
def _name_tables() -> tuple[pa.Array, pa.Array, pa.Array]:
    names = [f"{first} {last}" for first in FIRST_NAMES for last in LAST_NAMES]
    return (pa.array(names, pa.string()), pa.array(US_CITIES, pa.string()),
            pa.array(US_STATES, pa.string()))


def _credit_cards(groups: list[np.ndarray]) -> pa.Array:
    """``dddd dddd dddd dddd`` from four numbers below 10000."""
    count = len(groups[0])
    chars = np.full((count, 19), ord(" "), dtype=np.uint8)
    for g, numbers in enumerate(groups):
        for digit in range(4):
            chars[:, g * 5 + digit] = (numbers // 10 ** (3 - digit)) % 10 + ord("0")
    offsets = np.arange(0, 19 * count + 1, 19, dtype=np.int64)
    return string_array(chars.reshape(-1), offsets)


def _persons(ids: np.ndarray, ts_us: np.ndarray) -> list[Column]:
    names, cities, states = _name_tables()
    h1, l1 = draw(ids, 1)
    h2, l2 = draw(ids, 2)
    h3, l3 = draw(ids, 3)
    h4, l4 = draw(ids, 4)
    h5, l5 = draw(ids, 5)
    h6, l6 = draw(ids, 6)
    name = names.take(below(h1, len(names)))
    city = cities.take(below(l1, len(cities)))
    state = states.take(below(h2, len(states)))
    user = random_text(l2, 3 + below(h3, 5))
    domain = random_text(l3, 3 + below(h4, 3))
    email = pc.binary_join_element_wise(pc.binary_join_element_wise(user, domain, "@"),
                                        ".com", "")
    card = _credit_cards([below(h5, 10_000), below(l5, 10_000), below(h6, 10_000),
                          below(l6, 10_000)])
    current = 8 + np.sum([_lengths(a) for a in (name, email, card, city, state)], axis=0)
    h7, l7 = draw(ids, 7)
    pad = extra(h7, l7, current, AVG_PERSON_BYTES)
    return [last_person(ids) + FIRST_PERSON_ID, name, email, card, city, state, ts_us, pad]


def _auctions(ids: np.ndarray, ts_us: np.ndarray, ns_per_event: float) -> list[Column]:
    prices = _price_table()
    h1, l1 = draw(ids, 11)
    h2, l2 = draw(ids, 12)
    h3, l3 = draw(ids, 13)
    h4, l4 = draw(ids, 14)
    h5, l5 = draw(ids, 15)
    h6, l6 = draw(ids, 16)
    item = random_text(l1, 3 + below(h1, 17), words=True)
    description = random_text(l2, 3 + below(h2, 97), words=True)
    initial = prices[(h3 >> np.uint64(16)).astype(np.int64)]
    reserve = initial + prices[(l3 >> np.uint64(16)).astype(np.int64)]
    seller = _hot_or(h4, HOT_SELLER_RATIO, (last_person(ids) // HOT_GROUP) * HOT_GROUP,
                     recent_person(ids, l4))
    # Auctions last up to twice the time the reference needs to create the in-flight ones.
    events_in_flight = NUM_IN_FLIGHT_AUCTIONS * PROPORTION_DENOMINATOR // AUCTION_PROPORTION
    horizon_ms = max(int(events_in_flight * ns_per_event / 1e6) * 2, 1)
    expires = ts_us + (1 + below(l5, min(horizon_ms, 0xFFFFFFFF))) * 1000
    current = 8 + _lengths(item) + _lengths(description) + 40
    pad = extra(h6, l6, current, AVG_AUCTION_BYTES)
    return [last_auction(ids) + FIRST_AUCTION_ID, description, item, initial, reserve, ts_us,
            expires, seller + FIRST_PERSON_ID, FIRST_CATEGORY_ID + below(h5, NUM_CATEGORIES),
            pad]


def _bids(ids: np.ndarray, ts_us: np.ndarray) -> list[Column]:
    channels, urls = _channel_tables()
    h1, l1 = draw(ids, 21)
    h2, l2 = draw(ids, 22)
    h3, l3 = draw(ids, 23)
    h4, l4 = draw(ids, 24)
    auction = _hot_or(h1, HOT_AUCTION_RATIO, (last_auction(ids) // HOT_GROUP) * HOT_GROUP,
                      recent_auction(ids, l1))
    newest = last_person(ids)
    bidder = _hot_or(h2, HOT_BIDDER_RATIO, np.minimum((newest // HOT_GROUP) * HOT_GROUP + 1,
                                                      newest), recent_person(ids, l2))
    # Half the bids come through one of the hot channels, the rest spread over the others.
    pick = below(l3, 2 * NUM_CHANNELS)
    channel = np.where(pick < NUM_CHANNELS, pick % len(HOT_CHANNELS),
                       len(HOT_CHANNELS) + pick - NUM_CHANNELS)
    price = _price_table()[(h3 >> np.uint64(16)).astype(np.int64)]
    pad = extra(h4, l4, np.full(len(ids), 32, dtype=np.int64), AVG_BID_BYTES)
    return [auction + FIRST_AUCTION_ID, bidder + FIRST_PERSON_ID, price,
            channels.take(channel), urls.take(channel), ts_us, pad]


def _scatter(column: Column, positions: np.ndarray, length: int,
             kind: pa.DataType) -> pa.Array:
    """A full-length child array: ``column`` at ``positions``, zero/empty elsewhere."""
    if isinstance(column, np.ndarray):
        full = np.zeros(length, dtype=np.int64)
        full[positions] = column
        return pa.array(full, pa.int64()).cast(kind)
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)
    offsets = offsets[column.offset:column.offset + len(column) + 1]
    sizes = np.zeros(length, dtype=np.int64)
    sizes[positions] = np.diff(offsets)
    spread = np.empty(length + 1, dtype=np.int64)
    spread[0] = offsets[0] if len(offsets) else 0
    np.cumsum(sizes, out=spread[1:])
    spread[1:] += spread[0]
    return pa.StringArray.from_buffers(length, pa.py_buffer(spread.astype(np.int32)),
                                       column.buffers()[2])


def _assemble(columns: list[Column], mask: np.ndarray, kind: pa.StructType) -> pa.StructArray:
    positions = np.flatnonzero(mask)
    children = [_scatter(c, positions, len(mask), kind.field(i).type)
                for i, c in enumerate(columns)]
    return pa.StructArray.from_arrays(children, fields=list(kind), mask=pa.array(~mask))


def generate(ids: np.ndarray, base_ns: int, ns_per_event: float,
             arrow_types: tuple[pa.StructType, pa.StructType, pa.StructType]) -> Events:
    """Events ``ids`` (int64, any order) with event ``i`` at ``base + i * ns_per_event``."""
    ids = ids.astype(np.int64, copy=False)
    ts_us = (base_ns + np.floor(ids * ns_per_event).astype(np.int64)) // 1000
    is_person, is_auction, is_bid = event_kinds(ids)
    person = _persons(ids[is_person], ts_us[is_person])
    auction = _auctions(ids[is_auction], ts_us[is_auction], ns_per_event)
    bid = _bids(ids[is_bid], ts_us[is_bid])
    person_type, auction_type, bid_type = arrow_types
    return Events(ids=ids,
                  person=_assemble(person, is_person, person_type),
                  auction=_assemble(auction, is_auction, auction_type),
                  bid=_assemble(bid, is_bid, bid_type),
                  timestamps=pa.array(ts_us, pa.int64()).cast(TIMESTAMP_US))
