"""Runs a :class:`PipelinePlan` as one Spark streaming query.

Every micro-batch is an epoch.  In ``foreachBatch`` the runner reads the
batch's sources, advances the watermark, runs each query (native Spark SQL,
window operators over statestore), writes every sink, and commits the epoch:
operator state, watermarks, sink markers and counters become visible together.
A replayed batch (``batch_id`` already committed) is skipped, and sinks are
reopened at the last committed marker, so output is exactly-once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.utils import CapturedException

from engine.connectors import CONNECTORS, HIDDEN_COLUMNS, Sink
from engine.planner.catalog import Table
from engine.planner.plan import EVENT_TIME, WATERMARK, PipelinePlan, QueryPlan
from engine.runtime.errors import PipelineFailedError
from engine.runtime.operator import OperatorStats, WindowOperatorRunner
from engine.runtime.output import fired_table, output_schema
from engine.runtime.sinks import open_sinks
from engine.runtime.watermarks import END_OF_TIME, WatermarkTracker
from statestore import DEFAULT_KEY_GROUPS, PipelineState, StateCache, split_key_groups

log = logging.getLogger(__name__)


@dataclass
class EpochReport:
    """What one committed epoch did, for progress display and metrics."""

    epoch: int
    rows_in: int
    rows_out: int
    rows_late: int
    rows_dropped: int
    watermark_us: int
    duration_s: float
    finished: bool


@dataclass
class RunOptions:
    parallelism: int = 1
    checkpoint_dir: str = ".spate/checkpoints/pipeline"
    num_key_groups: int = DEFAULT_KEY_GROUPS
    trigger_interval: str | None = None
    on_epoch: Callable[[EpochReport], None] | None = None
    sink_overrides: dict[str, Sink] = field(default_factory=dict)


class PipelineRunner:
    """Owns the streaming query, the operators and the sinks of one pipeline."""

    def __init__(self, plan: PipelinePlan, spark: SparkSession, state: PipelineState,
                 cache: StateCache, options: RunOptions) -> None:
        self.plan = plan
        self.spark = spark
        self.state = state
        self.options = options
        self.ranges = split_key_groups(options.num_key_groups, options.parallelism)
        self.operators = {
            q.index: WindowOperatorRunner(q.aggregate, state, cache, options.num_key_groups)
            for q in plan.queries if q.aggregate is not None
        }
        self._lock = threading.Lock()
        self._stop_requested = threading.Event()
        self._stopping = False
        self._finished = False
        self._last_committed = state.last_committed_epoch()
        metadata = state.epoch_metadata() if self._last_committed is not None else {}
        self._finished = bool(metadata.get("finished"))
        self.watermarks = WatermarkTracker(
            {t.name: t.idle_micros for t in plan.sources}, metadata.get("watermarks"),
            options.parallelism)
        self.sinks: dict[str, Sink] = {}
        self._sink_markers: dict[str, Any] = dict(metadata.get("sinks", {}))
        self.counters: dict[str, int] = dict(metadata.get("counters", {}))

    # -- lifecycle --------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop after the epoch in progress commits (Ctrl-C, SIGTERM)."""
        self._stop_requested.set()

    def run(self) -> bool:
        """Run until bounded input is exhausted or a stop is requested; True if finished."""
        if self._finished:
            log.info("pipeline already finished", extra={"epoch": self._last_committed})
            return True
        self.sinks = open_sinks(self.plan, self.spark, self._sink_markers,
                                self.options.sink_overrides)
        stream = self._source_stream()
        writer = stream.writeStream.foreachBatch(self._epoch).option(
            "checkpointLocation", self.options.checkpoint_dir)
        if self.options.trigger_interval:
            writer = writer.trigger(processingTime=self.options.trigger_interval)
        query = writer.queryName(f"spate-{self.state.pipeline}").start()
        try:
            while query.isActive:
                if self._finished or self._stop_requested.is_set():
                    with self._lock:  # wait for the epoch in progress to commit
                        self._stopping = True
                    query.stop()
                    break
                query.awaitTermination(0.1)
            error = query.exception()
            if error is not None and not self._stopping:
                raise PipelineFailedError(_root_message(error)) from None
        finally:
            if query.isActive:
                query.stop()
            for sink in self.sinks.values():
                sink.close()
        return self._finished

    # -- sources ----------------------------------------------------------------

    def _source_stream(self) -> DataFrame:
        sources = self.plan.sources
        frames = [CONNECTORS[t.config.connector].read_stream(
            self.spark, t.config, self.options.parallelism) for t in sources]
        if len(frames) == 1:
            return frames[0]
        tagged = []
        for i, frame in enumerate(frames):
            columns = [F.lit(i).alias("__source")]
            for j, other in enumerate(frames):
                packed = F.struct(*other.columns)
                columns.append((F.struct(*frame.columns) if i == j
                                else F.lit(None).cast(packed_type(other))).alias(f"__s{j}"))
                del packed
            tagged.append(frame.select(*columns))
        union = tagged[0]
        for frame in tagged[1:]:
            union = union.unionByName(frame)
        return union

    def _register_sources(self, batch: DataFrame) -> None:
        sources = self.plan.sources
        for i, table in enumerate(sources):
            raw = batch if len(sources) == 1 else \
                batch.where(F.col("__source") == i).select(f"__s{i}.*")
            raw.createOrReplaceTempView(f"__raw_{table.name}")
            self.spark.sql(_source_view_sql(table)).createOrReplaceTempView(
                f"__all_{table.name}")
            self.spark.sql(
                f"SELECT * FROM `__all_{table.name}` WHERE `_spate_control` IS NULL"
            ).createOrReplaceTempView(table.name)

    # -- one epoch ----------------------------------------------------------------

    def _epoch(self, batch: DataFrame, batch_id: int) -> None:
        with self._lock:
            if self._stopping:
                # Raising (not returning) keeps Spark from marking the batch done,
                # so the next run replays it.
                raise _StopRequestedError("pipeline is stopping")
            if self._last_committed is not None and batch_id <= self._last_committed:
                log.info("skipping replayed epoch", extra={"epoch": batch_id})
                return
            started = time.monotonic()
            batch.persist()
            try:
                report = self._run_epoch(batch, batch_id, started)
            finally:
                batch.unpersist()
        if self.options.on_epoch is not None:
            self.options.on_epoch(report)

    def _run_epoch(self, batch: DataFrame, epoch: int, started: float) -> EpochReport:
        self._register_sources(batch)
        rows_in, dropped = self._observe_sources()
        watermark_before = self.watermarks.value
        watermark_after = self.watermarks.advance(int(time.time() * 1_000_000))
        if self.watermarks.all_done:
            watermark_after = END_OF_TIME
        ranges = self.ranges if self.operators else []
        self.state.begin_epoch(epoch, ranges)
        writers = [self.state.writer(epoch, r) for r in ranges]
        outputs: dict[str, list[DataFrame]] = {}
        stats = OperatorStats()
        for query in self.plan.queries:
            frame = self._run_query(query, writers, epoch, watermark_before,
                                    watermark_after, stats)
            outputs.setdefault(query.sink, []).append(frame)
        for writer in writers:
            writer.commit()
        rows_out = 0
        for sink_name, frames in outputs.items():
            frame = frames[0]
            for other in frames[1:]:
                frame = frame.unionByName(other)
            frame = frame.persist()
            rows_out += frame.count()
            self._sink_markers[sink_name] = self.sinks[sink_name].write_epoch(epoch, frame)
            frame.unpersist()
        self._count(rows_in=rows_in, rows_out=rows_out, rows_late=stats.rows_late,
                    rows_dropped=dropped)
        finished = self.watermarks.all_done
        self.state.commit_epoch(epoch, {
            "watermarks": self.watermarks.to_stored(), "sinks": self._sink_markers,
            "counters": self.counters, "finished": finished,
            "parallelism": self.options.parallelism, "committed_at_ms": int(time.time() * 1e3),
        })
        self._last_committed = epoch
        self._finished = finished
        if epoch % 10 == 0:
            self.state.gc()
        return EpochReport(epoch, rows_in, rows_out, stats.rows_late, dropped,
                           watermark_after, time.monotonic() - started, finished)

    def _observe_sources(self) -> tuple[int, int]:
        rows_in = dropped = 0
        now_us = int(time.time() * 1_000_000)
        for table in self.plan.sources:
            stats = self.spark.sql(
                f"SELECT `_spate_partition` AS p, `_spate_control` AS c, "
                f"unix_micros(max(`{WATERMARK}`)) AS wm, count(1) AS n "
                f"FROM `__all_{table.name}` GROUP BY 1, 2").collect()
            for row in stats:
                control = row["c"]
                if control is None:
                    rows_in += row["n"]
                    self.watermarks.observe(table.name, row["p"], row["wm"], now_us)
                elif control == "eof":
                    self.watermarks.finish(table.name)
                elif control.startswith("dropped:"):
                    dropped += int(control.split(":", 1)[1])
        return rows_in, dropped

    def _run_query(self, query: QueryPlan, writers: list[Any], epoch: int,
                   watermark_before: int, watermark_after: int,
                   stats: OperatorStats) -> DataFrame:
        if query.aggregate is None:
            return self.spark.sql(query.output_sql)
        operator = self.operators[query.index]
        partials_frame = self.spark.sql(operator.partial_sql(query.aggregate.input_sql))
        partials = partials_frame.toArrow()
        fired, op_stats = operator.process(partials, writers, self._last_committed, epoch,
                                           watermark_before, watermark_after)
        stats.rows_late += op_stats.rows_late
        schema = output_schema(query.aggregate, partials.schema)
        table = fired_table(schema, len(query.aggregate.key_columns), fired)
        self.spark.createDataFrame(table).createOrReplaceTempView(query.aggregate.output_view)
        return self.spark.sql(query.output_sql)

    def _count(self, **amounts: int) -> None:
        for name, amount in amounts.items():
            self.counters[name] = self.counters.get(name, 0) + amount


class _StopRequestedError(Exception):
    """Raised inside a batch that starts after a stop was requested."""


def packed_type(frame: DataFrame) -> str:
    """The DDL type of a frame's rows packed into one struct."""
    return frame.select(F.struct(*frame.columns).alias("s")).schema["s"].dataType.simpleString()


def _source_view_sql(table: Table) -> str:
    generated = "".join(f", {sql} AS `{name}`" for name, sql in table.generated.items())
    event_time = table.event_time_sql or "`_spate_timestamp`"
    watermark = table.watermark_sql or f"{event_time} - INTERVAL 1 SECOND"
    hidden = ", ".join(f"`{c}`" for c in HIDDEN_COLUMNS)
    del hidden
    return (f"SELECT *, CAST({event_time} AS TIMESTAMP) AS `{EVENT_TIME}`, "
            f"CAST({watermark} AS TIMESTAMP) AS `{WATERMARK}` "
            f"FROM (SELECT *{generated} FROM `__raw_{table.name}`)")


def _root_message(error: CapturedException | Exception) -> str:
    text = getattr(error, "desc", None) or str(error)
    for marker in ("ConnectorError: ", "PipelineFailedError: "):
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    return text.splitlines()[0] if text else repr(error)
