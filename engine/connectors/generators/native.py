"""Generator sources (``impulse``, ``nexmark``) as native Spark: no Python per row.

A generator's rows are a function of their sequence number, so they need no
reader: each epoch, the runtime asks the connector where the source stands
after the batch (:meth:`GeneratorConnector.advance`, from the offset committed
with the previous epoch and the batch's trigger time, which Spark logs with
the batch and reads back on a replay) and for the rows between the two offsets
(:meth:`GeneratorConnector.rows`: Spark's ``range`` and SQL expressions over
each row's number).  The offsets keep the shape the connector's Python reader
gave them, and Spate's state store keeps them, as it keeps every source's.

What Spark streams for a generator is only a tick per batch (its built-in
``rate-micro-batch`` source), which lets a pipeline reading only generators
run as one streaming query with no Python worker process at all.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors import core

#: Spark's source of one row per micro-batch, whatever the time: the generator's ticks.
TICKER_FORMAT = "rate-micro-batch"
#: The column of :func:`sequence_numbers` holding each row's number.
NUMBER = "id"
#: The column of :func:`sequence_numbers` marking the end-of-input control row.
END = "__end"


class GeneratorConnector(core.Connector):
    """A source whose rows Spark computes from their numbers, between offsets Spate
    keeps (see the module's docstring)."""

    def read_stream(self, spark: SparkSession, table: core.TableConfig,
                    parallelism: int) -> DataFrame:
        """The ticks that start the source's batches, not its rows (:meth:`rows` are)."""
        del table, parallelism
        return ticks(spark)

    @abstractmethod
    def advance(self, table: core.TableConfig, parallelism: int, start: Any | None,
                now_ms: int) -> Any:
        """The offset at the end of a batch that Spark planned at ``now_ms`` (wall
        clock) after ``start``, the offset of the previous one (None: the source's
        beginning, which starts its schedule at ``now_ms``).  Raises
        :class:`ConnectorError` for an offset that is not this connector's."""

    @abstractmethod
    def rows(self, spark: SparkSession, table: core.TableConfig, parallelism: int,
             start: Any | None, end: Any) -> DataFrame:
        """The source's rows from ``start`` (None: its beginning) to ``end``: physical
        then hidden columns, as a reader's, with the end-of-input control row in the
        batch that ends the source."""


def ticks(spark: SparkSession) -> DataFrame:
    """One row per micro-batch, in one partition, read by nothing."""
    return (spark.readStream.format(TICKER_FORMAT).option("rowsPerBatch", 1)
            .option("numPartitions", 1).load())


def sequence_numbers(spark: SparkSession, first: int, stop: int, parallelism: int,
                     finishing: bool) -> DataFrame:
    """Numbers ``first`` to ``stop - 1`` in column :data:`NUMBER`, over up to
    ``parallelism`` partitions, and ``stop`` itself when the batch ends the source
    (``finishing``); column :data:`END` is true on that one, the end-of-input
    control row (:func:`is_end`).

    The bounds travel as data, a row per slice of numbers that Spark expands: Spark
    writes a literal into the code it generates for a plan, so bounds given as
    literals (``spark.range(first, stop)``) made it generate, compile and load new
    classes every epoch, the most of a small pipeline's CPU (BENCHMARKS.md,
    "Density")."""
    last = stop + int(finishing)
    count = max(0, last - first)
    slices = max(1, min(parallelism, count))
    marker = stop if finishing else -1  # numbers are never negative
    bounds = [(first + count * i // slices, first + count * (i + 1) // slices)
              for i in range(slices)]
    values = ", ".join(f"({low}, {high}, {marker})" for low, high in bounds if low < high)
    if not values:
        return spark.range(0).select(F.col("id").alias(NUMBER), F.lit(False).alias(END))
    # One statement, so one call into the JVM and one analysis per epoch.
    return spark.sql(f"SELECT {NUMBER}, {NUMBER} = marker AS {END} "
                     f"FROM VALUES {values} AS slices(low, high, marker) "
                     f"LATERAL VIEW explode(sequence(low, high - 1)) AS {NUMBER}")


def is_end() -> Column:
    """Whether a row of :func:`sequence_numbers` is the end-of-input control row."""
    return F.col(END)


def check_offset(table: core.TableConfig, start: Any, fields: frozenset[str]) -> None:
    """Refuse a stored offset without this connector's ``fields`` (the table was
    redefined as another connector since the state was written)."""
    if not isinstance(start, dict) or not fields <= set(start):
        raise core.ConnectorError(
            f"source '{table.name}' cannot resume at its stored offset {start}: it is not an "
            f"offset of this connector (fields {', '.join(sorted(fields))}); the table was "
            "redefined since the state was written. Drop the pipeline's state to start afresh")


def with_hidden(physical: list[Column], end: Column, partition: Column, micros: Column,
                schema: T.StructType) -> list[Column]:
    """``physical`` columns and the hidden ones, typed as ``schema`` says; on the
    control row (``end``) every column is NULL but its partition (0) and control."""
    data = [F.when(~end, column) for column in physical]
    hidden = [F.when(end, F.lit(0)).otherwise(partition),
              F.when(~end, F.timestamp_micros(micros)),
              F.when(end, F.lit(core.CONTROL_EOF))]
    names = [f.name for f in schema.fields]
    assert names[-3:] == [core.HIDDEN_PARTITION, core.HIDDEN_TIMESTAMP, core.HIDDEN_CONTROL]
    return [column.cast(f.dataType).alias(f.name)
            for column, f in zip(data + hidden, schema.fields, strict=True)]


def floor_div(column: Column, divisor: int) -> Column:
    """``column`` divided by ``divisor``, rounded down (both non-negative), exactly:
    as integers, never through a double; never NULL (Spark's ``div`` would be for a
    zero divisor, which a positive constant is not)."""
    quotient = F.call_function("div", column, F.lit(divisor).cast(T.LongType()))
    return F.coalesce(quotient, F.lit(0).cast(T.LongType()))
