"""The Nexmark event generator's parts as Spark SQL expressions over event numbers.

Event ``i`` depends only on ``i`` and a fixed seed: every random draw is a
counter-based hash (splitmix64) of ``(i, draw number)``, never a stateful RNG,
so any index range regenerates identically on replay, in any batch and at any
parallelism, and Spark computes it natively (the events are assembled from these
parts by :mod:`~spate.engine.connectors.generators.nexmark_events`).  Shape and proportions
follow the Nexmark reference generator (Beam / Flink / Arroyo): per 50 events 1
person, 3 auctions, 46 bids; sellers and bidders are recently created persons,
bids go to recent auctions, with hot auctions, sellers and bidders.  Unlike the
reference (which lets bids run ahead of auction creation by up to 10 ids) every
id refers to an already created entity.

Unsigned 64-bit arithmetic is done in Spark's signed BIGINT, whose multiplication
and addition wrap as unsigned ones do (Spate's sessions run without ANSI
overflow checks, ``engine/spark.py``); shifts are logical.  Text is cut from
two pools of a MiB each whose every byte is itself a draw of its position, so it
is computed byte by byte (a MiB in each plan would cost more).  The events are
the ones the NumPy generator this replaced produced
(``tests/engine/connectors/generators/nexmark_reference.py``, the tests' oracle).
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors.generators.native import floor_div

SEED = 0x2F6A_1C3B_9D4E_5A87
PROPORTION_DENOMINATOR = 50
PERSON_PROPORTION = 1
AUCTION_PROPORTION = 3
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
NUM_CATEGORIES = 5
NUM_ACTIVE_PEOPLE = 1000
NUM_IN_FLIGHT_AUCTIONS = 100
#: A 1-in-ratio chance of a cold pick; hot picks share one id per group of 100.
HOT_AUCTION_RATIO, HOT_SELLER_RATIO, HOT_BIDDER_RATIO = 2, 4, 4
HOT_GROUP = 100
AVG_PERSON_BYTES, AVG_AUCTION_BYTES, AVG_BID_BYTES = 200, 500, 100
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
NUM_CHANNELS = 10_000
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah",
               "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones",
              "Noris")
US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond",
             "Seattle", "Kent", "Cheyenne")
#: Bytes in each text pool, and the longest text cut from one.
TEXT_BYTES = 1 << 20
MAX_TEXT = 1024
#: The draw number of the text pools' bytes.
TEXT_SALT = 9_999
#: Draw numbers: a person's, an auction's and a bid's draws are 1–7, 11–16 and 21–24.
PERSON_SALTS, AUCTION_SALTS, BID_SALTS = range(1, 8), range(11, 17), range(21, 25)
#: Event kinds, as :func:`kind` numbers them.
PERSON, AUCTION, BID = 0, 1, 2

_U64 = 1 << 64


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


# -- unsigned 64-bit draws -------------------------------------------------------------


def u64(value: int) -> Column:
    """An unsigned 64-bit constant as the BIGINT of the same bits."""
    value %= _U64
    return F.lit(value - _U64 if value >= 1 << 63 else value).cast(_LONG)


#: splitmix64's finaliser: an increment, then three (shift, multiplier) rounds, the last
#: without a multiplier.
_MIX_INCREMENT = 0x9E3779B97F4A7C15
MIX_ROUNDS = ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB), (31, None))
#: What a number is multiplied by before it is mixed.
_SPREAD = 0xD1B54A32D192ED03


def mix_round(x: Column, shift: int, multiplier: int | None) -> Column:
    """One round of the finaliser over ``x``, which it reads twice: give it a column,
    not an expression, or the expression is computed twice (and its own parts
    again, round after round)."""
    mixed = x.bitwiseXOR(F.shiftrightunsigned(x, shift))
    return mixed if multiplier is None else mixed * u64(multiplier)


def salt_offset(salt: int) -> int:
    """What draw number ``salt`` adds to a number before it is mixed."""
    return SEED + salt * 0x632BE59BD9B4E019


def mix_input(numbers: Column, offset: Column) -> Column:
    """What the finaliser's rounds (:data:`MIX_ROUNDS`, :func:`mix_round`) turn into the
    64-bit draw of ``numbers`` for a draw number's ``offset`` (:func:`salt_offset`)."""
    return numbers * u64(_SPREAD) + offset + u64(_MIX_INCREMENT)


def _round(shift: int, multiplier: int | None) -> Callable[[Column], Column]:
    """One mixing round as a lambda of one element."""
    return lambda x: mix_round(x, shift, multiplier)


def high(h: Column) -> Column:
    """The upper 32 bits of a draw: a uniform number below 2**32."""
    return F.shiftrightunsigned(h, 32)


def low(h: Column) -> Column:
    """The lower 32 bits of a draw: another, independent one."""
    return h.bitwiseAND(u64(0xFFFFFFFF))


