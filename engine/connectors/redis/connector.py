"""The ``redis`` connector: lookup tables, a stream source and sinks, by the table's role.

A ``CREATE TEMPORARY TABLE`` is a lookup table (:mod:`.lookup`); a
``CREATE TABLE`` with ``type = 'source'`` reads a Redis stream
(:mod:`.source`), one with ``type = 'sink'`` writes a ``target``
(:mod:`.sink`). All three connect alike (:mod:`.client`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.core.lookup import LOOKUP, LookupConnector, LookupSource
from spate.engine.connectors.redis.client import RedisClient, read_connection
from spate.engine.connectors.redis.destination import (
    ADDRESS,
    ALL_ROLES,
    CONNECTION_TYPE,
    PASSWORD,
    USERNAME,
)
from spate.engine.connectors.redis.lookup import (
    KEY_PREFIX,
    KEY_SEPARATOR,
    VALUE_TYPE,
    RedisLookup,
    RedisLookupSettings,
    read_settings,
)
from spate.engine.connectors.redis.sink import (
    TARGET,
    TARGET_FIELD_COLUMN,
    TARGET_KEY_COLUMN,
    TARGET_KEY_PREFIX,
    RedisSink,
    read_sink_settings,
)
from spate.engine.connectors.redis.source import (
    MAX_ENTRIES_PER_BATCH,
    SOURCE_OFFSET,
    STREAM,
    STREAM_BAD_DATA,
    VALUE_FIELD,
    StreamSettings,
    has_entries_after,
    read_redis_stream,
    read_stream_settings,
)

REDIS_TYPE = core.TYPE_OPTION.described(
    "`source` (a stream source) or `sink`; a lookup table (`CREATE TEMPORARY TABLE`) takes "
    "none, or `lookup`", roles=ALL_ROLES, choices=(LOOKUP, core.SOURCE, core.SINK),
    required_when="sources and sinks")
REDIS_FORMAT = core.FORMAT_OPTION.described(
    "sources and sinks: `json`, `avro`, `protobuf`, `raw_string` or `raw_bytes` "
    "(`debezium_json` is not supported yet); lookup tables: `json` or `raw_string`, with "
    "`value.type = 'string'` only ([formats](#formats))", roles=ALL_ROLES, required=False,
    required_when="except lookup tables of hashes")


def _merged(*groups: tuple[core.OptionSpec, ...]) -> tuple[core.OptionSpec, ...]:
    """Each option once, as its first declaration says, accepted by the union of the roles
    of all its declarations (a format option serves lookup tables as well as streams)."""
    first: dict[str, core.OptionSpec] = {}
    roles: dict[str, frozenset[str]] = {}
    for group in groups:
        for spec in group:
            first.setdefault(spec.name, spec)
            roles[spec.name] = roles.get(spec.name, frozenset()) | spec.roles
    return tuple(spec.for_roles(roles[name]) for name, spec in first.items())


@core.register
class RedisConnector(LookupConnector):
    """``redis``: see the module docstring and docs/sql/connectors.md."""

    name = "redis"
    roles = ALL_ROLES
    options = _merged(
        (REDIS_TYPE, ADDRESS, USERNAME, PASSWORD, CONNECTION_TYPE, REDIS_FORMAT),
        (KEY_PREFIX, KEY_SEPARATOR, VALUE_TYPE),
        (STREAM, SOURCE_OFFSET, VALUE_FIELD, MAX_ENTRIES_PER_BATCH, STREAM_BAD_DATA),
        (TARGET, TARGET_KEY_PREFIX, TARGET_KEY_COLUMN, TARGET_FIELD_COLUMN),
        core.LOOKUP_TABLE, core.FORMAT,
        tuple(spec.for_roles(core.LOOKUP_ROLES) for spec in core.FORMAT),
        core.FORMAT_SOURCE, core.FORMAT_BINARY, core.DEAD_LETTER, core.SOURCE_TIME)
    examples = {
        LOOKUP: ({"address": "redis://h", "format": "json"},),
        core.SOURCE: ({"type": "source", "address": "redis://h", "stream": "s", "format": "json",
                       "json.unstructured": "true"},),
        core.SINK: ({"type": "sink", "address": "redis://h", "format": "json", "target": "hash",
                     "target.key_prefix": "h", "target.field_column": "name"},)}

    def metadata_fields(self, role: str) -> Mapping[str, tuple[T.DataType, ...]]:
        """A stream source's entry id and stream name."""
        if role != core.SOURCE:
            return {}
        return {"id": (T.StringType(),), "stream": (T.StringType(),)}

    def read_settings(self, table: core.TableConfig) -> RedisLookupSettings:
        return read_settings(table)

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        if table.role == core.SOURCE:
            return self.source_settings(table).columns
        if table.role == core.SINK:
            read_sink_settings(table, _stream_options(table))
            return table.columns
        return super().validate(table)

    def create_lookup(self, table: core.TableConfig) -> LookupSource:
        return RedisLookup(table, read_settings(table))

    def source_settings(self, table: core.TableConfig) -> StreamSettings:
        """The checked settings of a source table."""
        return read_stream_settings(table, _stream_options(table))

    def batch_limit(self, table: core.TableConfig) -> int | None:
        if table.role != core.SOURCE:
            return None
        return self.source_settings(table).max_entries_per_batch

    def has_input_after(self, table: core.TableConfig, parallelism: int,
                        offset: Any) -> bool | None:
        if table.role != core.SOURCE:
            return None
        return has_entries_after(table, self.source_settings(table), offset)

    def read_stream(self, spark: SparkSession, table: core.TableConfig,
                    parallelism: int) -> DataFrame:
        if table.role != core.SOURCE:
            return super().read_stream(spark, table, parallelism)
        # One reader whatever the parallelism: a stream is read in id order.
        return read_redis_stream(spark, table, self.source_settings(table))

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        if table.role != core.SINK:
            return super().create_sink(table, schema)
        return RedisSink(table, read_sink_settings(table, _stream_options(table)), schema)

    def reach(self, options: Mapping[str, str], role: str | None, boundary: core.Boundary) -> str:
        """Connect and PING: ``Redis 7.2.4 at host:6379`` (the address alone is checked,
        so a connection profile without the table's other options can be tested)."""
        table = core.TableConfig(name="test", connector=self.name, role=role or LOOKUP,
                                 options=options, columns=(), boundary=boundary)
        connection = read_connection(core.OptionReader(table), boundary.egress)
        client = RedisClient(connection, boundary.egress, "redis")
        try:
            return client.server()
        finally:
            client.close()


def _stream_options(table: core.TableConfig) -> core.OptionReader:
    """The options of a source or sink, its ``type`` checked against its role."""
    options = core.OptionReader(table)
    declared = options.string(REDIS_TYPE)
    if declared is None:
        raise core.ConnectorError(
            f"table '{table.name}' is used as a {table.role}: give it {REDIS_TYPE.name} = "
            f"'{table.role}' (a lookup table: declare '{table.name}' with CREATE TEMPORARY "
            "TABLE)")
    if declared.strip().lower() != table.role:
        raise core.ConnectorError(f"table '{table.name}' is used as a {table.role} but is declared "
                                  f"as a {declared.strip().lower()}", option=REDIS_TYPE.name)
    return options
