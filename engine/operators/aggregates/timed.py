"""first_value and last_value: the value of the earliest (latest) row by event time.

Partials and accumulators are ``[event time, value]`` pairs, ordered by time and
then (a tie) by value, NULLs first, as Spark orders the STRUCTs it
pre-aggregates them as.  In windows they work as min and max of pairs; over
updating input they keep a multiset of pairs.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from spate.engine.operators.aggregates.base import (
    Accumulator,
    Aggregate,
    AggregateFunction,
    PartialColumns,
    plain_type,
)
from spate.engine.operators.aggregates.extremes import AppendExtreme, Extreme
from spate.engine.operators.aggregates.multiset import Multiset, spark_order
from spate.engine.planner.plan import EVENT_TIME

#: A row's event time and value, ordered by time then value.
TIMED_SQL = f"named_struct('t', unix_micros(`{EVENT_TIME}`), 'v', {{a}})"


def time_key(pair: list[Any]) -> tuple[Any, ...]:
    """How ``[event time, value]`` pairs order: by time, then (a tie) by value,
    NULLs first — as Spark orders the STRUCTs it pre-aggregates them as (a float NaN
    after every number, -0.0 as 0.0)."""
    time, value = pair
    return (time is not None, time if time is not None else 0, value is not None,
            None if value is None else spark_order(value))


class ByTime(Extreme):
    """first_value or last_value: partial and accumulator are ``[event time, value]``
    of the earliest (latest) row; equal times: the smaller (larger) value."""

    def better(self, a: Any, b: Any) -> bool:
        return time_key(a) > time_key(b) if self.is_max else time_key(a) < time_key(b)

    def result(self, acc: Any) -> Any:
        return None if acc is None else acc[1]


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


def _pairs(structs: list[Any]) -> list[Any]:
    """``struct<t, v>`` values as ``[time, value]`` pairs (None stays None)."""
    return [None if pair is None else [pair["t"], pair["v"]] for pair in structs]


class TimedFunction(AggregateFunction):
    """first_value or last_value (by ``name``)."""

    columnar = "timed"  # windows (TUMBLE, HOP) only

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.is_max = name == "last_value"
        self.pick = "max" if self.is_max else "min"

    def pane_sql(self) -> list[str]:
        return [f"{self.pick}({TIMED_SQL})"]

    def pane_partials(self, columns: PartialColumns) -> list[Any]:
        return _pairs(columns.python(0))

    def window(self, fraction: float | None) -> Aggregate:
        return ByTime(self.is_max)

    def window_type(self, partial: pa.DataType) -> pa.DataType:  # from struct<t, v>
        return super().window_type(partial.field("v").type)

    def signed_sql(self, a: str, sign: str, updating_input: bool) -> list[str]:
        timed = TIMED_SQL.format(a=a)
        if updating_input:
            return [f"collect_list(named_struct('v', {timed}, 's', {sign}))"]
        return [f"{self.pick}({timed})"]

    def signed_partials(self, columns: PartialColumns, updating_input: bool) -> list[Any]:
        if updating_input:
            return [[[[p["t"], p["v"]], s] for p, s in row] for row in columns.signed(0)]
        return _pairs(columns.python(0))

    def accumulator(self, updating_input: bool, fraction: float | None) -> Accumulator:
        return (MultisetByTime if updating_input else AppendByTime)(self.is_max)

    def updating_type(self, partial: pa.DataType, updating_input: bool) -> pa.DataType:
        # struct<t, v>, or list<struct<v: struct<t, v>, s>>
        pair = partial.value_type.field("v").type if updating_input else partial
        return plain_type(pair.field("v").type)
