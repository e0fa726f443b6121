"""The updating operator's multiset: values with their net counts, for the aggregates
that are not invertible over updating input (min, max, count(DISTINCT), the bags,
first_value and last_value), so that withdrawing the current answer finds the next."""

from __future__ import annotations

import math
from typing import Any

from spate.engine.operators.aggregates.base import Accumulator

#: The key of every NaN in a multiset (NaN equals nothing, itself included, in Python).
_NAN = ("NaN",)


def spark_order(value: Any) -> tuple[int, Any]:
    """A sort key ordering values as Spark orders them: a float NaN after every number."""
    if isinstance(value, float) and math.isnan(value):
        return (1, 0.0)
    return (0, value)


class Multiset(Accumulator):
    """Values with their net counts: partial and accumulator are ``[[value, count], ...]``.

    The accumulator lists each value once, in first-seen order, with a positive
    count; a value whose count drops to 0 leaves it.
    """

    def initialize(self) -> list[list[Any]]:
        return []

    def add(self, acc: list[list[Any]], partial: list[list[Any]]) -> list[list[Any]]:
        counts = {hashable(value): [value, count] for value, count in acc}
        for value, delta in partial:
            entry = counts.setdefault(hashable(value), [value, 0])
            entry[1] += delta
        return [entry for entry in counts.values() if entry[1] > 0]

    def result(self, acc: list[list[Any]]) -> Any:
        raise NotImplementedError  # see the subclasses


def hashable(value: Any) -> Any:
    """A dict key for a value (arrays and structs come as lists and dicts); floats as
    Spark compares them: -0.0 is 0.0, and every NaN is one value."""
    if isinstance(value, float):
        return _NAN if math.isnan(value) else value + 0.0  # -0.0 + 0.0 is 0.0
    if isinstance(value, list):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    return value
