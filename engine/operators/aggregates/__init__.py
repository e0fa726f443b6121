"""Aggregate functions, one family per module, declared once in :mod:`.registry`:
what the window operator (``initialize / add / merge / remove / result`` over
pane partials) and the updating operator (signed partials) need of each."""

from spate.engine.operators.aggregates.base import (
    Accumulator,
    Aggregate,
    AggregateFunction,
    PartialColumns,
)
from spate.engine.operators.aggregates.registry import (
    AGGREGATES,
    make_accumulator,
    make_aggregate,
)

__all__ = ["AGGREGATES", "Accumulator", "Aggregate", "AggregateFunction", "PartialColumns",
           "make_accumulator", "make_aggregate"]
