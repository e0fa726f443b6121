"""Which :class:`~spate.engine.runtime.steps.OperatorStep` runs which kind of
operator of a plan: each kind has its own module."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from spate.engine.planner.plan import (
    LookupJoin,
    Operator,
    UpdatingAggregate,
    UpdatingJoin,
    WindowAggregate,
)
from spate.engine.runtime.join import UpdatingJoinStep
from spate.engine.runtime.lookup import LookupJoinStep
from spate.engine.runtime.steps import OperatorStep
from spate.engine.runtime.updating import UpdatingAggregateStep
from spate.engine.runtime.window import WindowStep
from spate.statestore import PipelineState

_STEPS: dict[type[Operator], Callable[[Any, PipelineState, int], OperatorStep]] = {
    WindowAggregate: WindowStep,
    UpdatingAggregate: UpdatingAggregateStep,
    UpdatingJoin: UpdatingJoinStep,
    LookupJoin: LookupJoinStep,
}


def make_step(spec: Operator, state: PipelineState, num_key_groups: int) -> OperatorStep:
    """The step running ``spec``."""
    for kind, factory in _STEPS.items():
        if isinstance(spec, kind):
            return factory(spec, state, num_key_groups)
    raise TypeError(f"no runtime step for operator {type(spec).__name__}")
