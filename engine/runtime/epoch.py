"""One epoch of a pipeline: its queries over the batch's sources, its sinks, its commit.

An epoch exposes the batch's sources to the queries, runs each query (native
Spark SQL; Spate's stateful operators over the state store, one Spark task
per key-group range), writes every sink, and commits: operator state,
watermarks, sink markers, counters and the sources' end offsets become visible
together.  :class:`EpochRunner` holds what lives from one epoch to the next
(the watermarks, the sinks' markers, the counters) and is driven by
:class:`~spate.engine.runtime.runner.PipelineRunner`, which owns the streaming
query and decides when epochs run.
"""

from __future__ import annotations

import secrets
import threading
import time
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, Sink
from spate.engine.connectors.core.base import BatchFacts, Connector
from spate.engine.connectors.core.dead_letter import dead_letter_rows
from spate.engine.planner.plan import PipelinePlan, QueryPlan, UpdatingJoin
from spate.engine.runtime.offsets import BatchEpochs, StoredPosition
from spate.engine.runtime.reports import EpochReport, OperatorNames
from spate.engine.runtime.sources import EpochSources, SourceColumns, expand_views, observed
from spate.engine.runtime.step_kinds import make_step
from spate.engine.runtime.steps import EpochContext, OperatorStep, StepOutput
from spate.engine.runtime.tasks import (
    RangeStats,
    RangeWork,
    TaskEpoch,
    TaskReports,
    TaskRouting,
    TaskStats,
    route,
    run_ranges,
)
from spate.engine.runtime.watermarks import END_OF_TIME, WatermarkTracker
from spate.engine.state_layout import LAYOUT_KEY, resumed_layout
from spate.statestore import PipelineState, ship, split_key_groups

#: Garbage-collect superseded state versions every this many epochs.
GC_EVERY_EPOCHS = 10
#: How often the state the pipeline holds is measured (the state store's own accounting,
#: a scan of the live values): reported in epoch events, metered as state GiB-hours.
STATE_SIZE_EVERY_S = 300.0


class EpochAbandonedError(Exception):
    """The batch is not run to its commit: an immediate stop abandoned it, or it started
    after a stop was requested.  Raised (not returned) inside ``foreachBatch``, so Spark
    does not mark the batch done and the next run replays it."""


@dataclass(frozen=True)
class EpochSettings:
    """The run options an epoch depends on."""

    parallelism: int
    num_key_groups: int
    update_flush_interval_ms: int


@dataclass
class _Epoch:
    """Bookkeeping of the epoch in progress."""

    number: int
    sources: EpochSources
    watermark_before: int
    watermark_after: int | None = None
    rows_late: int = 0
    #: query index -> (rows into its Spate operators, late rows)
    operator_rows: dict[int, tuple[int, int]] = field(default_factory=dict)
    #: query index -> seconds its Spate operators worked (their state tasks' mean)
    operator_busy_s: dict[int, float] = field(default_factory=dict)
    #: what the epoch's state tasks did, per run_ranges call (known once they ran)
    tasks: list[RangeStats] = field(default_factory=list)
    #: query index -> its steps' outputs, and its calls' slice of ``tasks``
    steps_run: dict[int, tuple[list[StepOutput], slice]] = field(default_factory=dict)
    #: DataFrames persisted for the epoch, released at its end
    persisted: list[DataFrame] = field(default_factory=list)


