"""The ``nexmark`` source (docs/sql/connectors.md) over the generator of :mod:`nexmark_gen`.

Offsets are ``{"start_wall_ns", "base_ns", "next", "eof"}``: the wall clock at the
start (paces a rate-limited source), the event-time base, and the number of
events emitted. Event ``i`` happens at ``base + i * 1e9 / event_rate`` ns; a
batch's index range is dealt to the ``parallelism`` partitions round-robin
(event ``i`` to partition ``i mod p``), so every partition's event times span the
whole batch and the pipeline watermark is not held back by one of them.
A pipeline resuming from its state store starts at the offset stored there.
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
from spate.engine.connectors.nexmark_gen import NEXMARK_TYPES, generate
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

SOURCE_NAME = "spate_nexmark"
DEFAULT_MAX_EVENTS_PER_BATCH = 100_000
#: A bounded replay is split into at least this many epochs by default, so its
#: first windows come out while the rest is still being generated.
_REPLAY_EPOCHS = 5
#: Events generated per Arrow batch inside one partition (keeps work cache-sized).
_CHUNK_EVENTS = 32_768
COLUMNS = tuple(ColumnDef(name, kind, True) for name, kind in NEXMARK_TYPES)


@dataclass(frozen=True)
class NexmarkSettings:
    table: str
    event_rate: float
    #: floor(event_rate x runtime); None: unbounded
    total_events: int | None
    rate_limited: bool
    max_events_per_batch: int
    #: fixed event-time base (nexmark.base_time_ms); None: the start's wall clock
    base_time_ms: int | None
    parallelism: int = 1


def _parse(table: TableConfig) -> NexmarkSettings:
    options = OptionReader(table)
    check_role(options, frozenset({SOURCE}))
    reject_format_options(options)
    check_source_options(options)
    rate = options.number("event_rate", positive=True, required=True) or 1.0
    runtime_s = options.number("runtime", None, positive=True)
    total = None if runtime_s is None else math.floor(rate * runtime_s)
    rate_limited = options.boolean("rate_limited", True)
    settings = NexmarkSettings(
        table=table.name,
        event_rate=rate,
        total_events=total,
        rate_limited=rate_limited,
        max_events_per_batch=options.integer("max_events_per_batch",
                                             _default_batch(total, rate_limited),
                                             minimum=1) or 1,
        base_time_ms=options.integer("nexmark.base_time_ms", None, minimum=0),
    )
    options.finish()
    return settings


def _default_batch(total_events: int | None, rate_limited: bool) -> int:
    """Events per epoch when ``max_events_per_batch`` is not given: a bounded
    replay (``rate_limited = false``) in at least :data:`_REPLAY_EPOCHS` epochs."""
    if total_events is None or rate_limited:
        return DEFAULT_MAX_EVENTS_PER_BATCH
    return min(DEFAULT_MAX_EVENTS_PER_BATCH, max(1, math.ceil(total_events / _REPLAY_EPOCHS)))


@register
class NexmarkConnector(Connector):
    """``nexmark``: the benchmark's person / auction / bid event stream."""

    name = "nexmark"
    roles = frozenset({SOURCE})
    options = (*TYPE, *SOURCE_TIME,
               *specs(SOURCES, "event_rate", "runtime", "rate_limited", "max_events_per_batch",
                      "nexmark.base_time_ms"))

    def validate(self, table: TableConfig) -> tuple[ColumnDef, ...]:
        _parse(table)
        return check_fixed_columns(table, COLUMNS)

    def is_bounded(self, table: TableConfig) -> bool:
        return _parse(table).total_events is not None

    def reader_options(self, table: TableConfig, parallelism: int) -> dict[str, str]:
        """The options of the data source reading ``table`` (see :func:`source_options`)."""
        settings = asdict(_parse(table)) | {"parallelism": max(1, parallelism)}
        return source_options(stream_schema(COLUMNS), settings)

    def partition_count(self, table: TableConfig, parallelism: int) -> int:
        del table
        return max(1, parallelism)

    def batch_facts(self, table: TableConfig, parallelism: int, start: Any | None,
                    end: Any) -> BatchFacts:
        """Every event from ``start`` to ``end`` is a data row (offsets count events)."""
        del table, parallelism
        first = 0 if start is None else int(start["next"])
        return BatchFacts(rows=int(end["next"]) - first, finished=bool(end["eof"]))

    def batch_limit(self, table: TableConfig) -> int | None:
        return _parse(table).max_events_per_batch

    def next_input_ms(self, table: TableConfig, parallelism: int, offset: Any) -> int | None:
        """Event ``n`` is due ``n / event_rate`` seconds after the start (at once when
        the stream is not rate-limited)."""
        del parallelism
        settings = _parse(table)
        if offset.get("eof"):
            return None
        if not settings.rate_limited:
            return int(offset["start_wall_ns"]) // 1_000_000
        due_ns = int(offset["start_wall_ns"]) + int(offset["next"]) * 1e9 / settings.event_rate
        return int(due_ns // 1_000_000)

    def read_stream(self, spark: SparkSession, table: TableConfig, parallelism: int) -> DataFrame:
        return load_stream(spark, SOURCE_NAME, self.reader_options(table, parallelism))


class NexmarkDataSource(SpateDataSource):
    """Registered as ``spate_nexmark``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        return NexmarkStreamReader(NexmarkSettings(**self.settings()), schema,
                                   self.start_offset())


class NexmarkStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Admits event index ranges; generation happens in ``read`` on executors."""

    def __init__(self, settings: NexmarkSettings, schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.schema = schema
        #: the offset a resumed pipeline starts at (from its state store); None: the start
        self.start = start
        self._frozen_now_ns: int | None = None
        #: the wall clock (ns); replaceable in tests
        self.clock_ns: Callable[[], int] = time.time_ns

    def initialOffset(self) -> dict[str, Any]:
        return initial_offset(self.start, self._fresh_offset, self.settings.table)

    def _fresh_offset(self) -> dict[str, Any]:
        now_ns = self.clock_ns()
        base_ms = self.settings.base_time_ms
        base_ns = now_ns if base_ms is None else base_ms * 1_000_000
        return {"start_wall_ns": now_ns, "base_ns": base_ns, "next": 0, "eof": False}

    def getDefaultReadLimit(self) -> ReadLimit:
        return default_limit(self.settings.max_events_per_batch)

    def prepareForTriggerAvailableNow(self) -> None:
        self._frozen_now_ns = self.clock_ns()

    def _available(self, start: dict[str, Any]) -> int | None:
        """Events generated so far (None: unlimited)."""
        available: int | None = None
        if self.settings.rate_limited:
            now_ns = self.clock_ns() if self._frozen_now_ns is None else self._frozen_now_ns
            elapsed_s = max(now_ns - start["start_wall_ns"], 0) / 1e9
            available = math.floor(elapsed_s * self.settings.event_rate) + 1
        total = self.settings.total_events
        if total is not None:
            available = total if available is None else min(available, total)
        return available

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if start["eof"]:
            return start
        available = self._available(start)
        rows = max_rows(limit, self.settings.max_events_per_batch)
        if rows is not None:
            target = start["next"] + rows if available is None else \
                min(available, start["next"] + rows)
        else:  # "all available" of an endless stream: one default-sized batch
            target = available if available is not None else \
                start["next"] + self.settings.max_events_per_batch
        total = self.settings.total_events
        eof = total is not None and target >= total
        if target <= start["next"] and not eof:
            return start
        return dict(start, next=max(target, start["next"]), eof=eof)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        if start == end:
            return []
        count = self.settings.parallelism
        finishing = end["eof"] and not start["eof"]
        return [InputPartition({"first": start["next"], "stop": end["next"], "index": k,
                                "count": count, "base_ns": start["base_ns"],
                                "eof": finishing and k == 0})
                for k in range(count)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        settle()
        part = partition.value
        schema = arrow_schema(self.schema)
        types = (schema.field(0).type, schema.field(1).type, schema.field(2).type)
        index, count = part["index"], part["count"]
        first = part["first"] + (index - part["first"]) % count
        ns_per_event = 1e9 / self.settings.event_rate
        step = _CHUNK_EVENTS * count
        for chunk_first in range(first, part["stop"], step):
            ids = np.arange(chunk_first, min(chunk_first + step, part["stop"]), count,
                            dtype=np.int64)
            events = generate(ids, part["base_ns"], ns_per_event, types)
            yield data_batch(schema, [events.person, events.auction, events.bid], index,
                             events.timestamps)
        if part["eof"]:
            yield control_batch(schema, index, CONTROL_EOF)
