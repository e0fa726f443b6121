"""The ``impulse`` source (docs/sql/connectors.md): counters at a fixed rate.

One global schedule, whatever the parallelism: row ``n = 0, 1, ...`` is due
``n / event_rate`` seconds after the start, has ``counter = n`` and goes to subtask
``n mod p`` (its ``subtask_index``), so each of the ``p`` subtasks emits
``event_rate / p`` rows per second. A rescale changes only which subtask emits a
row, never which rows there are or their event times: rows neither pause nor
repeat across it. Offsets are ``{"start_ns", "next", "eof"}``: the wall-clock
start (the first batch's trigger time) and the number of rows emitted so far, so a
restart from a checkpoint (or from the offset a state store kept) regenerates the
same rows. (An offset written before the schedule was global counted rows per
subtask, ``{"counter"}``: it is read as ``counter × p`` rows emitted.)

A generator (:mod:`~spate.engine.connectors.generators.native`): Spark computes the rows
natively from their numbers.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from pyspark import SparkContext
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.formats.records import reject_format_options
from spate.engine.connectors.generators.native import (
    NUMBER,
    GeneratorConnector,
    check_offset,
    floor_div,
    is_end,
    sequence_numbers,
    with_hidden,
)

#: Rows (over all subtasks) admitted per micro-batch.
MAX_ROWS_PER_BATCH = 1_000_000
COLUMNS = (core.ColumnDef("counter", T.LongType(), False),
           core.ColumnDef("subtask_index", T.LongType(), False))
_SCHEMA = core.stream_schema(COLUMNS)
_OFFSET_FIELDS = frozenset({"start_ns", "eof"})

EVENT_RATE = core.option("event_rate", core.SOURCES, "rows per second, over all subtasks together",
                         kind=core.NUMBER, required=True)
MESSAGE_COUNT = core.option("message_count", core.SOURCES, "rows in all; makes the source bounded",
                            kind=core.INTEGER)
EVENT_TIME_INTERVAL = core.option("event_time_interval", core.SOURCES, "nanoseconds of event time "
                                  "between consecutive rows", kind=core.INTEGER)


@dataclass(frozen=True)
class ImpulseSettings:
    table: str
    event_rate: float
    #: event time step per counter in ns; None: the row's emission time
    event_time_interval_ns: int | None
    #: rows in all; None: unbounded
    message_count: int | None


def _parse(table: core.TableConfig) -> ImpulseSettings:
    options = core.OptionReader(table)
    core.check_role(options, frozenset({core.SOURCE}))
    reject_format_options(options)
    core.check_source_options(options)
    settings = ImpulseSettings(
        table=table.name,
        event_rate=options.number(EVENT_RATE, positive=True, required=True) or 0.0,
        event_time_interval_ns=options.integer(EVENT_TIME_INTERVAL, minimum=0),
        message_count=options.integer(MESSAGE_COUNT, minimum=0),
    )
    options.finish()
    return settings


@core.register
class ImpulseConnector(GeneratorConnector):
    """``impulse``: a rate-limited counter source, bounded by ``message_count``."""

    name = "impulse"
    roles = frozenset({core.SOURCE})
    options = (*core.TYPE, EVENT_RATE, MESSAGE_COUNT, EVENT_TIME_INTERVAL, *core.SOURCE_TIME)
    examples = {core.SOURCE: ({"event_rate": "10"},)}

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        _parse(table)
        return core.check_fixed_columns(table, COLUMNS)

    def is_bounded(self, table: core.TableConfig) -> bool:
        return _parse(table).message_count is not None

    def partition_count(self, table: core.TableConfig, parallelism: int) -> int:
        del table
        return max(1, parallelism)

    def batch_facts(self, table: core.TableConfig, parallelism: int, start: Any | None,
                    end: Any) -> core.BatchFacts:
        """Rows ``start`` to ``end`` of the global schedule."""
        del table
        first = 0 if start is None else emitted(start, parallelism)
        return core.BatchFacts(rows=emitted(end, parallelism) - first, finished=bool(end["eof"]))

    def batch_limit(self, table: core.TableConfig) -> int | None:
        del table
        return MAX_ROWS_PER_BATCH

    def next_input_ms(self, table: core.TableConfig, parallelism: int, offset: Any) -> int | None:
        """Row ``n`` is due ``n / event_rate`` seconds after the start."""
        if offset.get("eof"):
            return None
        rate = _parse(table).event_rate
        due_ns = int(offset["start_ns"]) + emitted(offset, parallelism) * 1e9 / rate
        return int(due_ns // 1_000_000)

    def advance(self, table: core.TableConfig, parallelism: int, start: Any | None,
                now_ms: int) -> dict[str, Any]:
        """Every row due by ``now_ms``, at most :data:`MAX_ROWS_PER_BATCH` more."""
        settings = _parse(table)
        now_ns = now_ms * 1_000_000
        if start is None:
            start = {"start_ns": now_ns, "next": 0, "eof": False}
        check_offset(table, start, _OFFSET_FIELDS)
        start = _current(start, max(1, parallelism))
        if start["eof"]:
            return dict(start)
        elapsed_s = max(now_ns - start["start_ns"], 0) / 1e9
        available = math.floor(elapsed_s * settings.event_rate) + 1
        count = settings.message_count
        if count is not None:
            available = min(available, count)
        available = min(available, start["next"] + MAX_ROWS_PER_BATCH)
        eof = count is not None and available >= count
        if available <= start["next"] and not eof:
            return dict(start)
        return {"start_ns": start["start_ns"], "next": max(available, start["next"]),
                "eof": eof}

    def rows(self, spark: SparkSession, table: core.TableConfig, parallelism: int,
             start: Any | None, end: Any) -> DataFrame:
        """Counters ``start`` to ``end``, counter ``n`` on subtask ``n mod p``."""
        subtasks = max(1, parallelism)
        end = _current(end, subtasks)
        first = 0 if start is None else emitted(start, subtasks)
        stop = int(end["next"])
        finishing = bool(end["eof"]) and not (start is not None and start["eof"])
        columns = _columns(spark.sparkContext, _parse(table), subtasks, int(end["start_ns"]))
        return sequence_numbers(spark, first, stop, subtasks, finishing).select(*columns)


@functools.lru_cache(maxsize=32)
def _columns(context: SparkContext, settings: ImpulseSettings, subtasks: int,
             start_ns: int) -> list[Column]:
    """The projection making rows of numbers, built once per source and run (and JVM,
    ``context``'s): each function in it is a call into the JVM, which every epoch would
    otherwise pay again (most of an epoch's driver time)."""
    del context
    counter = F.col(NUMBER)
    subtask = counter % F.lit(subtasks)
    micros = floor_div(_event_time_ns(settings, counter, start_ns), 1000)
    return with_hidden([counter, subtask], is_end(), subtask, micros, _SCHEMA)


def _event_time_ns(settings: ImpulseSettings, counter: Column, start_ns: int) -> Column:
    """Event time: start + counter x interval, else when the row became due (the
    double product rounded down, as the schedule computes it)."""
    interval = settings.event_time_interval_ns
    if interval is not None:
        offset_ns = counter * F.lit(interval).cast(T.LongType())
    else:
        offset_ns = F.floor(counter.cast(T.DoubleType()) * F.lit(1e9 / settings.event_rate))
    return F.lit(start_ns).cast(T.LongType()) + offset_ns


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
