"""SQL text to a :class:`PipelinePlan`, or a located :class:`PlanningError`.

Planning never starts Spark: bad SQL is reported before any cluster work.

The planner itself (:mod:`.pipeline`, on sqlglot) loads on first use of these
names. Spark's Python workers unpickle plan objects (:mod:`.plan`), which
imports this package: had it loaded the planner too, every worker would parse
sqlglot and every connector's client library before its first row.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from spate.engine.planner.errors import PlanningError
    from spate.engine.planner.pipeline import PREVIEW_SINK, plan_pipeline
    from spate.engine.planner.plan import PipelinePlan

__all__ = ["PREVIEW_SINK", "PipelinePlan", "PlanningError", "plan_pipeline"]

_HOMES = {"PREVIEW_SINK": "pipeline", "plan_pipeline": "pipeline",
          "PipelinePlan": "plan", "PlanningError": "errors"}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