class EpochRunner:
    """Runs and commits a pipeline's epochs; keeps what one epoch hands the next."""

    def __init__(self, plan: PipelinePlan, state: PipelineState, settings: EpochSettings,
                 abandon: threading.Event) -> None:
        self.plan = plan
        self.state = state
        self.settings = settings
        self._abandon = abandon
        self.ranges = split_key_groups(settings.num_key_groups, settings.parallelism)
        #: query index -> the steps running its operators, in order
        self.steps: dict[int, list[OperatorStep]] = {
            q.index: [make_step(o, state, settings.num_key_groups) for o in q.operators]
            for q in plan.queries
        }
        self.stateful = any(step.uses_state for steps in self.steps.values() for step in steps)
        #: whether one pass reads each batch; otherwise the batch is kept in memory, as
        #: each further pass would read (regenerate, re-decode) the source again
        self.single_pass = _reads_batch_once(plan)
        #: names this run: the tasks' process caches are scoped to it
        self.run_id = secrets.token_hex(8)
        self._shipped_state = ship(state) if self.stateful else b""
        #: where the state tasks report their stats (made with the first of them)
        self._reports: TaskReports | None = None
        #: which shuffle partition carries each range's rows
        self.routing = TaskRouting(self.ranges)
        self.source_columns = SourceColumns(plan.sources, settings.parallelism,
                                            watermarks=self.stateful)
        self._names = OperatorNames(plan)
        self.last_committed = state.last_committed_epoch()
        #: The live state held after the last measured commit, and when it was measured.
        self._state_held: tuple[float, int] | None = None
        metadata = state.epoch_metadata() if self.last_committed is not None else {}
        #: stored with each epoch; checked first: this plan can read the state it resumes
        self.state_layout = resumed_layout(plan, metadata.get(LAYOUT_KEY))
        self.finished = bool(metadata.get("finished"))
        self.watermarks = WatermarkTracker(
            {t.name: t.idle_micros for t in plan.sources}, metadata.get("watermarks"),
            settings.parallelism)
        self.sinks: dict[str, Sink] = {}
        self.dead_letter_targets: dict[str, str] = {}
        self.sink_markers: dict[str, Any] = dict(metadata.get("sinks", {}))
        self.counters: dict[str, int] = dict(metadata.get("counters", {}))
        self.stored_position = StoredPosition.from_metadata(metadata)
        #: batch ids -> epochs and each epoch's offsets (set once the run resumes)
        self.batches: BatchEpochs | None = None

    def committed_offsets(self) -> dict[str, Any] | None:
        """The sources' end offsets of the last committed epoch (None: none yet)."""
        if self.last_committed is None:
            return None
        return StoredPosition.from_metadata(self.state.epoch_metadata()).offsets or {}

    def run(self, batch: DataFrame, number: int, started: float) -> EpochReport:
        """Run epoch ``number`` over ``batch`` and commit it."""
        sources = EpochSources(self.plan.sources, batch, self.source_columns, number,
                               observe=self.single_pass, known=self._offset_facts(number))
        self.state.begin_epoch(number, self.ranges if self.stateful else [])
        epoch = _Epoch(number, sources, self.watermarks.value)
        try:
            outputs: dict[str, list[tuple[int, DataFrame]]] = {}
            for query in self.plan.queries:
                self._check_abandoned()
                frame = self._run_query(query, epoch)
                outputs.setdefault(query.sink, []).append((query.index, frame))
            self._check_abandoned()
            # The sinks' jobs run the state tasks too: their stats are known after.
            rows_by_query, bytes_out, sink_busy_s = self._write_sinks(number, outputs)
            dead_lettered, dead_bytes = self._write_dead_letters(number, sources)
            tasks = self._count_operators(epoch)
        finally:
            for frame in epoch.persisted:
                frame.unpersist()
        watermark = self._watermark_after(epoch)
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
            bytes_in=self._bytes_read(number), bytes_out=bytes_out + dead_bytes,
            operators=self._names.reports({n: m.rows for n, m in metrics.items()},
                                          epoch.operator_rows, rows_by_query,
                                          epoch.operator_busy_s, sink_busy_s),
            rows_dead_lettered=dead_lettered)

    def _offset_facts(self, number: int) -> dict[str, BatchFacts]:
        """The sources whose rows and end of input this epoch's offsets tell, so that
        nothing need count them row by row.  Not when stateful operators need the
        sources' watermarks, which only the rows give."""
        if self.stateful:
            return {}
        assert self.batches is not None
        offsets = self.batches.batch_offsets(number)
        known = {}
        for table in self.plan.sources:
            start, end = offsets.get(table.name, (None, None))
            if end is None:  # nothing read yet
                facts: BatchFacts | None = BatchFacts(rows=0, finished=False)
            else:
                facts = CONNECTORS[table.config.connector].batch_facts(
                    table.config, self.settings.parallelism, start, end)
            if facts is not None:
                known[table.name] = facts
        return known

    def _check_abandoned(self) -> None:
        if self._abandon.is_set():
            raise EpochAbandonedError("epoch abandoned by an immediate stop")

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

    def _run_query(self, query: QueryPlan, epoch: _Epoch) -> DataFrame:
        """The rows ``query`` sends to its sink this epoch."""
        spark = epoch.sources.spark
        context = EpochContext(
            spark, epoch.number, self.last_committed, epoch.watermark_before,
            lambda: self._watermark_after(epoch),
            lambda frame, work, schema, owns, clock_ms=None: self._run_ranges(
                epoch, frame, work, schema, owns, clock_ms),
            lambda frame: route(frame, self.routing),
            self.settings.update_flush_interval_ms)
        first_task = len(epoch.tasks)
        outputs = []
        for operator, step in zip(query.operators, self.steps[query.index], strict=True):
            self._check_abandoned()
            output = step.run(context)
            output.frame.createOrReplaceTempView(operator.output_view)
            outputs.append(output)
        if query.operators:
            epoch.steps_run[query.index] = (outputs, slice(first_task, len(epoch.tasks)))
        return spark.sql(query.output_sql)

    def _count_operators(self, epoch: _Epoch) -> TaskStats:
        """Once the sinks have written (and so run the state tasks): each query's rows
        into its operators, late rows and busy time, and the epoch's tasks' stats summed."""
        for index, (outputs, calls) in epoch.steps_run.items():
            counts = [output.counts() for output in outputs]
            rows_late = sum(late for _, late in counts)
            epoch.rows_late += rows_late
            epoch.operator_rows[index] = (sum(rows for rows, _ in counts), rows_late)
            # Each call's stats sum its tasks' (one per range): their mean is how long
            # the operators kept a task busy.
            epoch.operator_busy_s[index] = sum(
                stats.get().seconds for stats in epoch.tasks[calls]) / len(self.ranges)
        return TaskStats.total([stats.get() for stats in epoch.tasks])

    def _run_ranges(self, epoch: _Epoch, frame: DataFrame, work: RangeWork,
                    schema: T.StructType, owns: str | None,
                    clock_ms: int | None) -> tuple[DataFrame, RangeStats]:
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
            self._shipped_state, self.state.tenant, self.state.pipeline, self.run_id,
            epoch.number, self.last_committed,
            tuple((r.start, r.stop) for r in self.ranges), epoch.watermark_before,
            self._watermark_after(epoch), clock_ms, self.settings.update_flush_interval_ms)
        if self._reports is None:
            self._reports = TaskReports(frame.sparkSession)
        output, stats = run_ranges(prepared, work, task_epoch, schema,
                                   self.routing, owns, self._reports)
        epoch.persisted.append(output)
        epoch.tasks.append(stats)
        return output, stats

    def _write_sinks(self, epoch: int, outputs: dict[str, list[tuple[int, DataFrame]]]
                     ) -> tuple[dict[int, int], int, dict[str, float]]:
        """Write each sink's rows; return the rows each query sent (by query index), the
        bytes the sinks wrote (those that measure them) and the seconds each write took.

        The sinks are written one after another: written side by side from threads,
        four sinks' epochs ran 1.09x faster, but a pipeline of many sinks on few cores
        ran slower (the crash tests' 13 sinks: 455 s one after another, 746 s side by
        side; see BENCHMARKS.md)."""
        rows_by_query: dict[int, int] = {}
        written = 0
        busy_s: dict[str, float] = {}
        for name, frames in outputs.items():
            rows, wrote, seconds = self._write_counted(epoch, name, frames)
            rows_by_query.update(rows)
            written += wrote
            busy_s[name] = seconds
        return rows_by_query, written, busy_s

    def _write_counted(self, epoch: int, sink_name: str, frames: list[tuple[int, DataFrame]]
                       ) -> tuple[dict[int, int], int, float]:
        """Write sink ``sink_name`` its queries' ``frames``; return the rows of each
        query, the bytes written and the seconds the write took."""
        started = time.monotonic()
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
        written = self._write_sink(epoch, sink_name, union)
        seconds = time.monotonic() - started
        rows: dict[int, int] = {}
        for index, frame, observation in counted:
            row = observed(observation)
            rows[index] = int(row["rows"]) if row is not None else frame.count()
        return rows, written, seconds

    def _write_sink(self, epoch: int, name: str, frame: DataFrame) -> int:
        """Write sink ``name`` this epoch's ``frame``, keep the marker it returns for the
        commit, and return the bytes it wrote (0 when it does not measure them)."""
        sink = self.sinks[name]
        sink.epoch_bytes = None
        self.sink_markers[name] = sink.write_epoch(epoch, frame)
        return sink.epoch_bytes or 0

    def _write_dead_letters(self, epoch: int, sources: EpochSources) -> tuple[int, int]:
        """Write each dead-letter table its sources' undecodable records of this epoch
        (with the epoch's other sink writes, under its commit); return how many, and the
        bytes written."""
        count = written = 0
        by_target: dict[str, list[DataFrame]] = {}
        for source, target in self.dead_letter_targets.items():
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
        assert self.batches is not None
        offsets = self.batches.batch_offsets(number)
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
        assert self.batches is not None
        self.state.commit_epoch(epoch, {
            "watermarks": self.watermarks.to_stored(), "sinks": self.sink_markers,
            "counters": self.counters, "finished": finished,
            "parallelism": self.settings.parallelism, "committed_at_ms": committed_at_ms,
            LAYOUT_KEY: self.state_layout, **self.batches.metadata(epoch),
        })
        self.last_committed = epoch
        for sink in self.sinks.values():
            sink.committed(epoch)
        self.finished = finished
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

