"""Every aggregate function the operators run, by planner function name
(``AggregateCall.function``): the one place an aggregate is declared.

Adding an aggregate: a module (or an entry in a family's module) with its
:class:`~spate.engine.operators.aggregates.base.AggregateFunction`, one line
here, and its tests.
"""

from __future__ import annotations

from spate.engine.operators.aggregates.bags import BagFunction
from spate.engine.operators.aggregates.base import Accumulator, Aggregate, AggregateFunction
from spate.engine.operators.aggregates.bits import BitsFunction, BitXorFunction
from spate.engine.operators.aggregates.counts import CountDistinctFunction, CountFunction
from spate.engine.operators.aggregates.extremes import ExtremeFunction
from spate.engine.operators.aggregates.moments import ComomentsFunction, MomentsFunction
from spate.engine.operators.aggregates.rows import RowsFunction
from spate.engine.operators.aggregates.sums import SumFunction
from spate.engine.operators.aggregates.timed import TimedFunction

#: The variance family's names.
MOMENTS = ("var_samp", "var_pop", "stddev_samp", "stddev_pop")
#: ... and of (y, x) pairs.
COMOMENTS = ("corr", "covar_samp", "covar_pop", "regr_slope", "regr_intercept", "regr_count",
             "regr_r2", "regr_avgx", "regr_avgy", "regr_sxx", "regr_syy", "regr_sxy")
#: The names kept as bags of values.
BAGS = ("array_agg", "median", "percentile_cont", "percentile_cont_weighted")

AGGREGATES: dict[str, AggregateFunction] = {function.name: function for function in (
    CountFunction("count_star"), CountFunction("count"), CountDistinctFunction("count_distinct"),
    SumFunction("sum"), SumFunction("avg"),
    ExtremeFunction("min"), ExtremeFunction("max"),
    TimedFunction("first_value"), TimedFunction("last_value"),
    BitXorFunction("bit_xor"), BitsFunction("bit_and"), BitsFunction("bit_or"),
    *(MomentsFunction(name) for name in MOMENTS),
    *(ComomentsFunction(name) for name in COMOMENTS),
    *(BagFunction(name) for name in BAGS),
    RowsFunction("udaf_rows"),
)}


def make_aggregate(function: str, fraction: float | None = None) -> Aggregate:
    """The window :class:`Aggregate` for a planner function name (and percentile fraction)."""
    return AGGREGATES[function].window(fraction)


def make_accumulator(function: str, updating_input: bool,
                     fraction: float | None = None) -> Accumulator:
    """The updating :class:`Accumulator` for a planner function name (and fraction)."""
    return AGGREGATES[function].accumulator(updating_input, fraction)
