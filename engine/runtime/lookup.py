"""Lookup joins at run time: the per-process cache and the batched join over Arrow.

A lookup join runs inside ``mapInArrow`` on executors. For each batch of left
rows it takes the distinct non-NULL keys, serves what it can from the
process's cache of that lookup table, fetches the rest from the store in one
round trip (:meth:`LookupSource.fetch`), caches those rows (and the keys that
had none), and matches left rows to right rows with Arrow's hash join.

The cache lives as long as the Python worker process (Spark reuses them) and is
bounded by an estimate of its entries' bytes; with a TTL each entry expires
that long after it was fetched. A lookup always reads the store's current
state, so a micro-batch replayed after a failure may see newer values than the
first attempt did: the accepted semantics of lookup joins (as in Flink and
Arroyo).
"""

from __future__ import annotations

import atexit
import sys
import threading
import time
import uuid
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any

import cachetools
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from spate.engine.connectors import CONNECTORS, TableConfig
from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.core.lookup import CacheSettings, Key, LookupConnector, LookupSource
from spate.engine.planner.plan import LookupJoin
from spate.engine.python_workers import settle
from spate.engine.runtime.steps import EpochContext, OperatorStep, StepOutput
from spate.statestore import PipelineState

_LEFT_ROW = "__spate_left_row"
_RIGHT_ROW = "__spate_right_row"
#: A row of a lookup table: the values of its columns, in declaration order.
Row = tuple[Any, ...]


def _approx_bytes(value: Any) -> int:
    """The memory a cached Python value takes, roughly (containers included)."""
    if isinstance(value, list | tuple):
        return sys.getsizeof(value) + sum(_approx_bytes(v) for v in value)
    if isinstance(value, dict):
        return sys.getsizeof(value) + sum(_approx_bytes(k) + _approx_bytes(v)
                                          for k, v in value.items())
    return sys.getsizeof(value)


class LookupCache:
    """Rows by key (``None``: the key has no row), bounded in bytes, counting hits/misses.

    ``timer`` (seconds, monotonic) decides expiry; tests pass their own clock.
    """

    def __init__(self, settings: CacheSettings,
                 timer: Callable[[], float] = time.monotonic) -> None:
        if not settings.enabled:
            raise ValueError("the lookup cache is disabled (max_bytes = 0)")
        self.settings = settings
        self.hits = 0
        self.misses = 0
        # Entries are (size, row): the size covers the key too, which getsizeof cannot see.
        self._entries: cachetools.Cache[Key, tuple[int, Row | None]]
        if settings.ttl_s is None:
            self._entries = cachetools.LRUCache(settings.max_bytes, getsizeof=_entry_size)
        else:
            self._entries = cachetools.TTLCache(settings.max_bytes, settings.ttl_s, timer=timer,
                                                getsizeof=_entry_size)
        self._lock = threading.Lock()

    @property
    def bytes_used(self) -> int:
        """The estimated bytes of the live entries."""
        return int(self._entries.currsize)

    def __len__(self) -> int:
        with self._lock:
            if isinstance(self._entries, cachetools.TTLCache):
                self._entries.expire()
            return len(self._entries)

    def get_many(self, keys: Iterable[Key]) -> tuple[dict[Key, Row | None], list[Key]]:
        """The cached answers for ``keys`` and the keys not cached (misses)."""
        found: dict[Key, Row | None] = {}
        missing: list[Key] = []
        with self._lock:
            for key in keys:
                entry = self._entries.get(key)
                if entry is None:
                    missing.append(key)
                else:
                    found[key] = entry[1]
        self.hits += len(found)
        self.misses += len(missing)
        return found, missing

    def put(self, key: Key, row: Row | None) -> None:
        """Cache ``row`` (None: no row) for ``key``; an entry too big for the cache is skipped."""
        size = _approx_bytes(key) + _approx_bytes(row)
        with self._lock:
            try:
                self._entries[key] = (size, row)
            except ValueError:  # larger than the whole cache
                self._entries.pop(key, None)


def _entry_size(entry: tuple[int, Row | None]) -> int:
    return entry[0]


