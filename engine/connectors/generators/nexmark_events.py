"""Nexmark events assembled from event numbers, in a few Spark projections.

:func:`projections` lists them.  Each computes what later ones use more than
once (an event's draws, the bytes it lacks of its kind's average size, its
texts), so that Spark computes it once per event: Spark keeps a projection of
its own when merging it into the next would repeat such work.  An event's texts
(up to three) are cut from the pools at once (:func:`~.nexmark_gen.pool_text`)
and split by their lengths.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors.generators.native import floor_div
from spate.engine.connectors.generators.nexmark_expressions import (
    AUCTION,
    AUCTION_PROPORTION,
    AUCTION_SALTS,
    AUCTION_TYPE,
    AVG_AUCTION_BYTES,
    AVG_BID_BYTES,
    AVG_PERSON_BYTES,
    BID,
    BID_SALTS,
    BID_TYPE,
    FIRST_AUCTION_ID,
    FIRST_CATEGORY_ID,
    FIRST_NAMES,
    FIRST_PERSON_ID,
    HOT_AUCTION_RATIO,
    HOT_BIDDER_RATIO,
    HOT_CHANNELS,
    HOT_SELLER_RATIO,
    LAST_NAMES,
    MIX_ROUNDS,
    NUM_CATEGORIES,
    NUM_CHANNELS,
    NUM_IN_FLIGHT_AUCTIONS,
    PERSON,
    PERSON_SALTS,
    PERSON_TYPE,
    PROPORTION_DENOMINATOR,
    TEXT_BYTES,
    US_CITIES,
    US_STATES,
    below,
    high,
    hot_group,
    hot_or,
    kind,
    last_auction,
    last_person,
    low,
    mix_input,
    mix_round,
    pick,
    pool_text,
    price,
    recent_auction,
    recent_person,
    salt_offset,
    text_codes,
    text_start,
    u64,
)

_LONG = T.LongType()
#: Columns of the projections before the events': each event's kind, draws by slot,
#: time, bid channel, the bytes it lacks of its kind's average size, the length of
#: its padding, its texts' lengths and codes, and its texts in one string.
DRAW_SLOTS = tuple(f"_d{slot}" for slot in range(len(PERSON_SALTS)))
_KIND, _MICROS, _CHANNEL, _MISSING, _EXTRA = "_kind", "_micros", "_channel", "_missing", "_extra"
#: The base-0 ids of the newest person and auction created at or before an event.
_PERSON, _AUCTION = "_last_person", "_last_auction"
_LENGTHS, _POSITIONS, _TEXTS = ("_n1", "_n2"), ("_p_letters", "_p_words"), ("_letters", "_words")
_SALTS_BY_KIND = {PERSON: PERSON_SALTS, AUCTION: AUCTION_SALTS, BID: BID_SALTS}
#: A person's name is drawn among every first name followed by every last name.
_NAMES = len(FIRST_NAMES) * len(LAST_NAMES)
#: A bid's URL names its channel after 15 pool letters.
_URL_LETTERS = 15


def projections(ids: Column, base_ns: int, ns_per_event: float) -> list[list[Column]]:
    """The projections adding to events ``ids`` what :func:`person`, :func:`auction`
    and :func:`bid` are built from (each a list of columns, earlier columns kept)."""
    everything = F.col("*")
    return [[everything, kind(ids).alias(_KIND), last_person(ids).alias(_PERSON),
             last_auction(ids).alias(_AUCTION)],
            *_drawn(ids, base_ns, ns_per_event),
            [everything, _missing().alias(_MISSING), _channel_number().alias(_CHANNEL)],
            [everything, _extra_length().alias(_EXTRA)],
            [everything, *_segments()],
            [everything, pool_text(F.col(_POSITIONS[0]), words=False).alias(_TEXTS[0]),
             pool_text(F.col(_POSITIONS[1]), words=True).alias(_TEXTS[1])]]


def _drawn(ids: Column, base_ns: int, ns_per_event: float) -> list[list[Column]]:
    """Each event's time (µs) and draws, slot ``j`` holding draw ``j`` of its kind (0
    past the kind's draws): a projection per mixing round, as a round reads its input
    twice."""
    inputs = []
    for slot in range(len(DRAW_SLOTS)):
        offset = F.lit(None).cast(_LONG)
        for kind_number, salts in _SALTS_BY_KIND.items():
            if slot < len(salts):
                offset = F.when(F.col(_KIND) == kind_number, u64(salt_offset(salts[slot]))) \
                    .otherwise(offset)
        inputs.append(mix_input(ids, offset).alias(f"{DRAW_SLOTS[slot]}_0"))
    offset_ns = F.floor(ids.cast(T.DoubleType()) * F.lit(ns_per_event))
    micros = floor_div(F.lit(base_ns).cast(_LONG) + offset_ns, 1000).alias(_MICROS)
    stages = [[F.col("*"), *inputs, micros]]
    for number, (shift, multiplier) in enumerate(MIX_ROUNDS, start=1):
        last = number == len(MIX_ROUNDS)
        stages.append([F.col("*"), *(
            _final(mix_round(F.col(f"{slot}_{number - 1}"), shift, multiplier), last)
            .alias(slot if last else f"{slot}_{number}") for slot in DRAW_SLOTS)])
    return stages


def _final(draw: Column, last: bool) -> Column:
    """A slot's draw after its last round: 0 for a slot the event's kind does not use."""
    return F.coalesce(draw, F.lit(0).cast(_LONG)) if last else draw


def _draws() -> tuple[list[Column], list[Column]]:
    """The upper and lower halves of an event's draws, by slot."""
    slots = [F.col(name) for name in DRAW_SLOTS]
    return [high(d) for d in slots], [low(d) for d in slots]


