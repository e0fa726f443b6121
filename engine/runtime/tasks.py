"""Runs a stateful step's per-epoch work inside Spark tasks, one task per key-group range.

The driver never sees an operator's input or state.  Per epoch, a step hands
this module a DataFrame with a key-group column (``__kg``) and a function of
one range's rows (:data:`RangeWork`).  The rows are shuffled so that task
``i`` receives exactly the key groups of range ``i`` (``split_key_groups``),
plus one *tick* row, so that every range runs every epoch even with no input:
its timers may fire, and the state store's manifest wants every range's
writer committed.  Inside the task the function reads the range's state
through the process-local cache, stages its writes with the range's writer,
commits the writer, and returns its output rows as Arrow batches.

The output is persisted, so the stateful work runs once per epoch whatever
reads it (several queries, a sink, a preview's limit), and it stays a
distributed DataFrame for the next operator and the sinks.  No job of its own
runs it: the tasks run inside the first job that reads their rows (the next
step's, usually the sink's), and each task reports its :class:`TaskStats`
through a Spark accumulator (:class:`TaskReports`).  Once the epoch's sinks
have written, :meth:`RangeStats.get` has every task's report; where nothing
read every partition (a preview's limit), it runs the missing tasks then.

Retried and speculative attempts are harmless: a range's writes are a
function of the epoch's input and the state before it, a range's last
committed attempt wins in the store, and only the driver publishes the epoch.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import mmh3
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import StorageLevel
from pyspark.accumulators import Accumulator, AccumulatorParam
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

from spate.engine.python_workers import settle
from spate.statestore import CachedPipelineState, EpochWriter, UserKey, task_pipeline

#: The key-group column every step's input carries.
KEY_GROUP = "__kg"
_TASK = "__spate_task"
_ROUTE = "__spate_route"
#: The seed of Spark SQL's ``hash`` (its Murmur3 hash expression).
_HASH_SEED = 42


@dataclass(frozen=True)
class TaskEpoch:
    """What a task knows of the epoch in progress; shipped with its function."""

    #: the pipeline's store (:func:`spate.statestore.ship`; holds credentials)
    store: bytes = field(repr=False)
    tenant: str
    pipeline: str
    #: this run of the pipeline: tasks' caches are scoped to it
    run: str
    number: int
    #: the last committed epoch (None: a first run); state is read as of it
    previous_epoch: int | None
    #: ``(start, stop)`` of each task's key groups
    ranges: tuple[tuple[int, int], ...]
    watermark_before: int
    watermark_after: int
    #: updating aggregates: the previous epoch's commit time and the flush interval
    clock_ms: int | None = None
    flush_interval_ms: int = 0

    def state(self) -> CachedPipelineState:
        """The pipeline's state in this task's process (opened once per process)."""
        return task_pipeline(self.store, self.tenant, self.pipeline, self.run)


@dataclass
class TaskStats:
    """What one task did in one epoch (summed over tasks for the epoch's report)."""

    rows_in: int = 0
    rows_late: int = 0
    rows_out: int = 0
    #: bytes of state values staged (deletions count 0)
    state_bytes: int = 0
    cache_hits: int = 0
    cache_misses: int = 0
    #: bytes of state read from the store (cache misses)
    remote_bytes: int = 0
    #: wall time of the task's stateful work
    seconds: float = 0.0

    @classmethod
    def total(cls, stats: list[TaskStats]) -> TaskStats:
        summed = cls()
        for one in stats:
            for name, value in asdict(one).items():
                setattr(summed, name, getattr(summed, name) + value)
        return summed


#: One range's work: (its rows, its state, its writer, the epoch, its stats to fill)
#: -> its output rows.  Must be picklable (a module-level function or a dataclass).
RangeWork = Callable[[pa.Table, CachedPipelineState, EpochWriter, TaskEpoch, TaskStats], pa.Table]


class MeteredWriter(EpochWriter):
    """Forwards to the range's writer and counts the bytes of the values it stages."""

    def __init__(self, inner: EpochWriter, stats: TaskStats) -> None:
        self.inner = inner
        self.epoch = inner.epoch
        self.key_groups = inner.key_groups
        self.stats = stats

    def put(self, operator: str, key_group: int, user_key: UserKey, value: bytes) -> None:
        self.inner.put(operator, key_group, user_key, value)
        self.stats.state_bytes += len(value)

    def delete(self, operator: str, key_group: int, user_key: UserKey) -> None:
        self.inner.delete(operator, key_group, user_key)

    def commit(self) -> None:
        self.inner.commit()


def spark_int_hash(value: int) -> int:
    """Spark's ``hash`` of an INT value (``Murmur3_x86_32.hashInt`` with seed 42)."""
    return int(mmh3.hash(value.to_bytes(4, "little", signed=True), _HASH_SEED, signed=True))


class TaskRouting:
    """Places task ``i``'s rows in shuffle partition ``i``.

    Spark hash-partitions a shuffle by ``pmod(hash(column), partitions)``; the
    route of task ``i`` is the smallest integer that hashes to ``i``, found
    once per run with Spark's hash of an INT — Murmur3 x86 32-bit of its four
    little-endian bytes, seed 42 — computed by the ``mmh3`` library, so no Spark
    job runs for it (nor a call into the driver's JVM, whose classes a job hosted in
    a tenant's application cannot always resolve from its thread).
    """

    def __init__(self, ranges: list[range]) -> None:
        self.ranges = ranges
        tasks = len(ranges)
        routes: dict[int, int] = {}
        for value in range(64 * tasks + 64):
            routes.setdefault(spark_int_hash(value) % tasks, value)
            if len(routes) == tasks:
                break
        missing = [i for i in range(tasks) if i not in routes]
        if missing:
            raise RuntimeError(f"no shuffle route found for tasks {missing}")
        self.routes = [routes[i] for i in range(tasks)]
        #: (for a row, for a tick): the routing columns, built on first use, then
        #: reused every epoch of the run (each function of a column is a call into
        #: the driver's JVM)
        self._columns: tuple[list[Column], list[Column]] | None = None
        #: the tick rows, and the session (its JVM object's hash) they were made in
        self._ticks: tuple[int, DataFrame] | None = None

    def task_of(self, key_group: Column) -> Column:
        """The task whose range holds ``key_group``."""
        expression = F.lit(len(self.ranges) - 1)
        for task in range(len(self.ranges) - 2, -1, -1):
            expression = F.when(key_group < self.ranges[task].stop, F.lit(task)) \
                .otherwise(expression)
        return expression.cast("int")

    def route(self, task: Column) -> Column:
        return F.element_at(F.array(*(F.lit(r).cast("int") for r in self.routes)), task + 1)

    def columns(self) -> tuple[list[Column], list[Column]]:
        """:data:`ROUTING_COLUMNS` of a row (from its ``__kg``) and of a tick row (from
        its ``id``, the task's number)."""
        if self._columns is None:
            task = self.task_of(F.col(KEY_GROUP))
            tick = F.col("id").cast("int")
            self._columns = ([task.alias(_TASK), self.route(task).alias(_ROUTE)],
                             [tick.alias(_TASK), self.route(tick).alias(_ROUTE)])
        return self._columns

    def ticks(self, spark: SparkSession) -> DataFrame:
        """One tick row per task, with its :data:`ROUTING_COLUMNS`, made once per session."""
        session = spark._jsparkSession.hashCode()  # noqa: SLF001 - the session's identity
        if self._ticks is None or self._ticks[0] != session:
            ticks = spark.range(len(self.ranges)).select(*self.columns()[1])
            self._ticks = (session, ticks)
        return self._ticks[1]


#: The columns :func:`route` adds: the task of a row, and the value that places it.
ROUTING_COLUMNS = (_TASK, _ROUTE)


def route(frame: DataFrame, routing: TaskRouting) -> DataFrame:
    """``frame``'s rows (with a ``__kg`` column) and one tick row per task (``__kg``
    NULL, so that every task runs), shuffled so that partition ``i`` holds task
    ``i``'s rows.

    What keeps that partitioning keeps the placement: an aggregate that groups by
    :data:`ROUTING_COLUMNS` (among its keys) needs no shuffle of its own, and
    :func:`run_ranges` hands its output to the tasks as it is.
    """
    rows = frame.select("*", *routing.columns()[0])
    return rows.unionByName(routing.ticks(frame.sparkSession), allowMissingColumns=True) \
        .repartition(len(routing.ranges), _ROUTE)


def run_ranges(frame: DataFrame, work: RangeWork, epoch: TaskEpoch, output: T.StructType,
               routing: TaskRouting, owns: str | None,
               reports: TaskReports) -> tuple[DataFrame, RangeStats]:
    """Run ``work`` on each range's rows of ``frame`` in its own task.

    ``frame`` is routed here, unless it comes from :func:`route` already (it has
    :data:`ROUTING_COLUMNS`; whatever was computed on it since must have kept its
    partitioning).  ``owns``: the operator whose state only ``work`` writes this
    epoch (see ``CachedPipelineState.task_writer``); None for work that only reads.

    Returns the output rows (persisted: unpersist them once the epoch is written)
    and a handle on the tasks' summed stats.  Nothing runs yet: the first job that
    reads the rows runs the tasks.
    """
    routed = frame if _ROUTE in frame.columns else route(frame, routing)
    call = reports.call()
    ran = routed.mapInArrow(_RangeTask(work, epoch, owns, reports.accumulator, call),
                            output).persist(StorageLevel.MEMORY_AND_DISK)
    return ran, RangeStats(ran, reports, call, len(routing.ranges))


class _MergeReports(AccumulatorParam[dict[str, Any]]):
    """Task reports keyed by call and task: an attempt that runs again replaces its
    earlier report instead of adding to it."""

    def zero(self, value: dict[str, Any]) -> dict[str, Any]:
        return {}

    def addInPlace(self, value1: dict[str, Any], value2: dict[str, Any]) -> dict[str, Any]:
        value1.update(value2)
        return value1


class TaskReports:
    """Where a run's state tasks report their stats: one accumulator per run (the
    driver's Python process keeps every accumulator it made), emptied as the driver
    reads it."""

    def __init__(self, spark: SparkSession) -> None:
        self.accumulator: Accumulator[dict[str, Any]] = spark.sparkContext.accumulator(
            {}, _MergeReports())
        self._calls = 0

    def call(self) -> str:
        """A fresh name for one :func:`run_ranges` call's reports."""
        self._calls += 1
        return str(self._calls)

    def take(self, call: str, tasks: int) -> list[TaskStats] | None:
        """The reports of ``call``'s ``tasks`` tasks, removed; None if some are missing."""
        reports = self.accumulator.value
        keys = [f"{call}/{task}" for task in range(tasks)]
        if not all(key in reports for key in keys):
            return None
        return [TaskStats(**reports.pop(key)) for key in keys]


class RangeStats:
    """The summed stats of one :func:`run_ranges` call's tasks, once they have run."""

    def __init__(self, ran: DataFrame, reports: TaskReports, call: str, tasks: int) -> None:
        self._ran = ran
        self._reports = reports
        self._call = call
        self._tasks = tasks
        self._total: TaskStats | None = None

    def get(self) -> TaskStats:
        """The tasks' stats; runs whichever tasks no job has run yet (their rows persist)."""
        if self._total is None:
            stats = self._reports.take(self._call, self._tasks)
            if stats is None:
                self._ran.count()
                stats = self._reports.take(self._call, self._tasks)
            if stats is None:
                raise RuntimeError(f"not every one of {self._tasks} state tasks reported")
            self._total = TaskStats.total(stats)
        return self._total


def spark_schema_to_arrow(schema: T.StructType) -> pa.Schema:
    """The Arrow schema a task sees for Spark ``schema`` (timestamps in UTC)."""
    return to_arrow_schema(schema, timezone="UTC")


def arrow_schema_to_spark(schema: pa.Schema) -> T.StructType:
    """The Spark schema of Arrow ``schema``, every field nullable (a task's
    columns promise no more)."""
    converted = from_arrow_schema(schema)
    return T.StructType([T.StructField(f.name, f.dataType, True) for f in converted.fields])


@dataclass(frozen=True)
class _RangeTask:
    """The function ``mapInArrow`` runs in each task (picklable)."""

    work: RangeWork
    epoch: TaskEpoch
    owns: str | None
    #: where the task reports its stats (see :class:`TaskReports`), under ``call``
    reports: Accumulator[dict[str, Any]]
    call: str

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        settle()
        collected = list(batches)
        if not collected:
            return
        table = pa.Table.from_batches(collected)
        task = table.column(_TASK)[0].as_py()
        rows = table.filter(pc.is_valid(table.column(KEY_GROUP))).drop_columns([_TASK, _ROUTE])
        start, stop = self.epoch.ranges[task]
        state = self.epoch.state()
        before = state.cache.stats()
        started = time.monotonic()
        stats = TaskStats()
        writer = MeteredWriter(
            state.task_writer(self.epoch.number, range(start, stop), self.epoch.previous_epoch,
                              self.owns),
            stats)
        result = self.work(rows, state, writer, self.epoch, stats)
        writer.commit()
        after = state.cache.stats()
        stats.rows_out = result.num_rows
        stats.cache_hits = after.hits - before.hits
        stats.cache_misses = after.misses - before.misses
        stats.remote_bytes = after.remote_bytes - before.remote_bytes
        stats.seconds = time.monotonic() - started
        # Sent with the task's result: only a task that succeeds reports.
        self.reports.add({f"{self.call}/{task}": asdict(stats)})
        yield from result.to_batches()
