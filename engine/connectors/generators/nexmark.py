"""The ``nexmark`` source (docs/sql/connectors.md): the events of :mod:`.nexmark_events`.

Offsets are ``{"start_wall_ns", "base_ns", "next", "eof"}``: the wall clock at the
start (paces a rate-limited source; the first batch's trigger time), the
event-time base, and the number of events emitted. Event ``i`` happens at
``base + i * 1e9 / event_rate`` ns and goes to partition ``i mod p``, so every
partition's event times span the whole batch and the pipeline watermark is not
held back by one of them.  A generator
(:mod:`~spate.engine.connectors.generators.native`): Spark computes the events natively
from their numbers; a pipeline resuming from its state store starts at the
offset stored there.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from pyspark import SparkContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from spate.engine.connectors import core
from spate.engine.connectors.formats.records import reject_format_options
from spate.engine.connectors.generators.native import (
    NUMBER,
    GeneratorConnector,
    check_offset,
    sequence_numbers,
    with_hidden,
)
from spate.engine.connectors.generators.nexmark_events import (
    auction,
    bid,
    micros,
    person,
    projections,
)
from spate.engine.connectors.generators.nexmark_expressions import NEXMARK_TYPES

#: A bounded replay is split into at least this many epochs by default, so its
#: first windows come out while the rest is still being generated.
_REPLAY_EPOCHS = 5
COLUMNS = tuple(core.ColumnDef(name, kind, True) for name, kind in NEXMARK_TYPES)
_SCHEMA = core.stream_schema(COLUMNS)
_OFFSET_FIELDS = frozenset({"start_wall_ns", "base_ns", "next", "eof"})
#: The column marking the end-of-input control row among the numbers.
_END = "_end"

EVENT_RATE = core.option("event_rate", core.SOURCES, "events per second", kind=core.NUMBER,
                         required=True)
RUNTIME = core.option("runtime", core.SOURCES, "seconds of events; makes the source bounded at "
                      "⌊`event_rate` × `runtime`⌋ events", kind=core.NUMBER)
RATE_LIMITED = core.option("rate_limited", core.SOURCES, "`false` makes every event available at "
                           "once instead of as the wall clock passes", default=True)
MAX_EVENTS_PER_BATCH = core.option("max_events_per_batch", core.SOURCES,
                                   "events per epoch (without "
                                   "it, a bounded replay, `runtime` with `rate_limited = false`, "
                                   f"takes at least {_REPLAY_EPOCHS} epochs)", default=100_000)
BASE_TIME_MS = core.option("nexmark.base_time_ms", core.SOURCES,
                           "event time of the first event, in "
                           "milliseconds since the epoch, for reproducible runs", kind=core.INTEGER,
                           default_text="the start time")


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


def _parse(table: core.TableConfig) -> NexmarkSettings:
    options = core.OptionReader(table)
    core.check_role(options, frozenset({core.SOURCE}))
    reject_format_options(options)
    core.check_source_options(options)
    rate = options.number(EVENT_RATE, positive=True, required=True) or 1.0
    runtime_s = options.number(RUNTIME, positive=True)
    total = None if runtime_s is None else math.floor(rate * runtime_s)
    rate_limited = options.boolean(RATE_LIMITED)
    settings = NexmarkSettings(
        table=table.name,
        event_rate=rate,
        total_events=total,
        rate_limited=rate_limited,
        max_events_per_batch=options.integer(MAX_EVENTS_PER_BATCH,
                                             _default_batch(total, rate_limited),
                                             minimum=1) or 1,
        base_time_ms=options.integer(BASE_TIME_MS, minimum=0),
    )
    options.finish()
    return settings


def _default_batch(total_events: int | None, rate_limited: bool) -> int:
    """Events per epoch when ``max_events_per_batch`` is not given: a bounded
    replay (``rate_limited = false``) in at least :data:`_REPLAY_EPOCHS` epochs."""
    most: int = MAX_EVENTS_PER_BATCH.default
    if total_events is None or rate_limited:
        return most
    return min(most, max(1, math.ceil(total_events / _REPLAY_EPOCHS)))


@core.register
class NexmarkConnector(GeneratorConnector):
    """``nexmark``: the benchmark's person / auction / bid event stream."""

    name = "nexmark"
    roles = frozenset({core.SOURCE})
    options = (*core.TYPE, EVENT_RATE, RUNTIME, RATE_LIMITED, MAX_EVENTS_PER_BATCH, BASE_TIME_MS,
               *core.SOURCE_TIME)
    examples = {core.SOURCE: ({"event_rate": "10"},)}

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        _parse(table)
        return core.check_fixed_columns(table, COLUMNS)

    def is_bounded(self, table: core.TableConfig) -> bool:
        return _parse(table).total_events is not None

    def partition_count(self, table: core.TableConfig, parallelism: int) -> int:
        del table
        return max(1, parallelism)

    def batch_facts(self, table: core.TableConfig, parallelism: int, start: Any | None,
                    end: Any) -> core.BatchFacts:
        """Every event from ``start`` to ``end`` is a data row (offsets count events)."""
        del table, parallelism
        first = 0 if start is None else int(start["next"])
        return core.BatchFacts(rows=int(end["next"]) - first, finished=bool(end["eof"]))

    def batch_limit(self, table: core.TableConfig) -> int | None:
        return _parse(table).max_events_per_batch

    def next_input_ms(self, table: core.TableConfig, parallelism: int, offset: Any) -> int | None:
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

    def advance(self, table: core.TableConfig, parallelism: int, start: Any | None,
                now_ms: int) -> dict[str, Any]:
        """Every event due by ``now_ms`` (all of them unless rate-limited), at most
        ``max_events_per_batch`` more."""
        del parallelism
        settings = _parse(table)
        now_ns = now_ms * 1_000_000
        if start is None:
            base_ms = settings.base_time_ms
            start = {"start_wall_ns": now_ns, "next": 0, "eof": False,
                     "base_ns": now_ns if base_ms is None else base_ms * 1_000_000}
        check_offset(table, start, _OFFSET_FIELDS)
        if start["eof"]:
            return dict(start)
        target = start["next"] + settings.max_events_per_batch
        if settings.rate_limited:
            elapsed_s = max(now_ns - start["start_wall_ns"], 0) / 1e9
            target = min(target, math.floor(elapsed_s * settings.event_rate) + 1)
        total = settings.total_events
        if total is not None:
            target = min(target, total)
        eof = total is not None and target >= total
        if target <= start["next"] and not eof:
            return dict(start)
        return dict(start, next=max(target, start["next"]), eof=eof)

    def rows(self, spark: SparkSession, table: core.TableConfig, parallelism: int,
             start: Any | None, end: Any) -> DataFrame:
        """Events ``start`` to ``end``, event ``i`` on partition ``i mod p``."""
        partitions = max(1, parallelism)
        first = 0 if start is None else int(start["next"])
        stop = int(end["next"])
        finishing = bool(end["eof"]) and not (start is not None and start["eof"])
        numbers = sequence_numbers(spark, first, stop, partitions, finishing)
        return events(numbers, table, partitions, int(end["base_ns"]))