def _by_kind(person_value: Column | int, auction_value: Column | int,
             bid_value: Column | int) -> Column:
    return (F.when(F.col(_KIND) == PERSON, person_value)
            .when(F.col(_KIND) == AUCTION, auction_value).otherwise(bid_value))


def _user_length(hi: list[Column]) -> Column:
    return 3 + below(hi[2], 5)


def _domain_length(hi: list[Column]) -> Column:
    return 3 + below(hi[3], 3)


def _item_length(hi: list[Column]) -> Column:
    return 3 + below(hi[0], 17)


def _description_length(hi: list[Column]) -> Column:
    return 3 + below(hi[1], 97)


def _name_parts(hi: list[Column]) -> tuple[Column, Column]:
    """The indexes of a person's first and last name."""
    drawn = below(hi[0], _NAMES)
    return floor_div(drawn, len(LAST_NAMES)), drawn % len(LAST_NAMES)


def _name(hi: list[Column]) -> Column:
    first, last = _name_parts(hi)
    return F.concat(pick(FIRST_NAMES, first), F.lit(" "), pick(LAST_NAMES, last))


def _length_of(values: tuple[str, ...], index: Column) -> Column:
    """``len(values[index])``."""
    return pick(tuple(str(len(v)) for v in values), index).cast(_LONG)


def _missing() -> Column:
    """The bytes an event lacks of its kind's average size (its padding makes them up,
    give or take a fifth)."""
    hi, lo = _draws()
    first, last = _name_parts(hi)
    person_bytes = (8 + _length_of(FIRST_NAMES, first) + 1 + _length_of(LAST_NAMES, last)
                    + _user_length(hi)
                    + _domain_length(hi) + len("@.com") + len("0000 0000 0000 0000")
                    + _length_of(US_CITIES, below(lo[0], len(US_CITIES)))
                    + _length_of(US_STATES, below(hi[1], len(US_STATES))))
    auction_bytes = 8 + _item_length(hi) + _description_length(hi) + 40
    current = _by_kind(person_bytes, auction_bytes, 32)
    average = _by_kind(AVG_PERSON_BYTES, AVG_AUCTION_BYTES, AVG_BID_BYTES)
    return F.greatest(average - current, F.lit(0).cast(_LONG))


def _extra_length() -> Column:
    """The length of an event's padding: what it lacks, give or take a fifth."""
    hi, _ = _draws()
    missing = F.col(_MISSING)
    delta = F.rint(missing.cast(T.DoubleType()) * 0.2).cast(_LONG)
    spread = below(_by_kind(hi[6], hi[5], hi[3]), F.greatest(delta * 2, F.lit(1).cast(_LONG)))
    return missing - delta + F.when(delta > 0, spread).otherwise(0)


def _channel_number() -> Column:
    """A bid's channel: half the bids come through one of the 4 hot channels, the rest
    spread over the NUM_CHANNELS others."""
    _, lo = _draws()
    drawn = below(lo[2], 2 * NUM_CHANNELS)
    return F.when(drawn < NUM_CHANNELS, drawn % len(HOT_CHANNELS)) \
        .otherwise(drawn - NUM_CHANNELS + len(HOT_CHANNELS))


def _segments() -> list[Column]:
    """The lengths of an event's first two texts of a pool, and the positions of its
    texts in each pool: a person's e-mail user and domain (letters) and padding
    (words); an auction's item name, description and padding (words); a bid's URL
    letters and padding (words)."""
    hi, lo = _draws()
    extra = F.col(_EXTRA)
    url_start = (F.col(_CHANNEL) * 7919) % (TEXT_BYTES - _URL_LETTERS)
    letters = _by_kind(
        F.concat(text_codes(text_start(lo[1]), _user_length(hi)),
                 text_codes(text_start(lo[2]), _domain_length(hi))),
        text_codes(F.lit(0).cast(_LONG), F.lit(0).cast(_LONG)),
        text_codes(url_start, F.lit(_URL_LETTERS).cast(_LONG)))
    words = _by_kind(
        text_codes(text_start(lo[6]), extra),
        F.concat(text_codes(text_start(lo[0]), _item_length(hi)),
                 text_codes(text_start(lo[1]), _description_length(hi)),
                 text_codes(text_start(lo[5]), extra)),
        text_codes(text_start(lo[3]), extra))
    return [_by_kind(_user_length(hi), _item_length(hi), 0).alias(_LENGTHS[0]),
            _by_kind(0, _description_length(hi), 0).alias(_LENGTHS[1]),
            letters.alias(_POSITIONS[0]), words.alias(_POSITIONS[1])]


