"""Sinks that write on the executors: each task writes its own rows, the driver gathers
what they wrote.

A sink that collects an epoch to the driver (``toArrow``) moves every row through
one process. Here each Spark task hands its partition's rows, as one Arrow table,
to the sink's :class:`PartitionWriter`, which stages them at the destination and
returns small reports (a file's name, its upload token, its size). The driver
gathers the reports with one job and keeps them in the epoch's marker; publishing
what was staged stays the driver's, once the epoch is committed, so exactly-once is
unchanged. A retried task writes again under the same names, which are a function of
the epoch, the partition and the file's sequence, and whatever an abandoned attempt
staged is dropped with everything else unpublished when the sink next opens.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.python_workers import settle

_REPORT = "report"
_SCHEMA = T.StructType([T.StructField(_REPORT, T.StringType(), False)])
_ARROW_SCHEMA = pa.schema([pa.field(_REPORT, pa.string(), nullable=False)])


class PartitionWriter(Protocol):
    """Writes one task's rows; picklable, as it travels to the executors."""

    def __call__(self, partition: int, rows: pa.Table) -> list[dict[str, Any]]:
        """Stage ``rows`` (the task's whole partition, never empty); return one
        JSON-able report per thing written."""


def default_writers() -> int:
    """How many writers a sink spreads its records over when it first opens (it keeps
    the count in its marker): the active session's default parallelism, 1 without
    a session."""
    spark = SparkSession.getActiveSession()
    return max(1, int(spark.sparkContext.defaultParallelism)) if spark is not None else 1


def write_partitions(df: DataFrame, writer: PartitionWriter) -> list[dict[str, Any]]:
    """Run ``writer`` in every task over that task's rows of ``df``; return every
    report, in partition order."""
    reports = df.mapInArrow(_Task(writer), _SCHEMA).collect()
    return [json.loads(row[0]) for row in reports]


@dataclass(frozen=True)
class _Task:
    """The function ``mapInArrow`` runs in each task (picklable)."""

    writer: PartitionWriter

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        settle()
        collected = list(batches)
        if not collected or not any(batch.num_rows for batch in collected):
            return
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        reports = self.writer(partition, pa.Table.from_batches(collected))
        if reports:
            yield pa.RecordBatch.from_arrays(
                [pa.array([json.dumps(r) for r in reports], pa.string())], schema=_ARROW_SCHEMA)
