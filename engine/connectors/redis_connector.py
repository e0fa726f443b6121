"""The ``redis`` connector: lookup tables, a stream source and sinks, by the table's role.

A ``CREATE TEMPORARY TABLE`` is a lookup table (:mod:`.redis_lookup`); a
``CREATE TABLE`` with ``type = 'source'`` reads a Redis stream
(:mod:`.redis_stream`), one with ``type = 'sink'`` writes a ``target``
(:mod:`.redis_sink`). All three connect alike (:mod:`.redis_connection`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors.base import (
    SINK,
    SOURCE,
    ColumnDef,
    ConnectorError,
    Sink,
    TableConfig,
    register,
)
from spate.engine.connectors.boundary import Boundary
from spate.engine.connectors.lookup import LOOKUP, LookupConnector, LookupSource
from spate.engine.connectors.metadata import (
    DEAD_LETTER,
    FORMAT,
    FORMAT_BINARY,
    FORMAT_SOURCE,
    LOOKUP_ROLES,
    LOOKUP_TABLE,
    SINKS,
    SOURCE_TIME,
    SOURCES,
    OptionSpec,
    specs,
)
from spate.engine.connectors.options import OptionReader
from spate.engine.connectors.redis_connection import RedisClient, read_connection
from spate.engine.connectors.redis_lookup import (
    RedisLookup,
    RedisLookupSettings,
    read_settings,
)
from spate.engine.connectors.redis_sink import RedisSink, read_sink_settings
from spate.engine.connectors.redis_stream import (
    StreamSettings,
    has_entries_after,
    read_redis_stream,
    read_stream_settings,
)

ALL_ROLES = frozenset({LOOKUP, SOURCE, SINK})


def _merged(*groups: tuple[OptionSpec, ...]) -> tuple[OptionSpec, ...]:
    """One spec per option name, accepted by the union of its groups' roles."""
    roles: dict[str, frozenset[str]] = {}
    for group in groups:
        for spec in group:
            roles[spec.name] = roles.get(spec.name, frozenset()) | spec.roles
    return tuple(OptionSpec(name, accepted) for name, accepted in roles.items())


@register
class RedisConnector(LookupConnector):
    """``redis``: see the module docstring and docs/sql/connectors.md."""

    name = "redis"
    roles = ALL_ROLES
    options = _merged(
        LOOKUP_TABLE, specs(ALL_ROLES, "type", "address", "username", "password",
                            "connection_type"),
        specs(LOOKUP_ROLES, "key.prefix", "key.separator", "value.type", "format",
              "json.timestamp_format", "json.decimal_encoding", "json.unstructured",
              "framing"),
        FORMAT, FORMAT_SOURCE, FORMAT_BINARY, DEAD_LETTER, SOURCE_TIME,
        specs(SOURCES, "stream", "source.offset", "value_field", "max_entries_per_batch"),
        specs(SINKS, "target", "target.key_prefix", "target.key_column",
              "target.field_column"))

    def metadata_fields(self, role: str) -> Mapping[str, tuple[T.DataType, ...]]:
        """A stream source's entry id and stream name."""
        if role != SOURCE:
            return {}
        return {"id": (T.StringType(),), "stream": (T.StringType(),)}

    def read_settings(self, table: TableConfig) -> RedisLookupSettings:
        return read_settings(table)

    def validate(self, table: TableConfig) -> tuple[ColumnDef, ...]:
        if table.role == SOURCE:
            return self.source_settings(table).columns
        if table.role == SINK:
            read_sink_settings(table, _stream_options(table))
            return table.columns
        return super().validate(table)

    def create_lookup(self, table: TableConfig) -> LookupSource:
        return RedisLookup(table, read_settings(table))

    def source_settings(self, table: TableConfig) -> StreamSettings:
        """The checked settings of a source table."""
        return read_stream_settings(table, _stream_options(table))

    def batch_limit(self, table: TableConfig) -> int | None:
        return self.source_settings(table).max_entries_per_batch if table.role == SOURCE else None

    def has_input_after(self, table: TableConfig, parallelism: int, offset: Any) -> bool | None:
        if table.role != SOURCE:
            return None
        return has_entries_after(table, self.source_settings(table), offset)

    def read_stream(self, spark: SparkSession, table: TableConfig, parallelism: int) -> DataFrame:
        if table.role != SOURCE:
            return super().read_stream(spark, table, parallelism)
        # One reader whatever the parallelism: a stream is read in id order.
        return read_redis_stream(spark, table, self.source_settings(table))

    def create_sink(self, table: TableConfig, schema: T.StructType) -> Sink:
        if table.role != SINK:
            return super().create_sink(table, schema)
        return RedisSink(table, read_sink_settings(table, _stream_options(table)), schema)

    def reach(self, options: Mapping[str, str], role: str | None, boundary: Boundary) -> str:
        """Connect and PING: ``Redis 7.2.4 at host:6379`` (the address alone is checked,
        so a connection profile without the table's other options can be tested)."""
        table = TableConfig(name="test", connector=self.name, role=role or LOOKUP,
                            options=options, columns=(), boundary=boundary)
        connection = read_connection(OptionReader(table), boundary.egress)
        client = RedisClient(connection, boundary.egress, "redis")
        try:
            return client.server()
        finally:
            client.close()


def _stream_options(table: TableConfig) -> OptionReader:
    """The options of a source or sink, its ``type`` checked against its role."""
    options = OptionReader(table)
    declared = options.string("type")
    if declared is None:
        raise ConnectorError(
            f"table '{table.name}' is used as a {table.role}: give it type = '{table.role}' "
            f"(a lookup table: declare '{table.name}' with CREATE TEMPORARY TABLE)")
    if declared.strip().lower() != table.role:
        raise ConnectorError(f"table '{table.name}' is used as a {table.role} but is declared "
                             f"as a {declared.strip().lower()}", option="type")
    return options
