"""The ``redis`` stream source: the entries of one Redis stream, exactly once into Spate.

Offsets are ``{"id": "<ms>-<seq>"}``, the id of the last entry consumed. An
epoch reads the entries with ids in ``(start, end]`` (``XRANGE key (start end``),
so a replayed epoch reads exactly the same entries, and a pipeline resuming from
the offset its state store kept goes on after that entry: every entry reaches
Spate once. ``latestOffset`` picks the end: the stream's last generated id, or
the id of the ``max_entries_per_batch``-th entry after the start. Entries
trimmed (``XTRIM``, ``MAXLEN``) before they are read are lost.

Each entry's field ``value_field`` (default ``value``) holds one record in
``format`` (``json`` or ``raw_string``); other fields are ignored. An entry
without that field, or whose value does not decode, is bad data (``bad_data``:
fail, drop and count in a ``dropped:N`` control row, or dead-letter it with its
entry id, :class:`.dead_letter.BadRecords`). The event time
(``_spate_timestamp``) is the millisecond part of the entry's id.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
import redis
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from spate.engine.connectors import core
from spate.engine.connectors.core.arrow_batches import (
    arrow_schema,
    data_batch,
    timestamps_us,
)
from spate.engine.connectors.core.dead_letter import BadRecords, Letter
from spate.engine.connectors.core.egress import EgressPolicy
from spate.engine.connectors.formats.decoders import Decoded, source_decoder
from spate.engine.connectors.formats.records import (
    DEBEZIUM_JSON,
    FormatSpec,
    check_columns,
    parse_format,
    single_value_columns,
    source_schema,
)
from spate.engine.connectors.redis.client import RedisClient, RedisConnection, read_connection
from spate.engine.python_workers import settle

SOURCE_NAME = "spate_redis_stream"
#: The reader option carrying the connection (its name makes Spark redact its value).
SECRET_OPTION = "spate_redis_secret"
EARLIEST = "earliest"
LATEST = "latest"
#: Entries fetched by one XRANGE call inside a read.
_FETCH_ENTRIES = 10_000
_FIRST_ID = "0-0"

STREAM = core.option("stream", core.SOURCES, "the stream's key", required=True)
SOURCE_OFFSET = core.option("source.offset", core.SOURCES, "where a new pipeline starts: "
                            "`earliest` (the first entry) or `latest` (entries added after it "
                            "starts)",
                            choices=(EARLIEST, LATEST), default=LATEST)
VALUE_FIELD = core.option("value_field", core.SOURCES, "the entry field holding the record",
                          default="value")
MAX_ENTRIES_PER_BATCH = core.option("max_entries_per_batch", core.SOURCES, "entries per epoch at "
                                                                           "most",
                                    default=100_000)
STREAM_BAD_DATA = core.BAD_DATA.described(
    "an entry without `value_field`, or whose value does not decode, fails the pipeline "
    "naming the entry id; `drop` skips and counts it; `dead_letter` also writes it to "
    "`dead_letter.table` ([dead letters](#dead-letters))")


@dataclass(frozen=True)
class StreamSettings:
    """A validated redis stream source."""

    connection: RedisConnection
    stream: str
    start: str
    value_field: str
    spec: FormatSpec
    columns: tuple[core.ColumnDef, ...]
    max_entries_per_batch: int


def read_stream_settings(table: core.TableConfig, options: core.OptionReader) -> StreamSettings:
    """Check every option of a redis source (``type`` already read); raises
    :class:`ConnectorError` naming the option."""
    connection = read_connection(options, table.boundary.egress)
    stream = options.required(STREAM)
    start = options.choice(SOURCE_OFFSET) or LATEST
    value_field = options.string(VALUE_FIELD) or ""
    if not value_field.strip():
        raise core.ConnectorError(f"option '{VALUE_FIELD.name}' must name the entry field holding "
                                  f"the record, e.g. '{VALUE_FIELD.default}'",
                                  option=VALUE_FIELD.name)
    if (options.string(core.FORMAT_OPTION) or "").strip().lower() == DEBEZIUM_JSON:
        raise core.ConnectorError("format 'debezium_json' is not supported yet by redis sources; "
                                  "use 'json' or 'raw_string'", option=core.FORMAT_OPTION.name)
    spec = parse_format(options, "source", records_in=(STREAM,))
    core.check_source_options(options)
    max_entries = options.integer(MAX_ENTRIES_PER_BATCH, minimum=1)
    assert max_entries is not None
    options.finish()
    columns = table.data_columns or (single_value_columns(spec) if spec.single_value else ())
    check_columns(spec, columns, "source")
    if table.metadata:  # declaration order; the default `value` first
        columns = table.columns if table.data_columns else columns + table.columns
    return StreamSettings(connection, stream, start, value_field, spec, columns, max_entries)


def stream_reader_options(table: core.TableConfig, settings: StreamSettings) -> dict[str, str]:
    """The options of the data source reading ``table``."""
    egress = table.boundary.egress
    shipped = {
        "table": table.name,
        "stream": settings.stream,
        "start": settings.start,
        "value_field": settings.value_field,
        "format": settings.spec.to_dict(),
        "max_entries_per_batch": settings.max_entries_per_batch,
        "not_null": [c.name for c in settings.columns
                     if not c.nullable and c.name not in table.metadata],
        "metadata": dict(table.metadata),
        "egress": None if egress is None else egress.to_dict(),
    }
    options = core.source_options(source_schema(settings.spec, settings.columns), shipped)
    options[SECRET_OPTION] = json.dumps(settings.connection.to_dict())
    return options


def has_entries_after(table: core.TableConfig, settings: StreamSettings, offset: dict[str, Any]
                      ) -> bool:
    """Whether an entry was added to the stream after the entry ``offset`` names (the
    stream's last generated id is past it), asked of Redis: the idle pipeline's watcher."""
    client = RedisClient(settings.connection, table.boundary.egress,
                         f"redis source '{table.name}'")
    try:
        info = client.client.xinfo_stream(settings.stream)
    except redis.ResponseError:  # no such key yet: nothing to read
        return False
    except redis.RedisError as error:
        raise client.failure(error) from None
    finally:
        client.close()
    return _id_order(_text(info["last-generated-id"])) > _id_order(str(offset["id"]))


def read_redis_stream(spark: SparkSession, table: core.TableConfig,
                      settings: StreamSettings) -> DataFrame:
    return core.load_stream(spark, SOURCE_NAME, stream_reader_options(table, settings))


class RedisStreamDataSource(core.SpateDataSource):
    """Registered as ``spate_redis_stream``; see :mod:`spate.engine.connectors.redis.source`."""

    source_name = SOURCE_NAME

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        connection = RedisConnection.from_dict(json.loads(self.options[SECRET_OPTION]))
        return RedisStreamReader(self.settings(), connection, schema, self.start_offset())


class RedisStreamReader(DataSourceStreamReader):
    """One reader (partition 0) over one stream, in id ranges."""

    def __init__(self, settings: dict[str, Any], connection: RedisConnection,
                 schema: T.StructType, start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.connection = connection
        self.schema = schema
        self.stream: str = settings["stream"]
        self.max_entries: int = settings["max_entries_per_batch"]
        #: the offset a resumed pipeline starts at (from its state store); None: fresh
        self.start = start
        #: the driver's client, kept between offset look-ups (Spark polls often)
        self._offsets_client: RedisClient | None = None

    def __getstate__(self) -> dict[str, Any]:
        """Readers travel to executors without the driver's connection."""
        return {**self.__dict__, "_offsets_client": None}

    def _client(self) -> RedisClient:
        egress = self.settings["egress"]
        return RedisClient(self.connection,
                           None if egress is None else EgressPolicy.from_dict(egress),
                           f"redis source '{self.settings['table']}'")

    def _driver_client(self) -> RedisClient:
        if self._offsets_client is None:
            self._offsets_client = self._client()
        return self._offsets_client

    def initialOffset(self) -> dict[str, Any]:
        return core.initial_offset(self.start, self._fresh_offset, self.settings["table"])

    def _fresh_offset(self) -> dict[str, Any]:
        if self.settings["start"] == EARLIEST:
            return {"id": _FIRST_ID}
        return {"id": self._last_generated_id()}

    def _last_generated_id(self) -> str:
        """The id of the stream's last entry ever added ("0-0" when it does not exist)."""
        client = self._driver_client()
        try:
            info = client.client.xinfo_stream(self.stream)
        except redis.ResponseError:  # no such key: every future entry is new
            return _FIRST_ID
        except redis.RedisError as error:
            raise client.failure(error) from None
        return _text(info["last-generated-id"])

    def getDefaultReadLimit(self) -> ReadLimit:
        return core.default_limit(self.max_entries)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        count = core.max_rows(limit, self.max_entries)
        if count is None:
            return {"id": max(self._last_generated_id(), start["id"], key=_id_order)}
        client = self._driver_client()
        try:
            entries = _entries(client, self.stream, start["id"], "+", count)
        except redis.RedisError as error:
            raise client.failure(error) from None
        return {"id": _text(entries[-1][0])} if entries else dict(start)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        if _id_order(end["id"]) <= _id_order(start["id"]):
            return []
        return [InputPartition({"start": start["id"], "end": end["id"]})]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        settle()
        reader = _RangeReader(self.settings, self.schema)
        client = self._client()
        try:
            yield from reader.read(client, partition.value["start"], partition.value["end"])
        except redis.RedisError as error:
            raise client.failure(error) from None
        finally:
            client.close()

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to acknowledge: the offsets Spate commits are the whole position."""

    def stop(self) -> None:
        if self._offsets_client is not None:
            self._offsets_client.close()
            self._offsets_client = None


class _RangeReader:
    """Decodes the entries of one id range into Arrow batches."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType) -> None:
        self.table: str = settings["table"]
        self.stream: str = settings["stream"]
        self.field = settings["value_field"].encode("utf-8")
        self.spec = FormatSpec(**settings["format"])
        self.arrow_schema = arrow_schema(schema)
        self.metadata: dict[str, str] = settings.get("metadata") or {}
        decoded = core.decoded_schema(self.arrow_schema, self.metadata)
        self.decoder = source_decoder(decoded, self.spec, settings["not_null"])
        self.bad = BadRecords(self.spec, self.arrow_schema, 0, f"redis source '{self.table}'",
                              f"in stream '{self.stream}' at entry {{position}}",
                              "Fix the record")

    def read(self, client: RedisClient, start: str, end: str) -> Iterator[pa.RecordBatch]:
        pages = _pages(client, self.stream, start, end)
        yield from self.bad.batches(self._decode_page(entries) for entries in pages)

    def _decode_page(self, entries: list[Entry]) -> tuple[pa.RecordBatch | None, list[Letter]]:
        """The data rows of ``entries`` and the dead letters of the bad ones, in id order."""
        batch, bad = self._decode(entries)
        return batch, [(entries[i][1].get(self.field), problem, _text(entries[i][0]))
                       for i, problem in sorted(bad.items())]

    def _decode(self, entries: list[Entry]) -> tuple[pa.RecordBatch | None, dict[int, str]]:
        """The data rows of ``entries`` and the bad ones (by index: what is wrong)."""
        ids = [_text(entry_id) for entry_id, _ in entries]
        values, problems = self._values([fields for _, fields in entries])
        lines = [i for i, value in enumerate(values) if value is not None]
        bad = dict(problems)
        if lines:
            decoded = self._decode_lines([values[i] or b"" for i in lines])
            bad.update((lines[index], problem) for index, problem in decoded.bad)
            good = [lines[i] for i in self._good_lines(decoded, len(lines))]
        else:
            good = []
        if bad and not self.spec.skips_bad:
            return None, bad  # the first fails the read: nothing else to decode
        if not good:
            return None, bad
        millis = np.array([int(ids[i].split("-", 1)[0]) for i in good], dtype=np.int64)
        columns = decoded.columns
        if self.metadata:  # 'id' or 'stream'
            columns = core.merge_physical(self.arrow_schema, columns, {
                column: pa.array([ids[i] for i in good] if key == "id"
                                 else [self.stream] * len(good), pa.string())
                for column, key in self.metadata.items()})
        return data_batch(self.arrow_schema, columns, 0,
                          timestamps_us(millis * 1000)), bad

    def _values(self, entries: list[dict[bytes, bytes]]
                ) -> tuple[list[bytes | None], list[tuple[int, str]]]:
        """Each entry's record on one line (None: bad, with its problem listed)."""
        values: list[bytes | None] = []
        problems: list[tuple[int, str]] = []
        for index, fields in enumerate(entries):
            try:
                values.append(self._record(fields.get(self.field)))
            except ValueError as error:
                problems.append((index, str(error)))
                values.append(None)
        return values, problems

    def _record(self, value: bytes | None) -> bytes:
        """The value to decode; raises ValueError saying why the entry is bad."""
        if value is None:
            raise ValueError(f"the entry has no field '{self.field.decode('utf-8')}'")
        if self.spec.opaque:
            return value  # lines are given by position: a line break is just text
        if not value.strip():
            raise ValueError("the value is empty")
        if b"\n" not in value and b"\r" not in value:
            return value
        # JSON is decoded as lines; in valid JSON a line break can only be whitespace.
        try:
            json.loads(value)
        except ValueError as error:
            raise ValueError(f"not valid JSON: {error}") from None
        return value.replace(b"\r", b" ").replace(b"\n", b" ")

    def _decode_lines(self, values: list[bytes]) -> Decoded:
        lengths = np.array([len(v) for v in values], dtype=np.int64)
        starts = np.zeros(len(values), dtype=np.int64)
        np.cumsum(lengths[:-1] + 1, out=starts[1:])
        buf = np.frombuffer(b"\n".join(values), dtype=np.uint8)
        return self.decoder.decode(buf, starts, lengths)

    @staticmethod
    def _good_lines(decoded: Decoded, count: int) -> list[int]:
        if decoded.lines is not None:
            return [int(i) for i in decoded.lines]
        bad = {index for index, _ in decoded.bad}
        return [i for i in range(count) if i not in bad]


Entry = tuple[bytes, dict[bytes, bytes]]


def _entries(client: RedisClient, stream: str, after: str, end: str, count: int) -> list[Entry]:
    """Up to ``count`` entries with ids in ``(after, end]`` (the client returns bytes)."""
    return cast(list[Entry], client.client.xrange(stream, f"({after}", end, count=count))


def _pages(client: RedisClient, stream: str, start: str, end: str) -> Iterator[list[Entry]]:
    """The entries with ids in ``(start, end]``, in pages of at most :data:`_FETCH_ENTRIES`."""
    cursor = start
    while _id_order(cursor) < _id_order(end):
        entries = _entries(client, stream, cursor, end, _FETCH_ENTRIES)
        if not entries:
            return
        cursor = _text(entries[-1][0])
        yield entries


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _id_order(entry_id: str) -> tuple[int, int]:
    """A stream id as a sortable pair: ``"1700000000000-3"`` -> ``(1700000000000, 3)``."""
    millis, _, sequence = entry_id.partition("-")
    return int(millis), int(sequence or 0)
