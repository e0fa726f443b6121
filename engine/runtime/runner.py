"""Runs a :class:`PipelinePlan` as one Spark streaming query.

Every micro-batch is an epoch.  In ``foreachBatch`` the runner exposes the
batch's sources to the queries, runs each query (native Spark SQL; window
operators over statestore), writes every sink, and commits the epoch:
operator state, watermarks, sink markers and counters become visible together.
A batch whose id is already committed is a replay and is skipped; sinks are
reopened at the last committed marker, so output is exactly-once.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from engine.connectors import Sink
from engine.planner.plan import PipelinePlan, QueryPlan
from engine.runtime.errors import PipelineFailedError
from engine.runtime.operator import WindowOperatorRunner
from engine.runtime.output import fired_table, output_schema
from engine.runtime.sinks import open_sinks
from engine.runtime.sources import (
    EpochSources,
    SourceMetricColumns,
    expand_views,
    observed,
    source_stream,
)
from engine.runtime.watermarks import END_OF_TIME, WatermarkTracker
from statestore import DEFAULT_KEY_GROUPS, EpochWriter, PipelineState, split_key_groups

log = logging.getLogger(__name__)

#: Garbage-collect superseded state versions every this many epochs.
GC_EVERY_EPOCHS = 10


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


@dataclass
class _Epoch:
    """Bookkeeping of the epoch in progress."""

    number: int
    sources: EpochSources
    writers: list[EpochWriter]
    watermark_before: int
    watermark_after: int | None = None
    rows_late: int = 0


class PipelineRunner:
    """Owns the streaming query, the operators and the sinks of one pipeline."""

    def __init__(self, plan: PipelinePlan, spark: SparkSession, state: PipelineState,
                 options: RunOptions) -> None:
        self.plan = plan
        self.spark = spark
        self.state = state
        self.options = options
        self.ranges = split_key_groups(options.num_key_groups, options.parallelism)
        self.operators = {
            q.index: WindowOperatorRunner(q.aggregate, state, options.num_key_groups)
            for q in plan.queries if q.aggregate is not None
        }
        self._metric_columns = SourceMetricColumns(plan.sources, options.parallelism,
                                                   watermarks=bool(self.operators))
        self._lock = threading.Lock()
        self._stop_requested = threading.Event()
        self._stopping = False
        self._last_committed = state.last_committed_epoch()
        metadata = state.epoch_metadata() if self._last_committed is not None else {}
        self.finished = bool(metadata.get("finished"))
        self.watermarks = WatermarkTracker(
            {t.name: t.idle_micros for t in plan.sources}, metadata.get("watermarks"),
            options.parallelism)
        self.sinks: dict[str, Sink] = {}
        self._sink_markers: dict[str, Any] = dict(metadata.get("sinks", {}))
        self.counters: dict[str, int] = dict(metadata.get("counters", {}))

    # -- lifecycle --------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop after the epoch in progress commits (safe from a signal handler)."""
        self._stop_requested.set()

    def run(self) -> bool:
        """Run until bounded input is exhausted or a stop is requested; True if finished."""
        if self.finished:
            log.info("pipeline already finished", extra={"epoch": self._last_committed})
            return True
        self._check_checkpoint()
        self.sinks = open_sinks(self.plan, self._sink_markers, self.options.sink_overrides,
                                f"{self.state.tenant}/{self.state.pipeline}")
        stream = source_stream(self.spark, self.plan.sources, self.options.parallelism)
        writer = stream.writeStream.foreachBatch(self._epoch).option(
            "checkpointLocation", self.options.checkpoint_dir)
        if self.options.trigger_interval:
            writer = writer.trigger(processingTime=self.options.trigger_interval)
        query = writer.queryName(f"spate-{self.state.pipeline}").start()
        try:
            self._wait(query)
        finally:
            if query.isActive:
                query.stop()
            for sink in self.sinks.values():
                sink.close()
        return self.finished

    def _wait(self, query: StreamingQuery) -> None:
        while query.isActive:  # False once the query failed: reported below
            # The last epoch sets the event too, so a finished run stops at once.
            if self._stop_requested.wait(0.05):
                with self._lock:  # let the epoch in progress commit first
                    self._stopping = True
                query.stop()
                break
        error = query.exception()
        if error is not None and not self._stopping:
            raise PipelineFailedError(_root_message(error)) from None

    def _check_checkpoint(self) -> None:
        """The Spark checkpoint and the state store must describe the same run."""
        commits = os.path.join(self.options.checkpoint_dir, "commits")
        has_commits = os.path.isdir(commits) and bool(os.listdir(commits))
        has_offsets = os.path.isdir(os.path.join(self.options.checkpoint_dir, "offsets"))
        if self._last_committed is not None and not has_offsets:
            raise PipelineFailedError(
                f"the state store holds epoch {self._last_committed} of pipeline "
                f"'{self.state.pipeline}' but checkpoint {self.options.checkpoint_dir} is "
                "missing: resume with the same --checkpoint, or drop the pipeline's state "
                "to start afresh")
        if self._last_committed is None and has_commits:
            raise PipelineFailedError(
                f"checkpoint {self.options.checkpoint_dir} belongs to a run whose state is "
                f"not in the state store ({self.state.store_url}): resume with the same "
                "--state, or delete the checkpoint to start afresh")

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
            # One query reads the batch once; several would each re-read the source.
            single_pass = len(self.plan.queries) == 1
            if not single_pass:
                batch.persist()
            try:
                report = self._run_epoch(batch, batch_id, single_pass, started)
            finally:
                if not single_pass:
                    batch.unpersist()
        if self.options.on_epoch is not None:
            self.options.on_epoch(report)

    def _run_epoch(self, batch: DataFrame, number: int, single_pass: bool,
                   started: float) -> EpochReport:
        sources = EpochSources(self.plan.sources, batch, self._metric_columns, number,
                               observe=single_pass)
        ranges = self.ranges if self.operators else []
        self.state.begin_epoch(number, ranges)
        epoch = _Epoch(number, sources, [self.state.writer(number, r) for r in ranges],
                       self.watermarks.value)
        outputs: dict[str, list[DataFrame]] = {}
        for query in self.plan.queries:
            frame = self._run_query(query, epoch)
            if frame is not None:
                outputs.setdefault(query.sink, []).append(frame)
        rows_out = self._write_sinks(number, outputs)
        watermark = self._watermark_after(epoch)
        for writer in epoch.writers:
            writer.commit()
        metrics = sources.metrics().values()
        rows_in = sum(m.rows for m in metrics)
        dropped = sum(m.dropped for m in metrics)
        self._count(rows_in=rows_in, rows_out=rows_out, rows_late=epoch.rows_late,
                    rows_dropped=dropped)
        self._commit(number)
        return EpochReport(number, rows_in, rows_out, epoch.rows_late, dropped, watermark,
                           time.monotonic() - started, self.finished)

    def _watermark_after(self, epoch: _Epoch) -> int:
        """The watermark at the end of ``epoch`` (from its source metrics; computed once)."""
        if epoch.watermark_after is None:
            now_us = time.time_ns() // 1000
            for name, metrics in epoch.sources.metrics().items():
                for partition, watermark in metrics.watermarks.items():
                    self.watermarks.observe(name, partition, watermark, now_us)
                if metrics.finished:
                    self.watermarks.finish(name)
            epoch.watermark_after = self.watermarks.advance(now_us)
            if self.watermarks.all_done:
                epoch.watermark_after = END_OF_TIME
        return epoch.watermark_after

    def _run_query(self, query: QueryPlan, epoch: _Epoch) -> DataFrame | None:
        """The rows ``query`` sends to its sink this epoch (None: nothing)."""
        spark = epoch.sources.spark
        if query.aggregate is None:
            return spark.sql(query.output_sql)
        operator = self.operators[query.index]
        partials = expand_views(spark.sql(operator.partial_sql(query.aggregate.input_sql))
                                ).toArrow()
        watermark = self._watermark_after(epoch)
        fired, stats = operator.process(partials, epoch.writers, self._last_committed,
                                        epoch.watermark_before, watermark)
        epoch.rows_late += stats.rows_late
        if not fired:
            return None
        schema = output_schema(query.aggregate, partials.schema)
        table = fired_table(schema, len(query.aggregate.key_columns), fired)
        spark.createDataFrame(table).createOrReplaceTempView(query.aggregate.output_view)
        return spark.sql(query.output_sql)

    def _write_sinks(self, epoch: int, outputs: dict[str, list[DataFrame]]) -> int:
        rows_out = 0
        for sink_name, frames in outputs.items():
            frame = reduce(DataFrame.unionByName, frames)
            counted = Observation(f"spate_out_{sink_name}_{epoch}")
            frame = frame.observe(counted, F.count(F.lit(1)).alias("rows"))
            self._sink_markers[sink_name] = self.sinks[sink_name].write_epoch(epoch, frame)
            row = observed(counted)
            rows_out += int(row["rows"]) if row is not None else frame.count()
        return rows_out

    def _commit(self, epoch: int) -> None:
        finished = self.watermarks.all_done
        self.state.commit_epoch(epoch, {
            "watermarks": self.watermarks.to_stored(), "sinks": self._sink_markers,
            "counters": self.counters, "finished": finished,
            "parallelism": self.options.parallelism, "committed_at_ms": time.time_ns() // 10**6,
        })
        self._last_committed = epoch
        self.finished = finished
        if finished:
            self._stop_requested.set()
        if epoch % GC_EVERY_EPOCHS == 0:
            self.state.gc()

    def _count(self, **amounts: int) -> None:
        for name, amount in amounts.items():
            self.counters[name] = self.counters.get(name, 0) + amount


class _StopRequestedError(Exception):
    """Raised inside a batch that starts after a stop was requested."""


def _root_message(error: Exception) -> str:
    text = getattr(error, "desc", None) or str(error)
    for marker in ("ConnectorError: ", "PipelineFailedError: "):
        if marker in text:
            return text.split(marker, 1)[1].splitlines()[0]
    return text.splitlines()[0] if text else repr(error)
