"""The ``redis`` sinks: each row written as one record (``format``) into Redis.

``target`` picks the Redis type; a row's key is ``target.key_prefix`` followed
by the value of ``target.key_column`` (if given). Delivery, per target:

- ``string``: ``SET key record``; ``hash``: ``HSET key <target.field_column
  value> record``. Idempotent by nature: a replayed epoch writes the same values
  again (exactly-once results). Written by the Spark tasks, each its own rows
  over a connection of its own, pipelined, one round trip per chunk of
  :data:`CHUNK_ROWS` rows, so no row passes through the driver. Within one
  task the last row of a key or field wins; a keyed query's rows of one key
  come from one task (rows of one key in two tasks land in either order).
- ``list`` (``RPUSH``), ``stream`` (``XADD`` of one field ``value`` with the
  explicit id ``<epoch>-<n>``, ``n`` counting the epoch's rows from 1) and
  ``pubsub`` (``PUBLISH`` to the key as channel): each epoch is one
  ``MULTI``/``EXEC`` transaction that also stores the epoch in the marker key
  ``<target.key_prefix>__spate_epoch:<tenant>/<pipeline>`` (the writing pipeline's
  own), watched first, written from the driver. An epoch at or below the
  marker was written already and is skipped, so a replay neither duplicates
  nor loses an entry (exactly-once), and the stream ids of an epoch are
  refused by Redis if written twice. Pub/sub messages reach only the
  subscribers connected at the time (at-most-once for them) and are never
  published twice.

The marker committed with an epoch is ``{"epoch": n}``; a pipeline started
afresh (``open(None)``) deletes the Redis marker key, so its epochs are written
from the first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import redis
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.core.egress import EgressPolicy
from spate.engine.connectors.core.executor_writes import write_partitions
from spate.engine.connectors.formats.records import (
    DEBEZIUM_JSON,
    FormatSpec,
    check_columns,
    check_sink_schema,
    parse_format,
    record_column,
)
from spate.engine.connectors.redis.client import RedisClient, RedisConnection, read_connection

log = logging.getLogger(__name__)

STRING = "string"
LIST = "list"
HASH = "hash"
STREAM = "stream"
PUBSUB = "pubsub"
TARGETS = (STRING, LIST, HASH, STREAM, PUBSUB)
#: Targets written in one transaction per epoch, guarded by the marker key.
TRANSACTIONAL = frozenset({LIST, STREAM, PUBSUB})
#: Rows per pipelined round trip for the idempotent targets.
CHUNK_ROWS = 5_000
MARKER_SUFFIX = "__spate_epoch"
#: Arroyo's options Spate does not implement yet.
_NOT_YET = ("target.ttl_secs", "target.max_length", "target.operation",
            "cluster.addresses", "sink.max_push_keys", "sink.flush_interval_millis")

TARGET = core.option("target", core.SINKS, "`string`, `list`, `hash`, `stream` or `pubsub`",
                     required=True, choices=TARGETS)
TARGET_KEY_PREFIX = core.option("target.key_prefix", core.SINKS, "the key, or the start of every "
                                "key (the channel for `pubsub`)", required=True)
TARGET_KEY_COLUMN = core.option("target.key_column", core.SINKS, "a column whose value ends each "
                                "row's key")
TARGET_FIELD_COLUMN = core.option("target.field_column", core.SINKS, "a column whose value names "
                                  "the row's hash field", required_when="`hash` only")


@dataclass(frozen=True)
class SinkSettings:
    """A validated redis sink."""

    connection: RedisConnection
    target: str
    key_prefix: str
    key_column: str | None
    field_column: str | None
    spec: FormatSpec

    @property
    def marker_key(self) -> str:
        return self.key_prefix + MARKER_SUFFIX


def read_sink_settings(table: core.TableConfig, options: core.OptionReader) -> SinkSettings:
    """Check every option of a redis sink (``type`` already read); raises
    :class:`ConnectorError` naming the option."""
    connection = read_connection(options, table.boundary.egress)
    for key in _NOT_YET:
        if key in options:
            raise core.ConnectorError(f"option '{key}' is not supported yet by redis sinks; "
                                      "remove it", option=key, at_key=True)
    target = options.choice(TARGET)
    if target is None:
        raise core.ConnectorError(f"connector 'redis' needs option '{TARGET.name}' for a sink: "
                                  "'string', 'list', 'hash', 'stream' or 'pubsub'",
                                  option=TARGET.name)
    key_prefix = options.required(TARGET_KEY_PREFIX)
    key_column = _column_option(options, table, TARGET_KEY_COLUMN)
    field_column = _column_option(options, table, TARGET_FIELD_COLUMN)
    if target == HASH and field_column is None:
        raise core.ConnectorError(f"a redis hash sink needs option '{TARGET_FIELD_COLUMN.name}': "
                                  "the column whose value names each row's hash field",
                                  option=TARGET_FIELD_COLUMN.name)
    if target != HASH and field_column is not None:
        raise core.ConnectorError(f"option '{TARGET_FIELD_COLUMN.name}' applies to target 'hash' "
                                  "only", option=TARGET_FIELD_COLUMN.name, at_key=True)
    core.reject_source_options(options)
    spec = parse_format(options, "sink")
    if spec.kind == DEBEZIUM_JSON:
        raise core.ConnectorError("format 'debezium_json' is not supported yet by redis sinks; "
                                  "use 'json' or 'raw_string'", option=core.FORMAT_OPTION.name)
    options.finish()
    check_columns(spec, table.columns, "sink")
    return SinkSettings(connection, target, key_prefix, key_column, field_column, spec)


def _column_option(options: core.OptionReader, table: core.TableConfig,
                   spec: core.OptionSpec) -> str | None:
    """An option naming a column of the sink (checked when columns are declared)."""
    value = options.string(spec)
    if value is None:
        return None
    name = value.strip().lower()
    declared = [c.name for c in table.columns]
    if not name or (declared and name not in declared):
        raise core.ConnectorError(f"option '{spec.name}' must name a column of '{table.name}' "
                                  f"({', '.join(declared)}), not '{value}'", option=spec.name)
    return name


class RedisSink(core.Sink):
    """Writes each epoch's rows to Redis; see the module docstring for the guarantees."""

    def __init__(self, table: core.TableConfig, settings: SinkSettings,
                 schema: T.StructType) -> None:
        check_sink_schema(settings.spec, schema)
        for spec, column in ((TARGET_KEY_COLUMN, settings.key_column),
                             (TARGET_FIELD_COLUMN, settings.field_column)):
            if column is not None and column not in schema.fieldNames():
                raise core.ConnectorError(f"option '{spec.name}' names column '{column}', which "
                                          f"the rows written to '{table.name}' do not have",
                                          option=spec.name)
        self.table = table
        self.settings = settings
        self.egress: EgressPolicy | None = table.boundary.egress
        self._client: RedisClient | None = None

    def _open_client(self) -> RedisClient:
        if self._client is None:
            self._client = RedisClient(self.settings.connection, self.egress,
                                       f"redis sink '{self.table.name}'")
        return self._client

    def _marker_key(self) -> str:
        """The epoch marker of this pipeline's writes (two pipelines writing one prefix
        keep one each: neither skips the other's epochs)."""
        key = self.settings.marker_key
        return key if self.pipeline is None else f"{key}:{self.pipeline}"

    def open(self, marker: Any | None) -> None:
        client = self._open_client()
        if marker is None and self.settings.target in TRANSACTIONAL:
            try:  # a fresh pipeline: its epochs start again from the first
                client.client.delete(self._marker_key())
            except redis.RedisError as error:
                raise client.failure(error) from None

    def write_epoch(self, epoch: int, df: DataFrame) -> dict[str, int]:
        keyed = self._keyed(df)
        if self.settings.target not in TRANSACTIONAL:  # idempotent: written by the tasks
            writer = _TaskWriter(self.table.name, self.settings, self.egress)
            reports = write_partitions(keyed, writer)  # a task's ConnectorError names it
            self.epoch_bytes = sum(int(report["bytes"]) for report in reports)
            return {"epoch": epoch}
        rows = epoch_rows(keyed.toArrow(), self.settings, self.table.name)
        self.epoch_bytes = sum(len(r) for r in rows["record"])
        client = self._open_client()
        try:
            self._write_transaction(client, epoch, rows)
        except redis.RedisError as error:
            raise client.failure(error) from None
        return {"epoch": epoch}

    def _keyed(self, df: DataFrame) -> DataFrame:
        """The epoch's records with their keys (and hash fields)."""
        settings = self.settings
        key = F.lit(settings.key_prefix)
        if settings.key_column is not None:
            key = F.concat(key, F.col(f"`{settings.key_column}`").cast("string"))
        columns = [key.alias("key"), record_column(df, settings.spec).alias("record")]
        if settings.field_column is not None:
            columns.append(F.col(f"`{settings.field_column}`").cast("string").alias("field"))
        return df.select(*columns)

    def _write_transaction(self, client: RedisClient, epoch: int,
                           rows: dict[str, list[str]]) -> None:
        """The epoch in one MULTI/EXEC with its marker, unless the marker says it is done."""
        marker_key = self._marker_key()
        with client.client.pipeline(transaction=True) as pipe:
            pipe.watch(marker_key)  # type: ignore[no-untyped-call]
            done = pipe.get(marker_key)
            if done is not None and int(done) >= epoch:
                log.info("epoch already in Redis", extra={"table": self.table.name,
                                                          "epoch": epoch})
                return
            pipe.multi()
            self._queue(pipe, epoch, rows)
            pipe.set(marker_key, epoch)
            pipe.execute()  # WatchError if another writer moved the marker meanwhile

    def _queue(self, pipe: redis.client.Pipeline, epoch: int,
               rows: dict[str, list[str]]) -> None:
        target = self.settings.target
        sequence: dict[str, int] = {}
        for key, record in zip(rows["key"], rows["record"], strict=True):
            if target == LIST:
                pipe.rpush(key, record)
            elif target == PUBSUB:
                pipe.publish(key, record)
            else:  # stream: ids <epoch>-<n>, n counting from 1 per stream within the epoch
                n = sequence.get(key, 0) + 1
                sequence[key] = n
                pipe.xadd(key, {"value": record}, id=f"{epoch}-{n}")

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def epoch_rows(table: pa.Table, settings: SinkSettings, name: str) -> dict[str, list[str]]:
    """Keyed records (:meth:`RedisSink._keyed`) as lists; a NULL key or field fails."""
    rows = {column: table.column(column).to_pylist() for column in table.column_names}
    for part, option, column in (("key", TARGET_KEY_COLUMN.name, settings.key_column),
                                 ("field", TARGET_FIELD_COLUMN.name, settings.field_column)):
        if None in rows.get(part, ()):
            raise core.ConnectorError(f"redis sink '{name}': a row has NULL in column "
                                      f"'{column}' ({option}), so it has no Redis {part}",
                                      option=option)
    rows["record"] = [r or "" for r in rows["record"]]  # raw_string NULL: empty
    return rows


@dataclass(frozen=True)
class _TaskWriter:
    """SET / HSET of one task's rows, idempotent: pipelined without a transaction,
    chunk by chunk (picklable: it runs in the tasks)."""

    table: str
    settings: SinkSettings
    egress: EgressPolicy | None

    def __call__(self, partition: int, rows: pa.Table) -> list[dict[str, Any]]:
        del partition  # a row's key says where it goes
        written = epoch_rows(rows, self.settings, self.table)
        client = RedisClient(self.settings.connection, self.egress,
                             f"redis sink '{self.table}'")
        try:
            keys, records = written["key"], written["record"]
            fields = written.get("field")
            for first in range(0, len(keys), CHUNK_ROWS):
                pipe = client.client.pipeline(transaction=False)
                for i in range(first, min(first + CHUNK_ROWS, len(keys))):
                    if fields is None:
                        pipe.set(keys[i], records[i])
                    else:
                        pipe.hset(keys[i], fields[i], records[i])
                pipe.execute()
        except redis.RedisError as error:
            raise client.failure(error) from None
        finally:
            client.close()
        return [{"bytes": sum(len(r) for r in records)}]
