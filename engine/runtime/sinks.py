"""Opens a pipeline's sinks at the markers of the last committed epoch."""

from __future__ import annotations

from typing import Any

from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, Sink
from spate.engine.connectors.preview import PreviewSink
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
    return sinks
