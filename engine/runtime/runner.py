"""Runs a :class:`PipelinePlan` as one Spark streaming query.

Every micro-batch is an epoch.  In ``foreachBatch`` the runner exposes the
batch's sources to the queries, runs each query (native Spark SQL; window
operators over statestore), writes every sink, and commits the epoch:
operator state, watermarks, sink markers, counters and the sources' end
offsets become visible together.  A batch whose epoch (its id plus a base kept
with the state, :mod:`spate.engine.runtime.offsets`) is already committed is a
replay and is skipped; sinks are reopened at the last committed marker, so
output is exactly-once.

Two ways to stop: :meth:`PipelineRunner.request_stop` lets the epoch in
progress commit first; :meth:`PipelineRunner.stop_now` abandons it (its Spark
jobs are cancelled and it never commits, so the next run replays it whole).

Each committed epoch is reported (:class:`EpochReport`) with figures counted
by the runner itself: rows per source, per query and per sink, and the bytes
of state the epoch's writers staged.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.streaming.query import StreamingQuery

from spate.engine.connectors import CONNECTORS, Sink
from spate.engine.connectors.base import BatchFacts, Connector, ConnectorError, TableConfig
from spate.engine.connectors.dead_letter import dead_letter_rows
from spate.engine.defaults import DEFAULT_FLUSH_INTERVAL_MS
from spate.engine.planner.plan import PipelinePlan, QueryPlan, UpdatingJoin, WindowAggregate
from spate.engine.runtime.errors import PipelineFailedError, is_transient_text
from spate.engine.runtime.failures import root_message
from spate.engine.runtime.offsets import BatchEpochs, CheckpointFolder, StoredPosition, resume
from spate.engine.runtime.pacing import EpochPacer, Pacing
from spate.engine.runtime.sinks import dead_letter_targets, open_sinks
from spate.engine.runtime.sources import (
    EpochSources,
    SourceColumns,
    expand_views,
    observed,
    source_stream,
)
from spate.engine.runtime.step_kinds import make_step
from spate.engine.runtime.steps import EpochContext, OperatorStep
from spate.engine.runtime.tasks import (
    RangeWork,
    TaskEpoch,
    TaskRouting,
    TaskStats,
    route,
    run_ranges,
)
from spate.engine.runtime.watermarks import END_OF_TIME, WatermarkTracker
from spate.engine.udf import register_udfs
from spate.statestore import DEFAULT_KEY_GROUPS, PipelineState, ship, split_key_groups

log = logging.getLogger(__name__)

#: Garbage-collect superseded state versions every this many epochs.
GC_EVERY_EPOCHS = 10
#: How often the state the pipeline holds is measured (the state store's own accounting,
#: a scan of the live values): reported in epoch events, metered as state GiB-hours.
STATE_SIZE_EVERY_S = 300.0


#: ``OperatorReport.kind`` values.
SOURCE_OPERATOR, NATIVE_OPERATOR, WINDOW_OPERATOR, STATEFUL_OPERATOR, SINK_OPERATOR = (
    "source", "native", "window", "stateful", "sink")


@dataclass(frozen=True)
class OperatorReport:
    """One operator's rows in one epoch.

    Sources report ``rows_out`` (data rows read), sinks ``rows_in`` (rows
    written).  A query reports both: a native query's ``rows_in`` are the
    rows of the sources it reads; a query with Spate operators (kind
    ``window`` when all are window aggregates, else ``stateful``) reports the
    rows that reached its operators (after the query's own filters).  Its
    ``rows_out`` are the rows it sent to its sink.
    """

    operator: str
    kind: str
    rows_in: int | None = None
    rows_out: int | None = None
    rows_late: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The figures that apply to this kind of operator."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


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
    #: ``time.monotonic()`` when the epoch started (spacing between epochs).
    started_s: float = 0.0
    #: Wall-clock time of the commit, as stored in the epoch's metadata.
    committed_at_ms: int = 0
    #: Bytes of state values the epoch's tasks staged (deletions count 0).
    state_bytes: int = 0
    #: The tasks' state reads: key groups served by their process caches, those
    #: read from the store, and the bytes those reads returned.
    cache_hits: int = 0
    cache_misses: int = 0
    remote_bytes: int = 0
    operators: list[OperatorReport] = field(default_factory=list)
    #: Bytes the sources read from their systems and the sinks wrote to theirs, where
    #: their connectors measure them (:meth:`Connector.batch_bytes`, ``Sink.epoch_bytes``).
    bytes_in: int = 0
    bytes_out: int = 0
    #: The live state the store holds for the pipeline after the epoch (measured every
    #: few minutes: :data:`STATE_SIZE_EVERY_S`).
    state_held_bytes: int = 0
    #: Of ``rows_dropped``, the undecodable records written to dead-letter tables.
    rows_dead_lettered: int = 0


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


@dataclass
class _Epoch:
    """Bookkeeping of the epoch in progress."""

    number: int
    sources: EpochSources
    watermark_before: int
    watermark_after: int | None = None
    rows_late: int = 0
    #: window query index -> (rows into its pre-aggregation, late rows)
    window_rows: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: what the epoch's state tasks did, summed
    tasks: list[TaskStats] = field(default_factory=list)
    #: DataFrames persisted for the epoch, released at its end
    persisted: list[DataFrame] = field(default_factory=list)


class PipelineRunner:
    """Owns the streaming query, the operators and the sinks of one pipeline."""

    def __init__(self, plan: PipelinePlan, spark: SparkSession, state: PipelineState,
                 options: RunOptions) -> None:
        self.plan = plan
        self.spark = spark
        self.state = state
        self.options = options
        self.ranges = split_key_groups(options.num_key_groups, options.parallelism)
        #: query index -> the steps running its operators, in order
        self.steps: dict[int, list[OperatorStep]] = {
            q.index: [make_step(o, state, options.num_key_groups) for o in q.operators]
            for q in plan.queries
        }
        self.stateful = any(step.uses_state for steps in self.steps.values() for step in steps)
        #: whether one pass reads each batch; otherwise the batch is kept in memory, as
        #: each further pass would read (regenerate, re-decode) the source again
        self._single_pass = _reads_batch_once(plan)
        #: names this run: the tasks' process caches are scoped to it
        self._run_id = secrets.token_hex(8)
        self._shipped_state = ship(state) if self.stateful else b""
        self._routing: TaskRouting | None = None
        self._source_columns = SourceColumns(plan.sources, options.parallelism,
                                                   watermarks=self.stateful)
        self._lock = threading.Lock()
        self._stop_requested = threading.Event()
        self._abandon = threading.Event()
        self._stopping = False
        self._query_names = _query_names(plan)
        self._last_committed = state.last_committed_epoch()
        #: The live state held after the last measured commit, and when it was measured.
        self._state_held: tuple[float, int] | None = None
        metadata = state.epoch_metadata() if self._last_committed is not None else {}
        self.finished = bool(metadata.get("finished"))
        self.watermarks = WatermarkTracker(
            {t.name: t.idle_micros for t in plan.sources}, metadata.get("watermarks"),
            options.parallelism)
        self.sinks: dict[str, Sink] = {}
        self._sink_markers: dict[str, Any] = dict(metadata.get("sinks", {}))
        self.counters: dict[str, int] = dict(metadata.get("counters", {}))
        self._stored_position = StoredPosition.from_metadata(metadata)
        #: batch ids -> epochs and each epoch's offsets (set by ``_check_checkpoint``)
        self._batches: BatchEpochs | None = None
        self._query: StreamingQuery | None = None
        #: ``time.monotonic()`` of the last epoch that read input (or of the start)
        self._input_seen_s = time.monotonic()
        #: whether the run stopped for want of input (scale to zero), and then: when
        #: input is due (None: not known) and whether a watcher must look for it
        self.idle = False
        self.wake_at_ms: int | None = None
        self.watch_sources = False
        self._pacer: EpochPacer | None = None

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
        if self.finished:
            log.info("pipeline already finished", extra={"epoch": self._last_committed})
            return True
        self._check_checkpoint()
        if self.plan.udfs is not None:
            register_udfs(self.spark, self.plan.udfs)
        owner = f"{self.state.tenant}/{self.state.pipeline}"
        self.sinks = open_sinks(self.plan, self._sink_markers, self.options.sink_overrides,
                                owner)
        self._dead_letter_targets = dead_letter_targets(self.plan)
        assert self._batches is not None
        stream = source_stream(self.spark, self.plan.sources, self.options.parallelism,
                               self._batches.start_offsets, owner)
        writer = stream.writeStream.foreachBatch(self._epoch).option(
            "checkpointLocation", self.options.checkpoint_dir)
        if self.options.trigger_interval:
            writer = writer.trigger(processingTime=self.options.trigger_interval)
        elif self.options.pacing is not None:
            self._pacer = _pacer(self.plan, self.options.pacing)
        query = writer.queryName(f"spate-{self.state.pipeline}-{self._run_id}").start()
        self._query = query
        try:
            if self.options.on_start is not None:
                self.options.on_start()
            self._wait(query)
        finally:
            if query.isActive:
                query.stop()
            for sink in self.sinks.values():
                sink.close()
        return self.finished

    def _wait(self, query: StreamingQuery) -> None:
        self._input_seen_s = time.monotonic()
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
        """Scale to zero: no input for ``idle_stop_s``, and every source either says when
        it has more (no sooner than another ``idle_stop_s`` from now) or can be watched
        for it without Spark: the run stops (its last epoch is committed) and says when
        to resume, or that a watcher must look (:mod:`spate.engine.job.watch`)."""
        idle_s = self.options.idle_stop_s
        if idle_s is None or time.monotonic() - self._input_seen_s < idle_s:
            return
        if not self._lock.acquire(blocking=False):
            return  # an epoch is in progress
        try:
            idle = self._idle_wake()
            wake = None if idle is None else idle[1]
            if idle is None or (wake is not None and wake < time.time() * 1000 + idle_s * 1000):
                # Cannot tell, or input is due within another idle period (a slow or
                # busy machine's trigger, not a quiet source): ask again after it.
                self._input_seen_s = time.monotonic()
                return
            self.idle, self.watch_sources, self.wake_at_ms = True, idle[0], wake
            log.info("no input for %.0f s: stopping until input is due", idle_s,
                     extra={"pipeline": self.state.pipeline, "wake_at_ms": wake,
                            "watch": self.watch_sources})
            self._stop_requested.set()
        finally:
            self._lock.release()

    def _idle_wake(self) -> tuple[bool, int | None] | None:
        """Whether the pipeline may stop for want of input, by the offsets of its last
        committed epoch.  None: it may not (nothing committed yet; a source cannot tell
        when it has more, or has more now).  Else whether some source must be watched,
        and when the earliest source with a schedule has input (None: none has one)."""
        if self._last_committed is None:
            return None
        offsets = StoredPosition.from_metadata(self.state.epoch_metadata()).offsets or {}
        due: list[int] = []
        watched = False
        for table in self.plan.sources:
            offset = offsets.get(table.name)
            if offset is None:
                return None
            connector = CONNECTORS[table.config.connector]
            when = connector.next_input_ms(table.config, self.options.parallelism, offset)
            if when is not None:
                due.append(when)
            elif _has_input(connector, table.config, self.options.parallelism,
                            offset) is False:
                watched = True
            else:
                return None
        if not due and not watched:
            return None
        return watched, min(due, default=None)

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

    def _check_checkpoint(self) -> None:
        """Where this run starts: the state store's offsets, or the checkpoint of its run.

        A missing or empty checkpoint resumes from the store; one of another
        run is refused (:func:`spate.engine.runtime.offsets.resume`).
        """
        self._batches = resume(
            CheckpointFolder(self.options.checkpoint_dir), [t.name for t in self.plan.sources],
            self._last_committed, self._stored_position, self.state.pipeline,
            self.state.store_url)

    # -- one epoch ----------------------------------------------------------------

    def _epoch(self, batch: DataFrame, batch_id: int) -> None:
        report = self._locked_epoch(batch, batch_id)
        if report is not None and self._pacer is not None:
            # Waiting here holds the next trigger back; outside the lock, so a stop
            # (which sets the event) ends the wait and finds no epoch in progress.
            self._stop_requested.wait(self._pacer.wait_after(
                report.rows_in, report.started_s, report.duration_s))

    def _locked_epoch(self, batch: DataFrame, batch_id: int) -> EpochReport | None:
        with self._lock:
            if self._stopping or self._abandon.is_set():
                # Raising (not returning) keeps Spark from marking the batch done,
                # so the next run replays it.
                raise _StopRequestedError("pipeline is stopping")
            assert self._batches is not None
            number = self._batches.epoch(batch_id)
            if self._last_committed is not None and number <= self._last_committed:
                log.info("skipping replayed epoch", extra={"epoch": number})
                return None
            started = time.monotonic()
            single_pass = self._single_pass
            if not single_pass:
                batch.persist()
            try:
                report = self._run_epoch(batch, number, single_pass, started)
            except Exception:
                if self._abandon.is_set():
                    log.info("epoch abandoned by an immediate stop; the next run replays it",
                             extra={"epoch": number})
                    # Its cancelled Spark jobs fail with whole JVM stack traces, which
                    # Spark would then parse at length; what happened fits in a line.
                    raise _StopRequestedError("epoch abandoned by an immediate stop") from None
                raise
            finally:
                if not single_pass:
                    batch.unpersist()
            if report.rows_in:
                self._input_seen_s = time.monotonic()
            # Reported before the lock is released, so a stopping run has reported
            # every epoch it committed by the time ``run`` returns.
            if self.options.on_epoch is not None:
                self.options.on_epoch(report)
            return report

    def _run_epoch(self, batch: DataFrame, number: int, single_pass: bool,
                   started: float) -> EpochReport:
        sources = EpochSources(self.plan.sources, batch, self._source_columns, number,
                               observe=single_pass, known=self._offset_facts(number))
        ranges = self.ranges if self.stateful else []
        self.state.begin_epoch(number, ranges)
        epoch = _Epoch(number, sources, self.watermarks.value)
        try:
            outputs: dict[str, list[tuple[int, DataFrame]]] = {}
            for query in self.plan.queries:
                self._check_abandoned()
                frame = self._run_query(query, epoch)
                if frame is not None:
                    outputs.setdefault(query.sink, []).append((query.index, frame))
            self._check_abandoned()
            rows_by_query, bytes_out = self._write_sinks(number, outputs)
            dead_lettered, dead_bytes = self._write_dead_letters(number, sources)
            bytes_out += dead_bytes
        finally:
            for frame in epoch.persisted:
                frame.unpersist()
        watermark = self._watermark_after(epoch)
        tasks = TaskStats.total(epoch.tasks)
        metrics = sources.metrics()
        rows_in = sum(m.rows for m in metrics.values())
        # Dead letters left the rows too: rows_dropped (the job's metrics) counts them.
        dropped = sum(m.dropped for m in metrics.values()) + dead_lettered
        rows_out = sum(rows_by_query.values())
        self._count(rows_in=rows_in, rows_out=rows_out, rows_late=epoch.rows_late,
                    rows_dropped=dropped, rows_dead_lettered=dead_lettered)
        self._check_abandoned()  # past this point the epoch commits whole
        committed_at_ms = self._commit(number)
        return EpochReport(
            number, rows_in, rows_out, epoch.rows_late, dropped, watermark,
            time.monotonic() - started, self.finished, started_s=started,
            committed_at_ms=committed_at_ms, state_bytes=tasks.state_bytes,
            cache_hits=tasks.cache_hits, cache_misses=tasks.cache_misses,
            remote_bytes=tasks.remote_bytes, state_held_bytes=self._held_state_bytes(),
            bytes_in=self._bytes_read(number),
            bytes_out=bytes_out,
            operators=self._operator_reports({n: m.rows for n, m in metrics.items()},
                                             epoch, rows_by_query),
            rows_dead_lettered=dead_lettered)

    def _offset_facts(self, number: int) -> dict[str, BatchFacts]:
        """The sources whose rows and end of input this epoch's offsets tell, so that
        nothing need count them row by row.  Not when stateful operators need the
        sources' watermarks, which only the rows give."""
        if self.stateful:
            return {}
        assert self._batches is not None
        offsets = self._batches.batch_offsets(number)
        known = {}
        for table in self.plan.sources:
            start, end = offsets.get(table.name, (None, None))
            if end is None:  # nothing read yet
                facts: BatchFacts | None = BatchFacts(rows=0, finished=False)
            else:
                facts = CONNECTORS[table.config.connector].batch_facts(
                    table.config, self.options.parallelism, start, end)
            if facts is not None:
                known[table.name] = facts
        return known

    def _check_abandoned(self) -> None:
        if self._abandon.is_set():
            raise _StopRequestedError("epoch abandoned by an immediate stop")

    def _operator_reports(self, source_rows: dict[str, int], epoch: _Epoch,
                          rows_by_query: dict[int, int]) -> list[OperatorReport]:
        """Per source, query and sink: the rows this epoch counted."""
        reports = [OperatorReport(f"source:{name}", SOURCE_OPERATOR, rows_out=rows)
                   for name, rows in source_rows.items()]
        sink_rows: dict[str, int] = {}
        for query in self.plan.queries:
            rows_out = rows_by_query.get(query.index, 0)
            sink_rows[query.sink] = sink_rows.get(query.sink, 0) + rows_out
            name = self._query_names[query.index]
            if not query.operators:
                rows_in = sum(source_rows.get(s, 0) for s in query.sources)
                reports.append(OperatorReport(name, NATIVE_OPERATOR, rows_in, rows_out))
            else:
                window_in, late = epoch.window_rows.get(query.index, (0, 0))
                kind = WINDOW_OPERATOR if all(isinstance(o, WindowAggregate)
                                              for o in query.operators) else STATEFUL_OPERATOR
                reports.append(OperatorReport(name, kind, window_in, rows_out, late))
        reports.extend(OperatorReport(f"sink:{name}", SINK_OPERATOR, rows_in=rows)
                       for name, rows in sink_rows.items())
        return reports

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
        context = EpochContext(
            spark, epoch.number, self._last_committed, epoch.watermark_before,
            lambda: self._watermark_after(epoch),
            lambda frame, work, schema, owns, clock_ms=None: self._run_ranges(
                epoch, frame, work, schema, owns, clock_ms),
            lambda frame: route(frame, self._task_routing(spark)),
            self.options.update_flush_interval_ms)
        produced = False
        rows_in = rows_late = 0
        for operator, step in zip(query.operators, self.steps[query.index], strict=True):
            self._check_abandoned()
            output = step.run(context)
            output.frame.createOrReplaceTempView(operator.output_view)
            produced = produced or output.rows != 0
            rows_in += output.rows_in
            rows_late += output.rows_late
        if query.operators:
            epoch.rows_late += rows_late
            epoch.window_rows[query.index] = (rows_in, rows_late)
            if not produced and not query.reads_sources:
                return None
        return spark.sql(query.output_sql)

    def _run_ranges(self, epoch: _Epoch, frame: DataFrame, work: RangeWork,
                    schema: T.StructType, owns: str | None,
                    clock_ms: int | None) -> tuple[DataFrame, TaskStats]:
        """Run a step's per-range ``work`` over ``frame`` in one Spark task per range.

        The epoch's first stateful step computes and keeps ``frame`` (its native
        pre-aggregation) first: that pass over the sources also yields their
        watermarks, which the tasks need to fire.  Later steps know the
        watermark already, and their input is computed by the tasks' own job.
        """
        prepared = frame
        if epoch.watermark_after is None:
            prepared = expand_views(frame).persist(StorageLevel.MEMORY_AND_DISK)
            epoch.persisted.append(prepared)
            prepared.count()
        task_epoch = TaskEpoch(
            self._shipped_state, self.state.tenant, self.state.pipeline, self._run_id,
            epoch.number, self._last_committed,
            tuple((r.start, r.stop) for r in self.ranges), epoch.watermark_before,
            self._watermark_after(epoch), clock_ms, self.options.update_flush_interval_ms)
        output, stats = run_ranges(prepared, work, task_epoch, schema,
                                   self._task_routing(epoch.sources.spark), owns)
        epoch.persisted.append(output)
        epoch.tasks.append(stats)
        return output, stats

    def _task_routing(self, spark: SparkSession) -> TaskRouting:
        if self._routing is None:
            self._routing = TaskRouting(spark, self.ranges)
        return self._routing

    def _write_sinks(self, epoch: int, outputs: dict[str, list[tuple[int, DataFrame]]]
                     ) -> tuple[dict[int, int], int]:
        """Write each sink's rows; return the rows each query sent (by query index) and
        the bytes the sinks wrote (those that measure them)."""
        rows_by_query: dict[int, int] = {}
        written = 0
        for sink_name, frames in outputs.items():
            # Counted per query while the sink's own write runs: no extra Spark job.
            counted: list[tuple[int, DataFrame, Observation]] = []
            for index, frame in frames:
                observation = Observation(f"spate_out_q{index}_{epoch}")
                counted.append((index, frame.observe(observation, F.count(F.lit(1)).alias("rows")),
                                observation))
            # An append-only query into a sink an updating one also writes lacks the
            # change columns: its rows get NULLs there, i.e. inserts without a key.
            union = reduce(lambda a, b: a.unionByName(b, allowMissingColumns=True),
                           [frame for _, frame, _ in counted])
            written += self._write_sink(epoch, sink_name, union)
            for index, frame, observation in counted:
                row = observed(observation)
                rows_by_query[index] = int(row["rows"]) if row is not None else frame.count()
        return rows_by_query, written

    def _write_sink(self, epoch: int, name: str, frame: DataFrame) -> int:
        """Write sink ``name`` this epoch's ``frame``, keep the marker it returns for the
        commit, and return the bytes it wrote (0 when it does not measure them)."""
        sink = self.sinks[name]
        sink.epoch_bytes = None
        self._sink_markers[name] = sink.write_epoch(epoch, frame)
        return sink.epoch_bytes or 0

    def _write_dead_letters(self, epoch: int, sources: EpochSources) -> tuple[int, int]:
        """Write each dead-letter table its sources' undecodable records of this epoch
        (with the epoch's other sink writes, under its commit); return how many, and the
        bytes written."""
        count = written = 0
        by_target: dict[str, list[DataFrame]] = {}
        for source, target in self._dead_letter_targets.items():
            by_target.setdefault(target, []).append(
                dead_letter_rows(sources.frame(source), source))
        for target, frames in by_target.items():
            letters = reduce(lambda a, b: a.unionByName(b), frames)
            observation = Observation(f"spate_dead_{target}_{epoch}")
            letters = letters.observe(observation, F.count(F.lit(1)).alias("rows"))
            written += self._write_sink(epoch, target, letters)
            row = observed(observation)
            count += int(row["rows"]) if row is not None else letters.count()
        return count, written

    def _bytes_read(self, number: int) -> int:
        """What this epoch's sources read from their systems, from their offsets (0
        without reading them when no source's connector measures its bytes)."""
        measured = [table for table in self.plan.sources
                    if type(CONNECTORS[table.config.connector]).batch_bytes
                    is not Connector.batch_bytes]
        if not measured:
            return 0
        assert self._batches is not None
        offsets = self._batches.batch_offsets(number)
        total = 0
        for table in measured:
            start, end = offsets.get(table.name, (None, None))
            if end is not None:
                total += CONNECTORS[table.config.connector].batch_bytes(
                    table.config, start, end) or 0
        return total

    def _commit(self, epoch: int) -> int:
        """Commit ``epoch`` with its metadata (sources' end offsets included, so the
        state alone can resume the pipeline); return its commit time (ms)."""
        finished = self.watermarks.all_done
        committed_at_ms = time.time_ns() // 10**6
        assert self._batches is not None
        self.state.commit_epoch(epoch, {
            "watermarks": self.watermarks.to_stored(), "sinks": self._sink_markers,
            "counters": self.counters, "finished": finished,
            "parallelism": self.options.parallelism, "committed_at_ms": committed_at_ms,
            **self._batches.metadata(epoch),
        })
        self._last_committed = epoch
        for sink in self.sinks.values():
            sink.committed(epoch)
        self.finished = finished
        if finished:
            self._stop_requested.set()
        if epoch % GC_EVERY_EPOCHS == 0:
            self.state.gc()
        return committed_at_ms

    def _held_state_bytes(self) -> int:
        """The live state values the store holds for the pipeline, measured on the first
        commit and then every :data:`STATE_SIZE_EVERY_S`."""
        if not self.stateful:
            return 0
        now = time.monotonic()
        if self._state_held is None or now - self._state_held[0] >= STATE_SIZE_EVERY_S:
            held = sum(operator.value_bytes for operator in self.state.describe().operators)
            self._state_held = (now, held)
        return self._state_held[1]

    def _count(self, **amounts: int) -> None:
        for name, amount in amounts.items():
            self.counters[name] = self.counters.get(name, 0) + amount


def _reads_batch_once(plan: PipelinePlan) -> bool:
    """One query whose sources one pass reads: no operator, or one that is not a join
    (an updating join reads its two sides, and the new keys of each, apart)."""
    if len(plan.queries) != 1:
        return False
    operators = plan.queries[0].operators
    return len(operators) == 0 or (len(operators) == 1
                                   and not isinstance(operators[0], UpdatingJoin))


def _pacer(plan: PipelinePlan, pacing: Pacing) -> EpochPacer | None:
    """Rate-adaptive epochs for ``plan``'s sources: none when one is bounded (its input
    is all there), and an epoch as big as a source's batch limit counts as full."""
    connectors = [(CONNECTORS[t.config.connector], t.config) for t in plan.sources]
    if any(connector.is_bounded(config) for connector, config in connectors):
        return None
    limits = [connector.batch_limit(config) for connector, config in connectors]
    full = min([pacing.min_rows, *(limit for limit in limits if limit is not None)])
    return EpochPacer(replace(pacing, min_rows=full), time.monotonic())


def _query_names(plan: PipelinePlan) -> dict[int, str]:
    """A query is named by its sink; several queries into one sink get ``#<index>``."""
    per_sink: dict[str, int] = {}
    for query in plan.queries:
        per_sink[query.sink] = per_sink.get(query.sink, 0) + 1
    return {q.index: q.sink if per_sink[q.sink] == 1 else f"{q.sink}#{q.index}"
            for q in plan.queries}


class _StopRequestedError(Exception):
    """Raised inside a batch that starts after a stop was requested."""


def _has_input(connector: Connector, table: TableConfig, parallelism: int,
               offset: Any) -> bool | None:
    """The source's answer to whether it has input past ``offset``; None when it cannot
    tell, or cannot be reached now (the run goes on; it asks again after another idle
    period)."""
    try:
        return connector.has_input_after(table, parallelism, offset)
    except ConnectorError as error:
        log.info("source %s cannot tell whether it has input: %s", table.name, error)
        return None
