"""Opens a pipeline's sinks at the markers of the last committed epoch."""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, Sink
from spate.engine.connectors.builtin.preview import PreviewSink
from spate.engine.connectors.core.dead_letter import DEAD_LETTER_SCHEMA, dead_letter_target
from spate.engine.planner.plan import PipelinePlan


def open_sinks(plan: PipelinePlan, markers: dict[str, Any], overrides: dict[str, Sink],
               preview_channel: str) -> dict[str, Sink]:
    """One open sink per sink name the plan writes, restored to ``markers``.

    Bare SELECTs write to the implicit preview sink: unless overridden (the CLI
    prints it), an in-process queue named ``preview_channel``.
    """
    sinks: dict[str, Sink] = {}
    for query in plan.queries:
        if query.sink in sinks:
            continue
        sink = overrides.get(query.sink)
        if sink is None and query.sink not in plan.tables:
            sink = PreviewSink(preview_channel)
        if sink is None:
            table = plan.tables[query.sink]
            schema = T.StructType([T.StructField(c, T.StringType()) for c in query.output_columns])
            sink = CONNECTORS[table.config.connector].create_sink(table.config, schema)
        sink.pipeline = preview_channel  # "<tenant>/<pipeline>"
        sink.open(markers.get(query.sink))
        sinks[query.sink] = sink
    for target in dead_letter_targets(plan).values():
        if target in sinks:
            continue
        table = plan.tables[target]
        sink = overrides.get(target) or CONNECTORS[table.config.connector].create_sink(
            table.config, DEAD_LETTER_SCHEMA)
        sink.pipeline = preview_channel
        sink.open(markers.get(target))
        sinks[target] = sink
    return sinks


def dead_letter_targets(plan: PipelinePlan) -> dict[str, str]:
    """Source name -> the dead-letter table its undecodable records go to."""
    targets: dict[str, str] = {}
    for table in plan.sources:
        target = dead_letter_target(table.config.options)
        if target is not None:
            targets[table.name] = next((n for n in plan.tables if n.lower() == target.lower()),
                                       target)
    return targets
