"""A pipeline's sources as one Spark stream, and what each epoch learns from them.

Every source table becomes a streaming DataFrame (its connector's); several
are unioned into one stream, each source's row packed into its own struct
column, because a pipeline is one streaming query.  Per epoch, each source is
exposed to the queries' SQL as a temporary view of its data rows, with the
row's event time and watermark computed natively.

What the runner needs from a batch (rows in, per-partition watermarks,
end-of-input and dropped-record control rows) comes from the source's offsets
where its connector can tell (:meth:`~spate.engine.connectors.core.base.Connector.
batch_facts`: generators count their rows by offset) and no watermark is
needed; otherwise it is computed by Spark aggregate expressions, either
observed during the epoch's single pass over the batch
(:class:`pyspark.sql.Observation`, no extra job, but evaluated row by row) or,
when several queries read the batch, by one aggregate job over the cached
batch for all the sources not counted otherwise.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from spate.engine.connectors import CONNECTORS, HIDDEN_CONTROL, HIDDEN_PARTITION, HIDDEN_TIMESTAMP
from spate.engine.connectors.core.base import CONTROL_DROPPED_PREFIX, CONTROL_EOF, BatchFacts
from spate.engine.connectors.core.streaming import starting_at
from spate.engine.planner.catalog import DEFAULT_WATERMARK_DELAY_SQL, Table, watermark_delay_us
from spate.engine.planner.plan import EVENT_TIME, WATERMARK

_SOURCE_TAG = "__source"


@dataclass
class SourceMetrics:
    """What one epoch's batch held for one source."""

    rows: int = 0
    #: partition -> largest per-row watermark (µs; None if the rows had none)
    watermarks: dict[int, int | None] = field(default_factory=dict)
    finished: bool = False
    dropped: int = 0


def source_stream(spark: SparkSession, sources: list[Table], parallelism: int,
                  start_offsets: Mapping[str, Any] | None = None,
                  owner: str | None = None) -> DataFrame:
    """One streaming DataFrame over every source of the pipeline.

    The sources are unioned in the order of ``sources``, which is the order
    Spark logs their offsets in (:mod:`spate.engine.runtime.offsets`).  A
    source named in ``start_offsets`` starts at that offset when Spark's
    checkpoint has none for it (a pipeline resuming from its state store).
    ``owner``: the ``<tenant>/<pipeline>`` reading them (``TableConfig.owner``).
    """
    starts = {t.config.name: start_offsets[t.name] for t in sources
              if start_offsets is not None and t.name in start_offsets}
    with starting_at(starts):
        frames = [CONNECTORS[t.config.connector].read_stream(
                      spark, replace(t.config, owner=owner), parallelism) for t in sources]
    return _tagged_union(frames)


def with_rows(batch: DataFrame, sources: list[Table], rows: Mapping[str, DataFrame]
              ) -> DataFrame:
    """``batch`` (of :func:`source_stream`) with the part of each source named in
    ``rows`` replaced by those rows: a generator streams ticks, its rows are computed
    per epoch (:mod:`spate.engine.connectors.generators.native`)."""
    if not rows:
        return batch
    if len(sources) == 1:
        return rows[sources[0].name]
    frames = [rows[t.name] if t.name in rows else
              batch.where(F.col(_SOURCE_TAG) == i).select(f"__s{i}.*")
              for i, t in enumerate(sources)]
    return _tagged_union(frames)


class SparkReads:
    """The sources some of whose rows Spark's own readers read, each epoch, next to the
    rows their streams carry (:meth:`~spate.engine.connectors.core.base.Connector.
    spark_rows`: a ``filesystem`` source's parquet files)."""

    def __init__(self, sources: list[Table], parallelism: int) -> None:
        self.sources = sources
        self.parallelism = parallelism
        self.tables = [t for t in sources
                       if CONNECTORS[t.config.connector].reads_with_spark(t.config)]

    def batch(self, batch: DataFrame, offsets: Mapping[str, tuple[Any | None, Any]]
              ) -> DataFrame:
        """``batch`` with each such source's rows read by Spark between ``offsets`` (the
        epoch's ``(start, end)`` per source) added to its own."""
        rows = {}
        for table in self.tables:
            start, end = offsets[table.name]
            read = CONNECTORS[table.config.connector].spark_rows(
                batch.sparkSession, table.config, self.parallelism, start, end)
            if read is not None:
                rows[table.name] = read
        if not rows:
            return batch
        if len(self.sources) == 1:
            return batch.unionByName(rows[self.sources[0].name])
        frames = [batch.where(F.col(_SOURCE_TAG) == i).select(f"__s{i}.*")
                  for i in range(len(self.sources))]
        return _tagged_union([frame.unionByName(rows[t.name]) if t.name in rows else frame
                              for frame, t in zip(frames, self.sources, strict=True)])