def below(u32: Column, bound: Column | int) -> Column:
    """Map a uniform 32-bit draw onto ``[0, bound)`` (multiply-shift)."""
    bound_column = bound if isinstance(bound, Column) else F.lit(bound).cast(_LONG)
    return F.shiftrightunsigned(u32 * bound_column, 32)


# -- text ------------------------------------------------------------------------------


def text_codes(start: Column, length: Column) -> Column:
    """The positions of pool bytes ``start`` to ``start + length`` (at most
    :data:`MAX_TEXT`): several texts' positions are turned into bytes at once by
    :func:`pool_text`."""
    length = F.least(length, F.lit(MAX_TEXT).cast(_LONG))
    return F.slice(F.sequence(start, start + length), 1, length.cast(T.IntegerType()))


def text_start(u32: Column) -> Column:
    """Where a text cut from a pool starts, where a draw says."""
    return below(u32, TEXT_BYTES - MAX_TEXT)


def pool_text(positions: Column, words: bool) -> Column:
    """The bytes at the array of ``positions`` of the pool of letters, or (``words``) of
    letters with about one space in 13, as one string.  Each byte is the draw of its
    position, hashed in a pass per mixing round, as a lambda's repeated parts would
    each be computed again (lambdas are interpreted)."""
    offset = u64(salt_offset(TEXT_SALT) + _MIX_INCREMENT)
    draws = F.transform(positions, lambda k: k * u64(_SPREAD) + offset)
    for shift, multiplier in MIX_ROUNDS:
        draws = F.transform(draws, _round(shift, multiplier))
    letters = F.transform(draws, _word_byte if words else _letter)
    return F.array_join(letters, "")


def _letter(h: Column) -> Column:
    return F.chr(below(high(h), 26) + 97)


def _word_byte(h: Column) -> Column:
    return F.when(below(low(h), 13) == 0, F.lit(" ")).otherwise(_letter(h))


def price(u32: Column) -> Column:
    """A price in cents from a draw's top 16 bits, log-uniform between $1 and $1M."""
    step = F.shiftrightunsigned(u32, 16).cast(T.DoubleType()) / float(1 << 16)
    cents = F.rint(F.pow(F.lit(10.0), step * 6.0) * 100.0).cast(_LONG)
    return F.coalesce(cents, F.lit(0).cast(_LONG))  # never NULL: a cast Spark cannot know


def pick(values: tuple[str, ...], index: Column) -> Column:
    """``values[index]``."""
    return F.coalesce(F.element_at(F.array(*(F.lit(v) for v in values)),
                                   (index + 1).cast(T.IntegerType())), F.lit(""))


# -- ids -------------------------------------------------------------------------------


def kind(ids: Column) -> Column:
    """:data:`PERSON`, :data:`AUCTION` or :data:`BID`: what event ``ids`` is."""
    offset = ids % PROPORTION_DENOMINATOR
    return (F.when(offset < PERSON_PROPORTION, PERSON)
            .when(offset < PERSON_PROPORTION + AUCTION_PROPORTION, AUCTION).otherwise(BID))


def last_person(ids: Column) -> Column:
    """Base-0 id of the newest person created at or before each event."""
    return floor_div(ids, PROPORTION_DENOMINATOR)


def last_auction(ids: Column) -> Column:
    """Base-0 id of the newest auction created at or before each event (-1: none yet)."""
    epoch, offset = last_person(ids), ids % PROPORTION_DENOMINATOR
    in_auctions = F.least(offset - PERSON_PROPORTION, F.lit(AUCTION_PROPORTION - 1).cast(_LONG))
    return F.when(offset < PERSON_PROPORTION, epoch * AUCTION_PROPORTION - 1) \
        .otherwise(epoch * AUCTION_PROPORTION + in_auctions)


def recent_person(newest: Column, u32: Column) -> Column:
    """A uniformly chosen base-0 id among the last NUM_ACTIVE_PEOPLE persons, ``newest``
    (:func:`last_person`) the last."""
    created = newest + 1
    active = F.least(created, F.lit(NUM_ACTIVE_PEOPLE).cast(_LONG))
    return created - active + below(u32, active)


def recent_auction(newest: Column, u32: Column) -> Column:
    """A uniformly chosen base-0 id among the last NUM_IN_FLIGHT_AUCTIONS auctions,
    ``newest`` (:func:`last_auction`) the last."""
    oldest = F.greatest(newest - NUM_IN_FLIGHT_AUCTIONS, F.lit(0).cast(_LONG))
    return oldest + below(u32, newest - oldest + 1)


def hot_or(u32: Column, ratio: int, hot: Column, cold: Column) -> Column:
    """``hot`` unless a 1-in-``ratio`` draw says ``cold``."""
    return F.when(below(u32, ratio) > 0, hot).otherwise(cold)


def hot_group(base0: Column) -> Column:
    """The first id of ``base0``'s group of :data:`HOT_GROUP`."""
    return floor_div(base0, HOT_GROUP) * HOT_GROUP