def _split(text: str, first: Column | int, second: Column | int | None = None
           ) -> list[Column]:
    """Pool text ``text`` cut after ``first`` bytes (and ``second`` more)."""
    column, start = F.col(text), F.lit(1).cast(_LONG)
    rest = F.lit(TEXT_BYTES).cast(_LONG)
    head = F.lit(first).cast(_LONG) if isinstance(first, int) else first
    if second is None:
        return [column.substr(start, head), column.substr(head + 1, rest)]
    middle = F.lit(second).cast(_LONG) if isinstance(second, int) else second
    return [column.substr(start, head), column.substr(head + 1, middle),
            column.substr(head + middle + 1, rest)]


def micros() -> Column:
    """An event's time in µs since the epoch."""
    return F.col(_MICROS)


def _time() -> Column:
    return F.timestamp_micros(micros())


def person() -> Column:
    """The person of a person event (NULL for the others)."""
    hi, lo = _draws()
    user, domain = _split(_TEXTS[0], F.col(_LENGTHS[0]))
    extra = F.col(_TEXTS[1])
    card = F.format_string("%04d %04d %04d %04d", below(hi[4], 10_000), below(lo[4], 10_000),
                           below(hi[5], 10_000), below(lo[5], 10_000))
    return _entity(PERSON, PERSON_TYPE, F.col(_PERSON) + FIRST_PERSON_ID,
                   _name(hi),
                   F.concat(user, F.lit("@"), domain, F.lit(".com")), card,
                   pick(US_CITIES, below(lo[0], len(US_CITIES))),
                   pick(US_STATES, below(hi[1], len(US_STATES))), _time(), extra)


def auction(ns_per_event: float) -> Column:
    """The auction of an auction event (NULL for the others)."""
    hi, lo = _draws()
    item, description, extra = _split(_TEXTS[1], F.col(_LENGTHS[0]), F.col(_LENGTHS[1]))
    initial = price(hi[2])
    newest_person = F.col(_PERSON)
    seller = hot_or(hi[3], HOT_SELLER_RATIO, hot_group(newest_person),
                    recent_person(newest_person, lo[3]))
    # Auctions last up to twice the time the reference needs to create the in-flight ones.
    events_in_flight = NUM_IN_FLIGHT_AUCTIONS * PROPORTION_DENOMINATOR // AUCTION_PROPORTION
    horizon_ms = max(int(events_in_flight * ns_per_event / 1e6) * 2, 1)
    expires = micros() + (1 + below(lo[4], min(horizon_ms, 0xFFFFFFFF))) * 1000
    return _entity(AUCTION, AUCTION_TYPE, F.col(_AUCTION) + FIRST_AUCTION_ID, description,
                   item, initial, initial + price(lo[2]), _time(), F.timestamp_micros(expires),
                   seller + FIRST_PERSON_ID, FIRST_CATEGORY_ID + below(hi[4], NUM_CATEGORIES),
                   extra)


def bid() -> Column:
    """The bid of a bid event (NULL for the others)."""
    hi, lo = _draws()
    letters, extra = F.col(_TEXTS[0]), F.col(_TEXTS[1])
    newest_auction, newest = F.col(_AUCTION), F.col(_PERSON)
    to_auction = hot_or(hi[0], HOT_AUCTION_RATIO, hot_group(newest_auction),
                        recent_auction(newest_auction, lo[0]))
    bidder = hot_or(hi[1], HOT_BIDDER_RATIO, F.least(hot_group(newest) + 1, newest),
                    recent_person(newest, lo[1]))
    channel = F.col(_CHANNEL)
    name = F.when(channel < len(HOT_CHANNELS), pick(HOT_CHANNELS, channel)) \
        .otherwise(F.concat(F.lit("channel-"), (channel - len(HOT_CHANNELS)).cast("string")))
    url = F.concat(F.lit("https://www.nexmark.com/"), letters.substr(1, 5), F.lit("/"),
                   letters.substr(6, 5), F.lit("/"), letters.substr(11, 5),
                   F.lit("/item.htm?query=1&channel="), name)
    return _entity(BID, BID_TYPE, to_auction + FIRST_AUCTION_ID, bidder + FIRST_PERSON_ID,
                   price(hi[2]), name, url, _time(), extra)


def _entity(event_kind: int, kind_type: T.StructType, *values: Column | int) -> Column:
    """A struct of ``kind_type`` from ``values`` for events of ``event_kind``, else NULL.
    Its fields are never NULL, which Spark cannot know of every function: said so."""
    fields = []
    for value, field in zip(values, kind_type.fields, strict=True):
        column = value if isinstance(value, Column) else F.lit(value)
        empty = F.lit("") if field.dataType == T.StringType() else F.lit(0).cast(field.dataType)
        fields.append(F.coalesce(column.cast(field.dataType), empty).alias(field.name))
    return F.when(F.col(_KIND) == event_kind, F.struct(*fields).cast(kind_type))
