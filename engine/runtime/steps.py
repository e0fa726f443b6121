"""The runtime side of a query's Spate operators: one :class:`OperatorStep` per
operator of the plan, run in order each epoch.

A step reads native Spark SQL (over the epoch's source views and the output
views of the steps before it), does its stateful part against the statestore
through the epoch's writers, and returns its output rows as a DataFrame, which
the runner registers as the operator's ``output_view``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from spate.engine.planner.plan import Operator, WindowAggregate
from spate.engine.planner.updating import DEFAULT_FLUSH_INTERVAL_MS, UpdatingAggregate
from spate.statestore import EpochWriter, PipelineState


@dataclass
class EpochContext:
    """What a step sees of the epoch in progress."""

    spark: SparkSession
    number: int
    writers: list[EpochWriter]
    #: the last committed epoch: state is read as of it (None: a first run)
    previous_epoch: int | None
    #: the pipeline watermark (µs) at the end of the previous epoch
    watermark_before: int
    #: the watermark at the end of this epoch (computed once, on first call)
    watermark_after: Callable[[], int]
    #: pipeline.update-aggregate-flush-interval (``RunOptions``)
    update_flush_interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS


@dataclass
class StepOutput:
    """One step's result for one epoch."""

    frame: DataFrame
    #: rows in ``frame`` when known without running it (None: unknown)
    rows: int | None
    #: rows that reached the operator, and those it dropped as late
    rows_in: int = 0
    rows_late: int = 0


class OperatorStep(ABC):
    """Runs one operator of a query, epoch after epoch."""

    @abstractmethod
    def run(self, epoch: EpochContext) -> StepOutput:
        """This epoch's output rows (an empty frame, with the right schema, for none)."""


def make_step(spec: Operator, state: PipelineState, num_key_groups: int) -> OperatorStep:
    """The step running ``spec`` (each kind of operator has its module; imported
    here, not at the top, because those modules build on this one)."""
    from spate.engine.planner.lookup import LookupJoin
    from spate.engine.planner.updating_join import UpdatingJoin
    from spate.engine.runtime.join import UpdatingJoinStep
    from spate.engine.runtime.lookup import LookupJoinStep
    from spate.engine.runtime.operator import WindowStep
    from spate.engine.runtime.updating import UpdatingAggregateStep

    factories: dict[type[Operator], Callable[[Any, PipelineState, int], OperatorStep]] = {
        WindowAggregate: WindowStep,
        UpdatingAggregate: UpdatingAggregateStep,
        UpdatingJoin: UpdatingJoinStep,
        LookupJoin: LookupJoinStep,
    }
    for kind, factory in factories.items():
        if isinstance(spec, kind):
            return factory(spec, state, num_key_groups)
    raise TypeError(f"no runtime step for operator {type(spec).__name__}")
