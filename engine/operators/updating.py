"""The updating (non-windowed) aggregate for one key, as pure functions over plain values.

Rows reach the operator pre-aggregated by native Spark, per key and epoch,
into a *signed partial*: rows that add count +1, rows that withdraw
(``_spate_retract``) count -1.  Every aggregate is therefore retraction-aware:
its :class:`~spate.engine.operators.aggregates.Accumulator` (declared with the
rest of the aggregate in :mod:`spate.engine.operators.aggregates`) merges signed
partials into running totals, moments or bit counts where they invert, and into
a multiset of values where they do not.

A key's state (:class:`KeyState`) also holds the output it last emitted.  The
operator merges partials as they come and *flushes* a key at most once per
flush interval (:func:`flush_due`): the key's changes since its last flush
merge into one change (:func:`flush`) — retract the old output and insert the
new one, or only one side, or nothing at all when the output did not change or
the key was created and removed in between.  All values are msgpack-able, as
they are stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spate.engine.operators.aggregates import Accumulator
from spate.engine.operators.aggregates.multiset import hashable

#: A signed partial of one key and epoch: [net rows, partial of aggregate 0, ...]
Partial = list[Any]


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
    saw, e.g. after its state expired) has no output and is forgotten. Results compare
    as Spark compares values: a NaN that stayed NaN is no change.
    """
    current = None
    if state.rows > 0:
        current = [a.result(acc) for a, acc in zip(accumulators, state.accumulators,
                                                    strict=True)]
    previous = state.emitted
    change = Change(None, None)
    if hashable(current) != hashable(previous):
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
