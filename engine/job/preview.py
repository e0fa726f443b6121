"""A preview job's sinks: rows go to the job's channel as ``rows`` events, never to a table.

Every sink of a previewed plan (declared sinks and the implicit one of a bare
SELECT) is replaced by a :class:`ChannelPreviewSink`.  They share one
:class:`PreviewRows` budget: once ``limit`` rows were published in total
(the last batch truncated to fit), it asks the job to stop.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame

from spate.engine.connectors import Sink
from spate.engine.connectors.formats.records import JSON, FormatSpec, encoded_lines
from spate.engine.job.channel import JobChannel
from spate.engine.job.events import rows_event
from spate.engine.planner import PipelinePlan

log = logging.getLogger(__name__)

#: Rows are encoded by Spark's own JSON writer (timestamps as ISO-8601 strings
#: in UTC, as the file sinks write them), then parsed into plain dicts.
_PREVIEW_FORMAT = FormatSpec(JSON)


class PreviewRows:
    """Publishes preview rows until ``limit`` rows were sent, then calls ``on_limit`` once."""

    def __init__(self, channel: JobChannel, limit: int, on_limit: Callable[[], None]) -> None:
        self.channel = channel
        self.limit = limit
        self.sent = 0
        self._on_limit = on_limit
        self._lock = threading.Lock()

    @property
    def reached(self) -> bool:
        return self.sent >= self.limit

    def publish(self, epoch: int, sink: str, frame: DataFrame) -> None:
        with self._lock:
            remaining = self.limit - self.sent
            if remaining <= 0:
                return
            lines = encoded_lines(frame.limit(remaining), _PREVIEW_FORMAT).decode("utf-8")
            rows: list[dict[str, Any]] = [json.loads(line) for line in lines.splitlines()]
            if rows:
                self.channel.publish(rows_event(epoch, sink, rows))
                self.sent += len(rows)
            if self.reached:
                log.info("preview row limit reached", extra={"rows": self.sent})
                self._on_limit()


class ChannelPreviewSink(Sink):
    """Stands in for one sink of a previewed pipeline."""

    def __init__(self, name: str, rows: PreviewRows) -> None:
        self.name = name
        self.rows = rows

    def open(self, marker: Any | None) -> None:
        del marker  # a preview has no output to restore

    def write_epoch(self, epoch: int, df: DataFrame) -> None:
        self.rows.publish(epoch, self.name, df)

    def close(self) -> None:
        """Nothing to release: the channel belongs to the job."""


def preview_sinks(plan: PipelinePlan, rows: PreviewRows) -> dict[str, Sink]:
    """A channel sink for every sink the plan writes (the runner's ``sink_overrides``)."""
    return {query.sink: ChannelPreviewSink(query.sink, rows) for query in plan.queries}
