"""Runs a :class:`PipelinePlan` as one Spark streaming query.

Every micro-batch is an epoch (:mod:`spate.engine.runtime.epoch`: the queries,
the sinks, the commit).  A batch whose epoch (its id plus a base kept with the
state, :mod:`spate.engine.runtime.offsets`) is already committed is a replay
and is skipped; sinks are reopened at the last committed marker, so output is
exactly-once.  This module owns the query's lifecycle: start, the epochs'
pacing, scale to zero (:mod:`spate.engine.runtime.idle`) and stop.

Two ways to stop: :meth:`PipelineRunner.request_stop` lets the epoch in
progress commit first; :meth:`PipelineRunner.stop_now` abandons it (its Spark
jobs are cancelled and it never commits, so the next run replays it whole).

Each committed epoch is reported (:class:`~spate.engine.runtime.reports.EpochReport`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from spate.engine.connectors import CONNECTORS, Sink
from spate.engine.defaults import DEFAULT_FLUSH_INTERVAL_MS
from spate.engine.planner.plan import PipelinePlan
from spate.engine.runtime.backlog import BacklogGauge
from spate.engine.runtime.epoch import EpochAbandonedError, EpochRunner, EpochSettings
from spate.engine.runtime.errors import PipelineFailedError, is_transient_text
from spate.engine.runtime.failures import root_message
from spate.engine.runtime.generators import Generators
from spate.engine.runtime.idle import IdleWatch
from spate.engine.runtime.offsets import CheckpointFolder, resume
from spate.engine.runtime.pacing import EpochPacer, Pacing
from spate.engine.runtime.reports import SOURCE_OPERATOR, EpochReport
from spate.engine.runtime.sinks import dead_letter_targets, open_sinks
from spate.engine.runtime.sources import SparkReads, source_stream
from spate.engine.udf import register_udfs
from spate.statestore import DEFAULT_KEY_GROUPS, PipelineState

log = logging.getLogger(__name__)


@dataclass
class RunOptions:
    parallelism: int = 1
    checkpoint_dir: str = ".spate/checkpoints/pipeline"
    num_key_groups: int = DEFAULT_KEY_GROUPS
    trigger_interval: str | None = None
    on_epoch: Callable[[EpochReport], None] | None = None
    #: Called once the streaming query has started.
    on_start: Callable[[], None] | None = None
    sink_overrides: dict[str, Sink] = field(default_factory=dict)
    #: pipeline.update-aggregate-flush-interval: how often updating aggregates emit (ms)
    update_flush_interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS
    #: Stop after a commit when no input came for this long and every source can say
    #: when input is due again (``PipelineRunner.wake_at_ms``); None: never
    idle_stop_s: float | None = None
    #: Rate-adaptive epochs (:mod:`spate.engine.runtime.pacing`) when no trigger
    #: interval is set and every source is unbounded; None: back to back
    pacing: Pacing | None = None


class PipelineRunner:
    """Owns the streaming query of one pipeline and decides when its epochs run."""

    def __init__(self, plan: PipelinePlan, spark: SparkSession, state: PipelineState,
                 options: RunOptions) -> None:
        self.plan = plan
        self.spark = spark
        self.state = state
        self.options = options
        self._lock = threading.Lock()
        self._stop_requested = threading.Event()
        self._abandon = threading.Event()
        self._stopping = False
        self.epochs = EpochRunner(plan, state, EpochSettings(
            options.parallelism, options.num_key_groups, options.update_flush_interval_ms),
            self._abandon)
        self._query: StreamingQuery | None = None
        self._idle_watch = IdleWatch(plan, options.parallelism, options.idle_stop_s)
        self._backlog = BacklogGauge(plan, options.parallelism)
        #: whether the run stopped for want of input (scale to zero), and then: when
        #: input is due (None: not known) and whether a watcher must look for it
        self.idle = False
        self.wake_at_ms: int | None = None
        self.watch_sources = False
        self._pacer: EpochPacer | None = None
        self._generators = Generators(plan.sources, options.parallelism)
        self._spark_reads = SparkReads(plan.sources, options.parallelism)

    @property
    def finished(self) -> bool:
        """Whether every source is exhausted and the last epoch committed."""
        return self.epochs.finished

    @property
    def counters(self) -> dict[str, int]:
        """The run's row counters, as committed with the state."""
        return self.epochs.counters

    # -- lifecycle --------------------------------------------------------------

    def request_stop(self) -> None:
        """Stop after the epoch in progress commits (safe from a signal handler)."""
        self._stop_requested.set()

    def stop_now(self) -> None:
        """Stop without waiting for the epoch in progress: it is abandoned, never committed.

        Its Spark jobs are cancelled and its remaining steps skipped; what it
        already staged stays invisible, and the next run replays it.  Callable
        from any thread (not from a signal handler: it calls into the JVM).
        """
        self._abandon.set()
        self._stopping = True
        self._stop_requested.set()
        # Spark runs a streaming query's jobs in a job group named by its run id: only
        # this pipeline's jobs are cancelled, whatever else the application hosts.
        query = self._query
        if query is not None:
            self.spark.sparkContext.cancelJobGroup(str(query.runId))

    def run(self) -> bool:
        """Run until bounded input is exhausted or a stop is requested; True if finished."""
        epochs = self.epochs
        if epochs.finished:
            log.info("pipeline already finished", extra={"epoch": epochs.last_committed})
            return True
        epochs.batches = resume(
            CheckpointFolder(self.options.checkpoint_dir), [t.name for t in self.plan.sources],
            epochs.last_committed, epochs.stored_position, self.state.pipeline,
            self.state.store_url, generators=tuple(self._generators.connectors))
        epochs.batches.computed = self._generators.advancers()
        if self.plan.udfs is not None:
            register_udfs(self.spark, self.plan.udfs)
        owner = f"{self.state.tenant}/{self.state.pipeline}"
        epochs.sinks = open_sinks(self.plan, epochs.sink_markers, self.options.sink_overrides,
                                  owner)
        epochs.dead_letter_targets = dead_letter_targets(self.plan)
        query = self._start(source_stream(self.spark, self.plan.sources,
                                          self.options.parallelism,
                                          epochs.batches.start_offsets, owner))
        try:
            if self.options.on_start is not None:
                self.options.on_start()
            self._wait(query)
        finally:
            self._backlog.stop()
            if query.isActive:
                query.stop()
            for sink in epochs.sinks.values():
                sink.close()
        return self.finished

    def _start(self, stream: DataFrame) -> StreamingQuery:
        """Start the streaming query: one ``foreachBatch`` call per epoch."""
        writer = stream.writeStream.foreachBatch(self._epoch).option(
            "checkpointLocation", self.options.checkpoint_dir)
        if self.options.trigger_interval:
            writer = writer.trigger(processingTime=self.options.trigger_interval)
        elif self.options.pacing is not None:
            self._pacer = _pacer(self.plan, self.options.pacing)
        name = f"spate-{self.state.pipeline}-{self.epochs.run_id}"
        self._query = writer.queryName(name).start()
        return self._query

    def _wait(self, query: StreamingQuery) -> None:
        self._idle_watch.input_seen()
        while query.isActive:  # False once the query failed: reported below
            # The last epoch sets the event too, so a finished run stops at once.
            if self._stop_requested.wait(0.25):
                self._stop_query(query)
                break
            self._stop_if_idle()
        error = query.exception()
        if error is not None and not self._stopping and not self._abandon.is_set():
            text = getattr(error, "desc", None) or str(error)
            raise PipelineFailedError(root_message(error),
                                      transient=is_transient_text(text)) from None

    def _stop_if_idle(self) -> None:
        """Scale to zero: when no input came for ``idle_stop_s`` and every source either
        says when it has more or can be watched for it without Spark, the run stops
        (its last epoch is committed) and says when to resume, or that a watcher must
        look (:mod:`spate.engine.job.watch`)."""
        if not self._idle_watch.due():
            return
        if not self._lock.acquire(blocking=False):
            return  # an epoch is in progress
        try:
            stop = self._idle_watch.decide(self.epochs.committed_offsets())
            if stop is None:
                return
            self.idle, self.watch_sources, self.wake_at_ms = (
                True, stop.watch_sources, stop.wake_at_ms)
            log.info("no input for %.0f s: stopping until input is due",
                     self.options.idle_stop_s,
                     extra={"pipeline": self.state.pipeline, "wake_at_ms": stop.wake_at_ms,
                            "watch": stop.watch_sources})
            self._stop_requested.set()
        finally:
            self._lock.release()

    def _stop_query(self, query: StreamingQuery) -> None:
        """Stop after the epoch in progress commits, or at once if it is abandoned."""
        committed = False
        while not self._abandon.is_set():
            if self._lock.acquire(timeout=0.05):  # no epoch in progress any more
                committed = True
                break
        self._stopping = True
        if committed:
            self._lock.release()
        query.stop()
        with self._lock:  # an abandoned epoch's callback may still be unwinding
            pass

    # -- epochs -------------------------------------------------------------------

    def _epoch(self, batch: DataFrame, batch_id: int) -> None:
        report = self._locked_epoch(batch, batch_id)
        if report is None:
            return
        wait_s = self._generators.wait_s(report.rows_in)
        if self._pacer is not None:
            wait_s = max(wait_s, self._pacer.wait_after(
                report.rows_in, report.started_s, report.duration_s))
        if wait_s > 0:
            # Waiting here holds the next trigger back; outside the lock, so a stop
            # (which sets the event) ends the wait and finds no epoch in progress.
            self._stop_requested.wait(wait_s)

    def _locked_epoch(self, batch: DataFrame, batch_id: int) -> EpochReport | None:
        with self._lock:
            if self._stopping or self._abandon.is_set():
                # Raising (not returning) keeps Spark from marking the batch done,
                # so the next run replays it.
                raise EpochAbandonedError("pipeline is stopping")
            epochs = self.epochs
            assert epochs.batches is not None
            number = epochs.batches.epoch(batch_id)
            if epochs.last_committed is not None and number <= epochs.last_committed:
                log.info("skipping replayed epoch", extra={"epoch": number})
                return None
            report = self._run_epoch(batch, number)
            if self._backlog.measures:  # the offsets are read from the checkpoint's files
                bounds = epochs.batches.batch_offsets(number)
                rows_read = {o.operator.removeprefix("source:"): o.rows_out or 0
                             for o in report.operators if o.kind == SOURCE_OPERATOR}
                self._backlog.read_up_to({table: end for table, (_, end) in bounds.items()},
                                         {table: (rows_read.get(table, 0), start)
                                          for table, (start, _) in bounds.items()})
                report.backlog = self._backlog.rows
            if report.rows_in:
                self._idle_watch.input_seen()
            if report.finished:
                self._stop_requested.set()
            # Reported before the lock is released, so a stopping run has reported
            # every epoch it committed by the time ``run`` returns.
            if self.options.on_epoch is not None:
                self.options.on_epoch(report)
            return report

    def _run_epoch(self, batch: DataFrame, number: int) -> EpochReport:
        started = time.monotonic()
        if self._generators.connectors or self._spark_reads.tables:
            assert self.epochs.batches is not None
            offsets = self.epochs.batches.batch_offsets(number)
            batch = self._spark_reads.batch(self._generators.batch(batch, offsets), offsets)
        single_pass = self.epochs.single_pass
        if not single_pass:
            batch.persist()
        try:
            return self.epochs.run(batch, number, started)
        except Exception:
            if self._abandon.is_set():
                log.info("epoch abandoned by an immediate stop; the next run replays it",
                         extra={"epoch": number})
                # Its cancelled Spark jobs fail with whole JVM stack traces, which
                # Spark would then parse at length; what happened fits in a line.
                raise EpochAbandonedError("epoch abandoned by an immediate stop") from None
            raise
        finally:
            if not single_pass:
                batch.unpersist()


def _pacer(plan: PipelinePlan, pacing: Pacing) -> EpochPacer | None:
    """Rate-adaptive epochs for ``plan``'s sources: none when one is bounded (its input
    is all there), and an epoch as big as a source's batch limit counts as full."""
    connectors = [(CONNECTORS[t.config.connector], t.config) for t in plan.sources]
    if any(connector.is_bounded(config) for connector, config in connectors):
        return None
    limits = [connector.batch_limit(config) for connector, config in connectors]
    full = min([pacing.min_rows, *(limit for limit in limits if limit is not None)])
    return EpochPacer(replace(pacing, min_rows=full), time.monotonic())
