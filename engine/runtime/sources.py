"""A pipeline's sources as one Spark stream, and what each epoch learns from them.

Every source table becomes a streaming DataFrame (its connector's); several
are unioned into one stream, each source's row packed into its own struct
column, because a pipeline is one streaming query.  Per epoch, each source is
exposed to the queries' SQL as a temporary view of its data rows, with the
row's event time and watermark computed natively.

What the runner needs from a batch (rows in, per-partition watermarks,
end-of-input and dropped-record control rows) is computed by Spark aggregate
expressions, either observed during the epoch's single pass over the batch
(:class:`pyspark.sql.Observation`, no extra job) or, when several queries read
the batch, by one aggregate job over the cached batch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F

from engine.connectors import CONNECTORS, HIDDEN_CONTROL, HIDDEN_PARTITION, HIDDEN_TIMESTAMP
from engine.connectors.base import CONTROL_DROPPED_PREFIX, CONTROL_EOF
from engine.planner.catalog import DEFAULT_WATERMARK_DELAY_SQL, Table
from engine.planner.plan import EVENT_TIME, WATERMARK

_SOURCE_TAG = "__source"


@dataclass
class SourceMetrics:
    """What one epoch's batch held for one source."""

    rows: int = 0
    #: partition -> largest per-row watermark (µs; None if the rows had none)
    watermarks: dict[int, int | None] = field(default_factory=dict)
    finished: bool = False
    dropped: int = 0


def source_stream(spark: SparkSession, sources: list[Table], parallelism: int) -> DataFrame:
    """One streaming DataFrame over every source of the pipeline."""
    frames = [CONNECTORS[t.config.connector].read_stream(spark, t.config, parallelism)
              for t in sources]
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

    def __init__(self, sources: list[Table], batch: DataFrame, parallelism: int, epoch: int,
                 observe: bool) -> None:
        # The batch lives in the streaming query's own session: views go there.
        spark = self.spark = batch.sparkSession
        self.sources = sources
        self.parallelism = parallelism
        self._observations: dict[str, Observation] = {}
        self._metrics: dict[str, SourceMetrics] | None = None
        self._frames: dict[str, DataFrame] = {}
        for i, table in enumerate(sources):
            raw = batch if len(sources) == 1 else \
                batch.where(F.col(_SOURCE_TAG) == i).select(f"__s{i}.*")
            raw.createOrReplaceTempView(f"__raw_{table.name}")
            frame = spark.sql(_source_view_sql(table))
            if observe:
                observation = Observation(f"spate_in_{table.name}_{epoch}")
                frame = frame.observe(observation, *self._metric_columns(table))
                self._observations[table.name] = observation
            self._frames[table.name] = frame
            frame.where(F.col(HIDDEN_CONTROL).isNull()).createOrReplaceTempView(table.name)

    def metrics(self) -> dict[str, SourceMetrics]:
        """Per source: rows, watermarks, end of input, dropped records.

        Observed metrics are used when an action of this epoch read the sources
        (through :func:`expand_views`); otherwise one aggregate job computes them.
        """
        if self._metrics is None:
            self._metrics = {}
            for table in self.sources:
                observation = self._observations.get(table.name)
                row = observed(observation) if observation is not None else None
                if row is None:
                    collected = self._frames[table.name].agg(*self._metric_columns(table))
                    row = collected.collect()[0].asDict()
                self._metrics[table.name] = self._parse(row)
        return self._metrics

    def _partitions(self, table: Table) -> range:
        connector = CONNECTORS[table.config.connector]
        return range(connector.partition_count(table.config, self.parallelism))

    def _metric_columns(self, table: Table) -> list[Column]:
        data = F.col(HIDDEN_CONTROL).isNull()
        partition = F.col(HIDDEN_PARTITION)
        control = F.col(HIDDEN_CONTROL)
        columns = [
            F.count(F.when(data, 1)).alias("rows"),
            F.max(F.when(control == CONTROL_EOF, 1).otherwise(0)).alias("eof"),
            F.sum(F.when(control.startswith(CONTROL_DROPPED_PREFIX),
                         F.substring(control, len(CONTROL_DROPPED_PREFIX) + 1, 20)
                         .cast("long"))).alias("dropped"),
        ]
        for p in self._partitions(table):
            in_partition = data & (partition == p)
            columns.append(F.count(F.when(in_partition, 1)).alias(f"n{p}"))
            columns.append(F.max(F.when(in_partition, F.unix_micros(F.col(WATERMARK))))
                           .alias(f"w{p}"))
        return columns

    def _parse(self, row: dict[str, object]) -> SourceMetrics:
        metrics = SourceMetrics(rows=int(row["rows"] or 0),  # type: ignore[call-overload]
                                finished=bool(row["eof"]),
                                dropped=int(row["dropped"] or 0))  # type: ignore[call-overload]
        for key, value in row.items():
            if key.startswith("n") and value:
                partition = int(key[1:])
                metrics.watermarks[partition] = row[f"w{partition}"]  # type: ignore[assignment]
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


def _source_view_sql(table: Table) -> str:
    generated = "".join(f", {sql} AS `{name}`" for name, sql in table.generated.items())
    event_time = table.event_time_sql or f"`{HIDDEN_TIMESTAMP}`"
    watermark = table.watermark_sql or f"{event_time} - {DEFAULT_WATERMARK_DELAY_SQL}"
    return (f"SELECT *, CAST({event_time} AS TIMESTAMP) AS `{EVENT_TIME}`, "
            f"CAST({watermark} AS TIMESTAMP) AS `{WATERMARK}` "
            f"FROM (SELECT *{generated} FROM `__raw_{table.name}`)")
