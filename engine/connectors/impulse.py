"""The ``impulse`` source (docs/sql/connectors.md): counters at a fixed rate.

One global schedule, whatever the parallelism: row ``n = 0, 1, ...`` is due
``n / event_rate`` seconds after the start, has ``counter = n`` and goes to subtask
``n mod p`` (its ``subtask_index``), so each of the ``p`` subtasks emits
``event_rate / p`` rows per second. A rescale changes only which subtask emits a
row, never which rows there are or their event times: rows neither pause nor
repeat across it. Offsets are ``{"start_ns", "next", "eof"}``: the wall-clock
start recorded in the initial offset and the number of rows emitted so far, so a
restart from a checkpoint (or from the offset a state store kept) regenerates the
same rows. (An offset written before the schedule was global counted rows per
subtask, ``{"counter"}``: it is read as ``counter × p`` rows emitted.)
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from spate.engine.connectors.arrow_batches import arrow_schema, control_batch, data_batch
from spate.engine.connectors.base import (
    CONTROL_EOF,
    SOURCE,
    BatchFacts,
    ColumnDef,
    Connector,
    TableConfig,
    check_fixed_columns,
    register,
    stream_schema,
)
from spate.engine.connectors.formats import reject_format_options
from spate.engine.connectors.metadata import SOURCE_TIME, SOURCES, TYPE, specs
from spate.engine.connectors.options import OptionReader, check_role, check_source_options
from spate.engine.connectors.streaming import (
    SpateDataSource,
    default_limit,
    initial_offset,
    load_stream,
    max_rows,
    source_options,
)
from spate.engine.python_workers import settle

SOURCE_NAME = "spate_impulse"
#: Rows (over all subtasks) admitted per micro-batch unless Spark asks for all.
MAX_ROWS_PER_BATCH = 1_000_000
COLUMNS = (ColumnDef("counter", T.LongType(), False),
           ColumnDef("subtask_index", T.LongType(), False))


@dataclass(frozen=True)
class ImpulseSettings:
    table: str
    event_rate: float
    #: event time step per counter in ns; None: the row's emission time
    event_time_interval_ns: int | None
    #: rows in all; None: unbounded
    message_count: int | None
    parallelism: int = 1


def _parse(table: TableConfig) -> ImpulseSettings:
    options = OptionReader(table)
    check_role(options, frozenset({SOURCE}))
    reject_format_options(options)
    check_source_options(options)
    settings = ImpulseSettings(
        table=table.name,
        event_rate=options.number("event_rate", positive=True, required=True) or 0.0,
        event_time_interval_ns=options.integer("event_time_interval", None, minimum=0),
        message_count=options.integer("message_count", None, minimum=0),
    )
    options.finish()
    return settings


@register
class ImpulseConnector(Connector):
    """``impulse``: a rate-limited counter source, bounded by ``message_count``."""

    name = "impulse"
    roles = frozenset({SOURCE})
    options = (*TYPE, *SOURCE_TIME,
               *specs(SOURCES, "event_rate", "event_time_interval", "message_count"))

    def validate(self, table: TableConfig) -> tuple[ColumnDef, ...]:
        _parse(table)
        return check_fixed_columns(table, COLUMNS)

    def is_bounded(self, table: TableConfig) -> bool:
        return _parse(table).message_count is not None

    def reader_options(self, table: TableConfig, parallelism: int) -> dict[str, str]:
        """The options of the data source reading ``table`` (see :func:`source_options`)."""
        settings = asdict(_parse(table)) | {"parallelism": max(1, parallelism)}
        return source_options(stream_schema(COLUMNS), settings)

    def partition_count(self, table: TableConfig, parallelism: int) -> int:
        del table
        return max(1, parallelism)

    def batch_facts(self, table: TableConfig, parallelism: int, start: Any | None,
                    end: Any) -> BatchFacts:
        """Rows ``start`` to ``end`` of the global schedule."""
        del table
        first = 0 if start is None else emitted(start, parallelism)
        return BatchFacts(rows=emitted(end, parallelism) - first, finished=bool(end["eof"]))

    def batch_limit(self, table: TableConfig) -> int | None:
        del table
        return MAX_ROWS_PER_BATCH

    def next_input_ms(self, table: TableConfig, parallelism: int, offset: Any) -> int | None:
        """Row ``n`` is due ``n / event_rate`` seconds after the start."""
        if offset.get("eof"):
            return None
        rate = _parse(table).event_rate
        due_ns = int(offset["start_ns"]) + emitted(offset, parallelism) * 1e9 / rate
        return int(due_ns // 1_000_000)

    def read_stream(self, spark: SparkSession, table: TableConfig, parallelism: int) -> DataFrame:
        return load_stream(spark, SOURCE_NAME, self.reader_options(table, parallelism))


class ImpulseDataSource(SpateDataSource):
    """Registered as ``spate_impulse``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        return ImpulseStreamReader(ImpulseSettings(**self.settings()), schema,
                                   self.start_offset())


class ImpulseStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets count the rows of the global schedule emitted so far."""

    def __init__(self, settings: ImpulseSettings, schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.schema = schema
        #: the offset a resumed pipeline starts at (from its state store); None: the start
        self.start = None if start is None else _current(start, settings.parallelism)
        self._frozen_now_ns: int | None = None
        #: the wall clock (ns); replaceable in tests
        self.clock_ns: Callable[[], int] = time.time_ns

    def initialOffset(self) -> dict[str, Any]:
        return initial_offset(
            self.start, lambda: {"start_ns": self.clock_ns(), "next": 0, "eof": False},
            self.settings.table)

    def getDefaultReadLimit(self) -> ReadLimit:
        return default_limit(MAX_ROWS_PER_BATCH)

    def prepareForTriggerAvailableNow(self) -> None:
        self._frozen_now_ns = self.clock_ns()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        start = _current(start, self.settings.parallelism)
        if start["eof"]:
            return start
        now_ns = self.clock_ns() if self._frozen_now_ns is None else self._frozen_now_ns
        elapsed_s = max(now_ns - start["start_ns"], 0) / 1e9
        available = math.floor(elapsed_s * self.settings.event_rate) + 1
        count = self.settings.message_count
        if count is not None:
            available = min(available, count)
        rows = max_rows(limit, MAX_ROWS_PER_BATCH)
        if rows is not None:
            available = min(available, start["next"] + max(1, rows))
        eof = count is not None and available >= count
        if available <= start["next"] and not eof:
            return start
        return {"start_ns": start["start_ns"], "next": max(available, start["next"]),
                "eof": eof}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        parallelism = self.settings.parallelism
        start, end = _current(start, parallelism), _current(end, parallelism)
        if start == end:
            return []
        finishing = end["eof"] and not start["eof"]
        # Event times come from the end offset's clock start: it is in Spark's offset
        # log, whereas the first batch's start offset is a fresh initialOffset() call
        # (a later clock reading) that a replay would read differently again.
        return [InputPartition({"first": start["next"], "stop": end["next"],
                                "subtask": k, "count": parallelism,
                                "start_ns": end["start_ns"], "eof": finishing and k == 0})
                for k in range(parallelism)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        settle()
        part = partition.value
        schema = arrow_schema(self.schema)
        # This subtask's share of rows first..stop: those with n mod count == subtask.
        offset = (part["subtask"] - part["first"]) % part["count"]
        counters = np.arange(part["first"] + offset, part["stop"], part["count"],
                             dtype=np.int64)
        if len(counters):
            stamps = pa.array(self._event_times_ns(counters, part["start_ns"]) // 1000,
                              pa.int64())
            subtasks = np.full(len(counters), part["subtask"], dtype=np.int64)
            yield data_batch(schema, [pa.array(counters), pa.array(subtasks)],
                             part["subtask"], stamps)
        if part["eof"]:
            yield control_batch(schema, part["subtask"], CONTROL_EOF)

    def _event_times_ns(self, counters: np.ndarray, start_ns: int) -> np.ndarray:
        """Event time: start + counter x interval, else when the row became due."""
        interval = self.settings.event_time_interval_ns
        if interval is not None:
            return start_ns + counters * interval
        step_ns = 1e9 / self.settings.event_rate
        return start_ns + np.floor(counters * step_ns).astype(np.int64)


def emitted(offset: dict[str, Any], parallelism: int) -> int:
    """The rows of the global schedule an offset says were emitted."""
    return int(_current(offset, max(1, parallelism))["next"])


def _current(offset: dict[str, Any], parallelism: int) -> dict[str, Any]:
    """``offset`` in the global form; one of the per-subtask form counted ``counter``
    rows on each of ``parallelism`` subtasks."""
    if "next" in offset:
        return offset
    return {"start_ns": offset["start_ns"], "next": int(offset["counter"]) * parallelism,
            "eof": offset["eof"]}