class LookupJoiner:
    """Joins batches of left rows to one lookup table (one per table and process)."""

    def __init__(self, source: LookupSource, cache: LookupCache | None) -> None:
        self.source = source
        self.cache = cache
        self.fetched_keys = 0

    def rows_for(self, keys: Sequence[Key]) -> pa.Table:
        """The rows of the distinct non-NULL ``keys`` that have one (cache, then one fetch)."""
        if self.cache is None:
            self.fetched_keys += len(keys)
            return self.source.fetch(keys)
        cached, missing = self.cache.get_many(keys)
        fetched = self.source.fetch(missing)
        self.fetched_keys += len(missing)
        key_names = [c.name for c in self.source.key_columns]
        found: set[Key] = set()
        for row in fetched.to_pylist():
            key = tuple(row[name] for name in key_names)
            found.add(key)
            self.cache.put(key, tuple(row.values()))
        for key in missing:
            if key not in found:
                self.cache.put(key, None)
        rows = [row for row in cached.values() if row is not None]
        if not rows:
            return fetched
        names = self.source.schema.names
        hits = pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in rows],
                                    schema=self.source.schema)
        return pa.concat_tables([hits, fetched])

    def join(self, batch: pa.RecordBatch, key_inputs: Sequence[str],
             keep_unmatched: bool) -> tuple[pa.Table, pa.Table]:
        """Left rows and their matched right rows (aligned; NULLs when unmatched).

        ``key_inputs`` name the columns of ``batch`` holding each key column's
        value, already of the key column's type. Without ``keep_unmatched``
        (INNER) rows with no match are dropped.
        """
        left_keys = [batch.column(name) for name in key_inputs]
        keys = _distinct_keys(left_keys)
        right = self.rows_for(keys)
        key_names = [f"k{i}" for i in range(len(key_inputs))]
        left_index = pa.table(left_keys + [pa.array(range(batch.num_rows), pa.int64())],
                              names=key_names + [_LEFT_ROW])
        right_keys = [right.column(c.name) for c in self.source.key_columns]
        right_index = pa.table(right_keys + [pa.array(range(right.num_rows), pa.int64())],
                               names=key_names + [_RIGHT_ROW])
        pairs = left_index.join(right_index, keys=key_names,
                                join_type="left outer" if keep_unmatched else "inner",
                                use_threads=False)
        left_rows = pairs.column(_LEFT_ROW)
        return (pa.Table.from_batches([batch]).take(left_rows),
                right.take(pairs.column(_RIGHT_ROW)))


def _distinct_keys(columns: list[pa.Array]) -> list[Key]:
    """The distinct keys among rows whose key columns are all non-NULL."""
    table = pa.table(columns, names=[f"k{i}" for i in range(len(columns))])
    table = table.drop_null().group_by(table.column_names).aggregate([])
    return list(zip(*(c.to_pylist() for c in table.columns), strict=True))


# -- per-process joiners ---------------------------------------------------------------

_JOINERS: dict[Hashable, LookupJoiner] = {}
_JOINERS_LOCK = threading.Lock()
#: Joiners a process keeps; past this the oldest (of runs long gone) is closed.
MAX_JOINERS = 32


def process_joiner(table: TableConfig, cache_id: Hashable) -> LookupJoiner:
    """The joiner of ``table`` in this process, opened on first use and then reused.

    ``cache_id`` tells pipelines (and versions of a table) apart, so two never
    share cached rows.
    """
    with _JOINERS_LOCK:
        joiner = _JOINERS.get(cache_id)
        if joiner is None:
            connector = CONNECTORS[table.connector]
            assert isinstance(connector, LookupConnector)
            settings = connector.cache_settings(table)
            cache = LookupCache(settings) if settings.enabled else None
            joiner = LookupJoiner(connector.create_lookup(table), cache)
            _JOINERS[cache_id] = joiner
            while len(_JOINERS) > MAX_JOINERS:
                _JOINERS.pop(next(iter(_JOINERS))).source.close()
        return joiner


@atexit.register
def close_joiners() -> None:
    """Close every lookup connection of this process (at exit; tests call it too)."""
    with _JOINERS_LOCK:
        for joiner in _JOINERS.values():
            joiner.source.close()
        _JOINERS.clear()


# -- the Spark step ----------------------------------------------------------------------


def lookup_join(df: DataFrame, spec: LookupJoin, cache_id: Hashable) -> DataFrame:
    """``df`` with the lookup table's columns appended (named ``spec.outputs``).

    ``cache_id`` picks the per-process joiner (and cache) on executors.
    """
    right_fields = [T.StructField(name, column.spark_type, True)
                    for name, column in zip(spec.outputs, spec.table.columns, strict=True)]
    schema = T.StructType(list(df.schema.fields) + right_fields)
    target = arrow_schema(schema)
    table, key_inputs, keep_unmatched = spec.table, spec.key_inputs, spec.keep_unmatched

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        settle()
        joiner = process_joiner(table, cache_id)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            left, right = joiner.join(batch, key_inputs, keep_unmatched)
            columns = [c.combine_chunks() for c in left.columns + right.columns]
            yield pa.RecordBatch.from_arrays(
                [c if c.type == f.type else c.cast(f.type)
                 for c, f in zip(columns, target, strict=True)], names=target.names)

    return df.mapInArrow(run, schema)


class LookupJoinStep(OperatorStep):
    """Runs a :class:`LookupJoin` each epoch: native input SQL, lookups on executors.

    It keeps no state: its cache belongs to this run (a restarted pipeline
    starts with empty caches, as a moved one would).
    """

    uses_state = False

    def __init__(self, spec: LookupJoin, state: PipelineState, num_key_groups: int) -> None:
        del state, num_key_groups
        self.spec = spec
        self.cache_id = f"{spec.operator_id}:{uuid.uuid4().hex}"

    def run(self, epoch: EpochContext) -> StepOutput:
        frame = lookup_join(epoch.spark.sql(self.spec.input_sql), self.spec, self.cache_id)
        return StepOutput(frame)