def events(numbers: DataFrame, table: core.TableConfig, parallelism: int, base_ns: int
           ) -> DataFrame:
    """The events numbered by ``numbers``' columns ``id`` and (the end-of-input control
    row) a second, boolean one: the source's rows, event ``i`` on partition ``i mod
    p``, its time ``base_ns + i × 1e9 / event_rate``.  ``numbers`` may be a stream
    (native Spark reads the same events so in the benchmarks)."""
    frame = numbers.toDF(NUMBER, _END)
    for columns in _projections(numbers.sparkSession.sparkContext, _parse(table),
                                max(1, parallelism), base_ns):
        frame = frame.select(*columns)
    return frame


@functools.lru_cache(maxsize=32)
def _projections(context: SparkContext, settings: NexmarkSettings, partitions: int,
                 base_ns: int) -> list[list[Column]]:
    """The projections making events of numbers, built once per source and run (and
    JVM, ``context``'s): their thousands of expressions would cost as many calls into
    the JVM every epoch."""
    del context
    ns_per_event = 1e9 / settings.event_rate
    ids = F.col(NUMBER)
    rows = with_hidden([person(), auction(ns_per_event), bid()], F.col(_END),
                       ids % partitions, micros(), _SCHEMA)
    return [*projections(ids, base_ns, ns_per_event), rows]


