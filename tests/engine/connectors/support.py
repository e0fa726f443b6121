"""Helpers of the connector tests: table configs and a streaming-query runner."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame

from spate.engine.connectors import HIDDEN_CONTROL, ColumnDef, TableConfig


def make_table(connector: str, role: str = "source", columns: tuple[ColumnDef, ...] = (),
               name: str = "t", **options: Any) -> TableConfig:
    """A TableConfig as the planner builds it (option values as strings).

    Double underscores in keywords spell dots: ``json__timestamp_format``.
    """
    values = {key.replace("__", "."): str(value).lower() if isinstance(value, bool)
              else str(value) for key, value in options.items()}
    return TableConfig(name=name, connector=connector, role=role, options=values,
                       columns=columns)


class CrashError(RuntimeError):
    """Raised inside foreachBatch to simulate a crash after the offsets were logged."""


@dataclass
class StreamRun:
    """Rows seen per micro-batch id (a replayed batch id overwrites the earlier one)."""

    batches: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    failure: BaseException | None = None

    def rows(self) -> list[dict[str, Any]]:
        return [row for batch_id in sorted(self.batches) for row in self.batches[batch_id]]

    def data_rows(self) -> list[dict[str, Any]]:
        return [row for row in self.rows() if row[HIDDEN_CONTROL] is None]

    def controls(self) -> list[tuple[int, str]]:
        return [(batch_id, row[HIDDEN_CONTROL]) for batch_id in sorted(self.batches)
                for row in self.batches[batch_id] if row[HIDDEN_CONTROL] is not None]


def run_stream(df: DataFrame, checkpoint: Path, *, available_now: bool = True,
               crash_at: int | None = None, timeout_s: float = 60.0) -> StreamRun:
    """Run ``df`` to its end (availableNow, or until an ``eof`` row) collecting rows.

    ``crash_at``: fail the query in that batch after collecting it, like a worker
    dying before the commit; rerunning on the same checkpoint replays the batch.
    """
    run = StreamRun()
    eof_seen = threading.Event()

    def collect(batch: DataFrame, batch_id: int) -> None:
        rows = [row.asDict(recursive=True) for row in batch.collect()]
        run.batches[batch_id] = rows
        if any(row[HIDDEN_CONTROL] == "eof" for row in rows):
            eof_seen.set()
        if crash_at is not None and batch_id == crash_at:
            raise CrashError(f"simulated crash in batch {batch_id}")

    writer = df.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint))
    writer = writer.trigger(availableNow=True) if available_now else \
        writer.trigger(processingTime="200 milliseconds")
    query = writer.start()
    deadline = time.monotonic() + timeout_s
    try:
        while query.isActive and time.monotonic() < deadline:
            if not available_now and eof_seen.is_set():
                break
            try:
                query.awaitTermination(0.1)
            except StreamingQueryException:
                break
        run.failure = query.exception()
        assert time.monotonic() < deadline, "streaming query did not finish in time"
    finally:
        if query.isActive:
            query.stop()
    return run
