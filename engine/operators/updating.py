"""The updating (non-windowed) aggregate for one key, as pure functions over plain values.

Rows reach the operator pre-aggregated by native Spark, per key and epoch,
into a *signed partial*: rows that add count +1, rows that withdraw
(``_spate_retract``) count -1.  Every aggregate is therefore retraction-aware:

* count, sum and avg keep running totals (they are invertible);
* the variances keep moments, added and withdrawn with
  :func:`spate.engine.operators.aggregates.merge_moments`; bit_xor keeps an xor
  (its own inverse) and a count; bit_and and bit_or keep per-bit counts;
* min, max (and so bool_and, bool_or), count(DISTINCT), array_agg, median
  and percentile_cont keep a multiset (first_value and last_value: of
  ``[event time, value]`` pairs)
  of values (value -> count), so withdrawing the current minimum finds the
  next one.  Over append-only input nothing is ever withdrawn, and min/max
  keep just the current value.

A key's state (:class:`KeyState`) also holds the output it last emitted.  The
operator merges partials as they come and *flushes* a key at most once per
flush interval (:func:`flush_due`): the key's changes since its last flush
merge into one change (:func:`flush`) — retract the old output and insert the
new one, or only one side, or nothing at all when the output did not change or
the key was created and removed in between.  All values are msgpack-able, as
they are stored.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from spate.engine.operators.aggregates import (
    BAGS,
    COMOMENTS,
    INT_BITS,
    MOMENTS,
    Comoments,
    Moments,
    add_bit_counts,
    bag_result,
    bits_result,
    time_key,
)

#: A signed partial of one key and epoch: [net rows, partial of aggregate 0, ...]
Partial = list[Any]


class Accumulator(ABC):
    """One aggregate function of an updating aggregate."""

    @abstractmethod
    def initialize(self) -> Any:
        """The accumulator of a key without rows."""

    @abstractmethod
    def add(self, acc: Any, partial: Any) -> Any:
        """``acc`` with one signed partial merged in."""

    @abstractmethod
    def result(self, acc: Any) -> Any:
        """The SQL value of the aggregate."""


class SignedCount(Accumulator):
    """count(*) and count(x): the partial is the net number of (non-NULL) rows."""

    def initialize(self) -> int:
        return 0

    def add(self, acc: int, partial: int) -> int:
        return acc + partial

    def result(self, acc: int) -> int:
        return acc


class SignedSum(Accumulator):
    """Partial and accumulator: ``[signed sum, net non-NULL count]``; no values: NULL."""

    def initialize(self) -> list[Any]:
        return [0, 0]

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        count = acc[1] + partial[1]
        # Once every value is withdrawn the sum restarts at an exact 0 (no float residue).
        return [acc[0] + partial[0] if count else 0, count]

    def result(self, acc: list[Any]) -> Any:
        return acc[0] if acc[1] > 0 else None


class SignedAvg(SignedSum):
    def result(self, acc: list[Any]) -> float | None:
        return float(acc[0]) / acc[1] if acc[1] > 0 else None


class SignedMoments(Accumulator):
    """Variances: the partial is the moments of the rows added, then of those withdrawn
    (the accumulator, its width and arithmetic are :class:`Moments`')."""

    kind: type[Moments] = Moments

    def __init__(self, function: str) -> None:
        self.moments = self.kind(function)

    def initialize(self) -> list[Any]:
        return self.moments.initialize()

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        width = self.moments.width
        return self.moments.remove(self.moments.add(acc, partial[:width]), partial[width:])

    def result(self, acc: list[Any]) -> Any:
        return self.moments.result(acc)


class SignedComoments(SignedMoments):
    """corr, covar_*, regr_*: co-moments of the pairs added, then of those withdrawn."""

    kind = Comoments


class SignedBitXor(SignedSum):
    """bit_xor: ``[xor of every value added or withdrawn, net non-NULL count]``."""

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        count = acc[1] + partial[1]
        return [acc[0] ^ partial[0] if count else 0, count]


class SignedBits(Accumulator):
    """bit_and or bit_or: net per-bit counts (:func:`~.aggregates.bit_counts`)."""

    def __init__(self, function: str) -> None:
        self.function = function

    def initialize(self) -> list[Any]:
        return [0, [0] * INT_BITS]

    def add(self, acc: list[Any], partial: list[Any]) -> list[Any]:
        return add_bit_counts(acc, partial)

    def result(self, acc: list[Any]) -> int | None:
        return bits_result(self.function, acc)


class AppendExtreme(Accumulator):
    """min or max over append-only input: partial and accumulator are one value."""

    def __init__(self, is_max: bool) -> None:
        self.is_max = is_max

    def initialize(self) -> Any:
        return None

    def add(self, acc: Any, partial: Any) -> Any:
        if partial is None:
            return acc
        if acc is None:
            return partial
        return max(acc, partial) if self.is_max else min(acc, partial)

    def result(self, acc: Any) -> Any:
        return acc


class Multiset(Accumulator):
    """Values with their net counts: partial and accumulator are ``[[value, count], ...]``.

    The accumulator lists each value once, in first-seen order, with a positive
    count; a value whose count drops to 0 leaves it.
    """

    def initialize(self) -> list[list[Any]]:
        return []

    def add(self, acc: list[list[Any]], partial: list[list[Any]]) -> list[list[Any]]:
        counts = {_hashable(value): [value, count] for value, count in acc}
        for value, delta in partial:
            entry = counts.setdefault(_hashable(value), [value, 0])
            entry[1] += delta
        return [entry for entry in counts.values() if entry[1] > 0]

    def result(self, acc: list[list[Any]]) -> Any:
        raise NotImplementedError  # see the subclasses


class MultisetExtreme(Multiset):
    """min or max over updating input."""

    def __init__(self, is_max: bool) -> None:
        self.is_max = is_max

    def result(self, acc: list[list[Any]]) -> Any:
        if not acc:
            return None
        values = [value for value, _ in acc]
        return max(values) if self.is_max else min(values)


class MultisetDistinct(Multiset):
    """count(DISTINCT x): the number of values with a positive count."""

    def result(self, acc: list[list[Any]]) -> int:
        return len(acc)


class AppendByTime(AppendExtreme):
    """first_value or last_value over append-only input: one ``[event time, value]``."""

    def add(self, acc: Any, partial: Any) -> Any:
        if partial is None:
            return acc
        if acc is None:
            return partial
        new, old = time_key(partial), time_key(acc)
        return partial if (new > old if self.is_max else new < old) else acc

    def result(self, acc: Any) -> Any:
        return None if acc is None else acc[1]


class MultisetByTime(Multiset):
    """first_value or last_value over updating input: a multiset of pairs."""

    def __init__(self, is_max: bool) -> None:
        self.is_max = is_max

    def result(self, acc: list[list[Any]]) -> Any:
        if not acc:
            return None
        pairs = [pair for pair, _ in acc]
        return (max if self.is_max else min)(pairs, key=time_key)[1]


class MultisetValues(Multiset):
    """array_agg, median or percentile_cont over the values of a multiset."""

    def __init__(self, function: str, fraction: float | None) -> None:
        self.function = function
        self.fraction = fraction

    def result(self, acc: list[list[Any]]) -> Any:
        return bag_result(self.function, [v for v, count in acc for _ in range(count)],
                          self.fraction)


def _hashable(value: Any) -> Any:
    """A dict key for a value (arrays and structs come as lists and dicts)."""
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def make_accumulator(function: str, updating_input: bool,
                     fraction: float | None = None) -> Accumulator:
    """The accumulator for a planner function name (``AggregateCall.function``) and
    percentile fraction."""
    factories: dict[str, Callable[[], Accumulator]] = {
        "count_star": SignedCount, "count": SignedCount, "sum": SignedSum,
        "avg": SignedAvg, "count_distinct": MultisetDistinct,
        "min": lambda: (MultisetExtreme if updating_input else AppendExtreme)(is_max=False),
        "max": lambda: (MultisetExtreme if updating_input else AppendExtreme)(is_max=True),
        "bit_xor": SignedBitXor,
        "bit_and": lambda: SignedBits("bit_and"), "bit_or": lambda: SignedBits("bit_or"),
        **{name: partial(SignedMoments, name) for name in MOMENTS},
        **{name: partial(MultisetValues, name, fraction) for name in BAGS},
        **{name: partial(SignedComoments, name) for name in COMOMENTS},
        "first_value": lambda: (MultisetByTime if updating_input else AppendByTime)(False),
        "last_value": lambda: (MultisetByTime if updating_input else AppendByTime)(True),
    }
    return factories[function]()


@dataclass
class KeyState:
    """One key of an updating aggregate."""

    #: the key's group-by values
    key: list[Any]
    #: net rows of the key (it exists while positive)
    rows: int
    accumulators: list[Any]
    #: the latest event time (µs) of the key's rows, for updating_ttl (None: none had one)
    seen_us: int | None
    #: the aggregate values last emitted, None if nothing is out
    emitted: list[Any] | None = None

    @classmethod
    def new(cls, key: list[Any], accumulators: list[Accumulator]) -> KeyState:
        return cls(key, 0, [a.initialize() for a in accumulators], None)

    def to_stored(self) -> list[Any]:
        return [self.key, self.rows, self.accumulators, self.seen_us, self.emitted]

    @classmethod
    def from_stored(cls, stored: list[Any]) -> KeyState:
        key, rows, accumulators, seen_us, emitted = stored
        return cls(key, rows, accumulators, seen_us, emitted)


def merge(state: KeyState, partial: Partial, seen_us: int | None,
          accumulators: list[Accumulator]) -> None:
    """Fold one epoch's signed partial of the key into ``state``."""
    state.rows += partial[0]
    state.accumulators = [a.add(acc, p) for a, acc, p in
                          zip(accumulators, state.accumulators, partial[1:], strict=True)]
    if seen_us is not None:
        state.seen_us = seen_us if state.seen_us is None else max(state.seen_us, seen_us)


@dataclass(frozen=True)
class Change:
    """What one flush of one key emits (either side may be absent)."""

    retract: list[Any] | None
    insert: list[Any] | None


def flush(state: KeyState, accumulators: list[Accumulator]) -> tuple[Change, bool]:
    """The key's change since its last flush, and whether its state is still needed.

    A key with no rows left (or fewer than none: withdrawals of rows it never
    saw, e.g. after its state expired) has no output and is forgotten.
    """
    current = None
    if state.rows > 0:
        current = [a.result(acc) for a, acc in zip(accumulators, state.accumulators,
                                                    strict=True)]
    previous = state.emitted
    change = Change(None, None)
    if current != previous:
        change = Change(previous, current)
    state.emitted = current
    return change, current is not None


def expire(state: KeyState) -> Change:
    """The key's state outlived ``updating_ttl``: withdraw what it emitted."""
    return Change(state.emitted, None)


def flush_due(last_flush_ms: int | None, clock_ms: int | None, interval_ms: int) -> bool:
    """Whether a flush may happen at ``clock_ms`` after the last one at ``last_flush_ms``
    (None: there was none); without a clock yet, only a zero interval flushes."""
    if interval_ms <= 0:
        return True
    if clock_ms is None:
        return False
    return last_flush_ms is None or clock_ms - last_flush_ms >= interval_ms
