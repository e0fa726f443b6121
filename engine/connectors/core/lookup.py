"""The lookup-table contract (docs/sql/joins.md): connectors that fetch rows by primary key.

A lookup table is declared with ``CREATE TEMPORARY TABLE ... WITH (connector =
...)``; it is never read as a stream. A :class:`LookupConnector` validates its
options like any connector and opens a :class:`LookupSource` on an executor,
which fetches the rows of many keys in one round trip and returns them as Arrow.
The options shared by every lookup connector (``type``, ``lookup.cache.*``) are
read here.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T

from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.core.base import LOOKUP as LOOKUP
from spate.engine.connectors.core.base import ColumnDef, Connector, ConnectorError, TableConfig
from spate.engine.connectors.core.metadata import (
    CACHE_MAX_BYTES,
    CACHE_TTL,
    LOOKUP_TYPE,
    OptionSpec,
)
from spate.engine.connectors.core.options import OptionReader

#: Cache bound when only ``lookup.cache.ttl`` is given.
DEFAULT_CACHE_MAX_BYTES = 16 * 1024 * 1024

#: A value of one key: the primary-key columns' values, in declaration order.
Key = tuple[Any, ...]

_INTERVAL_LITERAL = re.compile(r"^\s*INTERVAL\s+'([^']*)'\s*(\w*)\s*$", re.IGNORECASE)
_CALENDAR = re.compile(r"\b(months?|mons?|years?|y)\b", re.IGNORECASE)


@dataclass(frozen=True)
class CacheSettings:
    """The per-process cache of one lookup table; ``max_bytes == 0`` disables it."""

    max_bytes: int = 0
    #: seconds an entry lives after it was fetched; None: until evicted for space
    ttl_s: float | None = None

    @property
    def enabled(self) -> bool:
        return self.max_bytes > 0


class LookupSource(ABC):
    """An open connection to a lookup table's backing store (one per executor process)."""

    def __init__(self, table: TableConfig) -> None:
        self.table = table
        self.key_columns = key_columns(table)
        self.value_columns = tuple(c for c in table.columns if c not in self.key_columns)
        #: the Arrow schema of :meth:`fetch` results: every column, in declaration order
        self.schema = arrow_schema(T.StructType(
            [T.StructField(c.name, c.spark_type, True) for c in table.columns]))

    @abstractmethod
    def fetch(self, keys: Sequence[Key]) -> pa.Table:
        """The rows of the distinct, non-NULL ``keys`` that exist, in one round trip.

        The result has :attr:`schema`; keys with no row are simply absent.
        """

    @abstractmethod
    def close(self) -> None:
        """Release the connection."""

    def rows_table(self, keys: Sequence[Key], values: list[pa.Array]) -> pa.Table:
        """A :meth:`fetch` result from found ``keys`` and their value columns (in order)."""
        by_name = {c.name: values[i] for i, c in enumerate(self.value_columns)}
        for i, column in enumerate(self.key_columns):
            by_name[column.name] = pa.array([k[i] for k in keys],
                                            self.schema.field(column.name).type)
        return pa.table([by_name[f.name] for f in self.schema], schema=self.schema)


class LookupConnector(Connector, ABC):
    """A connector whose tables are lookup tables (the right side of a lookup join)."""

    roles = frozenset({LOOKUP})

    @abstractmethod
    def read_settings(self, table: TableConfig) -> Any:
        """Check every option of ``table``; return what opening it needs."""

    def validate(self, table: TableConfig) -> tuple[ColumnDef, ...]:
        self.read_settings(table)
        return table.columns

    @abstractmethod
    def create_lookup(self, table: TableConfig) -> LookupSource:
        """Open the table's store; runs on executors, ``table`` as validated."""

    def cache_settings(self, table: TableConfig) -> CacheSettings:
        """The cache options of a validated table."""
        return read_cache_settings(OptionReader(table))


def check_lookup_table(options: OptionReader) -> None:
    """The rules every lookup table follows: role, declared columns and a PRIMARY KEY."""
    table = options.table
    declared = options.string(LOOKUP_TYPE)
    if declared is not None and declared.strip().lower() != LOOKUP:
        raise ConnectorError(f"connector '{table.connector}' can only be a lookup table, "
                             f"not a {declared.strip().lower()}", option=LOOKUP_TYPE.name)
    if table.role != LOOKUP:
        raise ConnectorError(f"connector '{table.connector}' serves lookup tables only: "
                             f"declare '{table.name}' with CREATE TEMPORARY TABLE")
    if not table.columns:
        raise ConnectorError(f"lookup table '{table.name}' needs its columns declared, e.g. "
                             "(id TEXT PRIMARY KEY, name TEXT)")
    if not table.primary_key:
        raise ConnectorError(f"lookup table '{table.name}' needs a PRIMARY KEY: lookups "
                             "fetch rows by it")
    for column in key_columns(table):
        if isinstance(column.spark_type, T.ArrayType | T.StructType | T.MapType):
            raise ConnectorError(f"PRIMARY KEY column '{column.name}' is "
                                 f"{column.spark_type.simpleString()}; a lookup key is made of "
                                 "scalar columns")
    if len(table.primary_key) == len(table.columns):
        raise ConnectorError(f"lookup table '{table.name}' has only PRIMARY KEY columns; "
                             "declare the columns a lookup returns too")


def read_cache_settings(options: OptionReader) -> CacheSettings:
    """``lookup.cache.max_bytes`` (bytes, 0 disables) and ``lookup.cache.ttl`` (a duration).

    A TTL alone caches up to :data:`DEFAULT_CACHE_MAX_BYTES`; neither option: no cache.
    """
    ttl_s = _duration_s(options, CACHE_TTL)
    default = DEFAULT_CACHE_MAX_BYTES if ttl_s is not None else 0
    max_bytes = options.integer(CACHE_MAX_BYTES, default, minimum=0)
    assert max_bytes is not None
    if max_bytes == 0 and ttl_s is not None:
        raise ConnectorError(f"option '{CACHE_TTL.name}' needs a cache: remove it or set "
                             f"'{CACHE_MAX_BYTES.name}' above 0", option=CACHE_TTL.name)
    return CacheSettings(max_bytes=max_bytes, ttl_s=ttl_s)


def _duration_s(options: OptionReader, spec: OptionSpec) -> float | None:
    """Seconds of a duration option: ``INTERVAL '5' SECOND``, ``'5 seconds'``, ``'1m 30s'``."""
    key = spec.name
    value = options.string(spec)
    if value is None:
        return None
    text = value.strip()
    literal = _INTERVAL_LITERAL.match(text)
    if literal is not None:
        text = f"{literal.group(1)} {literal.group(2)}".strip()
    problem = f"option '{key}' must be a duration such as '5 minutes' or INTERVAL '5' MINUTE"
    if not re.search(r"[A-Za-z:]", text) or _CALENDAR.search(text):
        raise ConnectorError(f"{problem}, not '{value}'", option=key)
    import pandas as pd  # its duration parser, imported when a duration option is given

    try:
        seconds = pd.Timedelta(text.lower()).total_seconds()
    except ValueError:
        raise ConnectorError(f"{problem}, not '{value}'", option=key) from None
    if seconds <= 0:
        raise ConnectorError(f"option '{key}' must be positive, not '{value}'", option=key)
    return float(seconds)


def key_columns(table: TableConfig) -> tuple[ColumnDef, ...]:
    """The PRIMARY KEY columns of a lookup table, in declaration order."""
    keys = set(table.primary_key)
    return tuple(c for c in table.columns if c.name in keys)