def _tagged_union(frames: list[DataFrame]) -> DataFrame:
    """One frame of several sources' rows: source ``i``'s row packed in column
    ``__s<i>`` (NULL in the others), tagged ``i``; a single source's as it is."""
    if len(frames) == 1:
        return frames[0]
    packed = [F.struct(*(F.col(f"`{c}`") for c in frame.columns)) for frame in frames]
    types = [frame.select(p.alias("s")).schema["s"].dataType
             for frame, p in zip(frames, packed, strict=True)]
    tagged = []
    for i, frame in enumerate(frames):
        columns = [F.lit(i).alias(_SOURCE_TAG)]
        for j, kind in enumerate(types):
            value = packed[i] if i == j else F.lit(None).cast(kind)
            columns.append(value.alias(f"__s{j}"))
        tagged.append(frame.select(*columns))
    union = tagged[0]
    for frame in tagged[1:]:
        union = union.unionByName(frame)
    return union


class EpochSources:
    """The sources of one epoch's batch: views for the queries, and their metrics."""

    def __init__(self, sources: list[Table], batch: DataFrame, columns: SourceColumns,
                 epoch: int, observe: bool, known: Mapping[str, BatchFacts] | None = None
                 ) -> None:
        """``known``: sources whose metrics their offsets gave (nothing is counted)."""
        # The batch lives in the streaming query's own session: views go there.
        self.spark = batch.sparkSession
        self.sources = sources
        self._columns = columns
        self._known = dict(known or {})
        self._observations: dict[str, Observation] = {}
        self._metrics: dict[str, SourceMetrics] | None = None
        self._frames: dict[str, DataFrame] = {}
        for i, table in enumerate(sources):
            raw = batch if len(sources) == 1 else \
                batch.where(F.col(_SOURCE_TAG) == i).select(f"__s{i}.*")
            frame = columns.with_event_time(raw, table.name)
            if observe and table.name not in self._known:
                observation = Observation(f"spate_in_{table.name}_{epoch}")
                frame = frame.observe(observation, *columns.metrics[table.name])
                self._observations[table.name] = observation
            self._frames[table.name] = frame
            frame.where(columns.data_row).createOrReplaceTempView(table.name)

    def frame(self, name: str) -> DataFrame:
        """Source ``name``'s rows of this epoch, control rows included."""
        return self._frames[name]

    def metrics(self) -> dict[str, SourceMetrics]:
        """Per source: rows, watermarks, end of input, dropped records.

        Observed metrics are used when an action of this epoch read the sources
        (through :func:`expand_views`); otherwise one aggregate job computes them.
        """
        if self._metrics is None:
            self._metrics = {}
            uncounted = []
            for table in self.sources:
                facts = self._known.get(table.name)
                if facts is not None:
                    self._metrics[table.name] = SourceMetrics(rows=facts.rows,
                                                              finished=facts.finished)
                    continue
                observation = self._observations.get(table.name)
                row = observed(observation) if observation is not None else None
                if row is None:
                    uncounted.append(table.name)
                else:
                    self._metrics[table.name] = _parse(row)
            for name, row in self._aggregate(uncounted).items():
                self._metrics[name] = _parse(row)
        return {t.name: self._metrics[t.name] for t in self.sources}

    def _aggregate(self, names: list[str]) -> dict[str, dict[str, Any]]:
        """The metrics of sources ``names``, computed by one job: each source's
        aggregate is one row, and the rows of several are a union, each as JSON
        (their columns differ); a job per source would cost a job's fixed overhead
        for each."""
        if len(names) <= 1:
            return {name: self._frames[name].agg(*self._columns.metrics[name])
                    .collect()[0].asDict() for name in names}
        parts = [self._frames[name].agg(*self._columns.metrics[name])
                 .select(F.lit(i).alias("i"), F.to_json(F.struct("*")).alias("m"))
                 for i, name in enumerate(names)]
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part)
        return {names[row["i"]]: json.loads(row["m"]) for row in union.collect()}


