"""The runtime side of a query's Spate operators: one :class:`OperatorStep` per
operator of the plan, run in order each epoch.

A step reads native Spark SQL (over the epoch's source views and the output
views of the steps before it), does its stateful part against the statestore
through the epoch's writers, and returns its output rows as a DataFrame, which
the runner registers as the operator's ``output_view``.

This module is the steps' common ground and imports none of them;
:mod:`.step_kinds` says which step runs which kind of operator.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame, SparkSession

from spate.engine.defaults import DEFAULT_FLUSH_INTERVAL_MS

if TYPE_CHECKING:
    from spate.engine.runtime.tasks import RangeStats

#: ``run_ranges(frame, work, output schema, owns, clock_ms=None)``: see :class:`EpochContext`.
RunRanges = Callable[..., "tuple[DataFrame, RangeStats]"]


@dataclass
class EpochContext:
    """What a step sees of the epoch in progress."""

    spark: SparkSession
    number: int
    #: the last committed epoch: state is read as of it (None: a first run)
    previous_epoch: int | None
    #: the pipeline watermark (µs) at the end of the previous epoch
    watermark_before: int
    #: the watermark at the end of this epoch (computed once, on first call)
    watermark_after: Callable[[], int]
    #: runs a step's per-range work in Spark tasks (:func:`spate.engine.runtime.tasks.run_ranges`):
    #: ``run_ranges(frame with a __kg column, work, output schema, owns, clock_ms=None)``
    #: returns the output rows and a handle on the tasks' stats, known once a job has
    #: read the rows (``owns``: the operator id whose state the work writes, None if it
    #: only reads); the epoch's end releases what it persisted
    run_ranges: RunRanges
    #: ``route(frame with a __kg column)``: the frame placed by task (:func:`spate.engine.
    #: runtime.tasks.route`), for steps that aggregate before ``run_ranges`` with no
    #: second shuffle
    route: Callable[[DataFrame], DataFrame]
    #: pipeline.update-aggregate-flush-interval (``RunOptions``)
    update_flush_interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS


@dataclass
class StepOutput:
    """One step's result for one epoch."""

    frame: DataFrame
    #: the stats of the tasks that took in the step's input rows: how many reached the
    #: operator and how many it dropped as late (known once the epoch's sinks wrote)
    inputs: tuple[RangeStats, ...] = ()

    def counts(self) -> tuple[int, int]:
        """Rows that reached the operator, and those it dropped as late."""
        stats = [one.get() for one in self.inputs]
        return sum(s.rows_in for s in stats), sum(s.rows_late for s in stats)


class OperatorStep(ABC):
    """Runs one operator of a query, epoch after epoch."""

    #: whether the step keeps state in the store (its tasks then write every range)
    uses_state = True

    @abstractmethod
    def run(self, epoch: EpochContext) -> StepOutput:
        """This epoch's output rows (an empty frame, with the right schema, for none)."""