class SourceColumns:
    """The Spark columns each epoch computes from each source, built once per run.

    Built once because building them costs JVM round trips, and a DataFrame
    given expressions as strings parses them again every epoch (a few
    milliseconds a source and epoch).  The metrics' aggregate expressions
    give :class:`SourceMetrics`: per partition only the largest watermark is
    aggregated (a partition shows up when it had a row with a watermark), and a
    pipeline without window operators needs no watermark, and skips that
    per-row work.
    """

    def __init__(self, sources: list[Table], parallelism: int, watermarks: bool) -> None:
        #: source -> the aggregate expressions of its :class:`SourceMetrics`
        self.metrics: dict[str, list[Column]] = {}
        #: source -> its generated columns (a first projection: the event time may use them)
        self._generated: dict[str, list[Column]] = {}
        #: source -> its rows with their event time and watermark
        self._times: dict[str, list[Column]] = {}
        #: a source's data rows (not its control rows): what its view shows
        self.data_row = F.col(HIDDEN_CONTROL).isNull()
        for table in sources:
            connector = CONNECTORS[table.config.connector]
            partitions = connector.partition_count(table.config, parallelism)
            columns = [F.count(F.lit(1)).alias("all"),
                       F.collect_list(HIDDEN_CONTROL).alias("controls")]
            watermark = F.unix_micros(F.col(WATERMARK))
            partition = F.col(HIDDEN_PARTITION)
            for p in range(partitions if watermarks else 0):
                columns.append(F.max(F.when(partition == p, watermark)).alias(f"w{p}"))
            self.metrics[table.name] = columns
            if table.generated:
                self._generated[table.name] = [
                    F.col("*"), *(F.expr(sql).alias(name) for name, sql in table.generated.items())]
            event_time = table.event_time_sql or f"`{HIDDEN_TIMESTAMP}`"
            watermark_sql = table.watermark_sql or f"{event_time} - {DEFAULT_WATERMARK_DELAY_SQL}"
            time_column = F.expr(f"CAST({event_time} AS TIMESTAMP)")
            delay = watermark_delay_us(event_time, watermark_sql)
            # A fixed delay is subtracted in microseconds: Spark's timestamp - interval
            # goes through java.time for every row (a tenth of the tasks' time of a
            # window query over a JSON file, in a JVM profile).
            watermark = (F.timestamp_micros(F.unix_micros(time_column) - F.lit(delay))
                         if delay is not None
                         else F.expr(f"CAST({watermark_sql} AS TIMESTAMP)"))
            self._times[table.name] = [F.col("*"), time_column.alias(EVENT_TIME),
                                       watermark.alias(WATERMARK)]

    def with_event_time(self, raw: DataFrame, name: str) -> DataFrame:
        """Source ``name``'s rows as queries see them: generated columns, event time,
        watermark."""
        generated = self._generated.get(name)
        frame = raw.select(*generated) if generated else raw
        return frame.select(*self._times[name])


def _parse(row: dict[str, Any]) -> SourceMetrics:
    controls: list[str] = row["controls"] or []
    metrics = SourceMetrics(rows=int(row["all"]) - len(controls),
                            finished=CONTROL_EOF in controls)
    for control in controls:
        if control.startswith(CONTROL_DROPPED_PREFIX):
            metrics.dropped += int(control.removeprefix(CONTROL_DROPPED_PREFIX))
    for key, value in row.items():
        if key.startswith("w") and value is not None:
            metrics.watermarks[int(key[1:])] = value
    return metrics


def expand_views(frame: DataFrame) -> DataFrame:
    """``frame`` with its temporary views expanded, so observations inside them report.

    Spark delivers an observation's metrics only when the action's own plan
    holds the observing node; a view from ``spark.sql`` hides it until
    analysis.  A projection embeds the analysed plan, views expanded.
    """
    return frame.select("*")


def observed(observation: Observation) -> dict[str, Any] | None:
    """The observation's metrics if an action delivered them, else None (never blocks)."""
    handle = observation._jo  # noqa: SLF001 - PySpark only exposes the blocking ``get``
    if handle is None or not handle.future().isCompleted():
        return None
    return observation.get
