"""The ``filesystem`` source as a Python streaming data source: files as offsets.

Files are taken in ``(mtime, name)`` order. An offset is a high-water mark:
``{"mtime": ns, "names": [...], "files": n, "bytes": b, "eof": bool}`` says
every file modified before ``mtime``, and the ``names`` modified exactly at it,
were read (``files`` and ``bytes`` count them, for metering). It stays small
whatever the number of files: only names sharing the last timestamp are kept.
A batch's files are those done at its end offset and not at its start, found
again by listing, so Spark replays a batch identically as long as files are
not modified once written (a sink that publishes by rename, as Spate's does).

A ``one_shot`` source (the default) ends once a listing finds nothing new: the
batch reaching that carries the ``eof`` control row. A ``continuous`` one lists
the directory (or prefix) again every ``source.poll_interval``. The batch's
files are dealt to the readers round robin.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from spate.engine.connectors import core
from spate.engine.connectors.core.arrow_batches import arrow_schema, control_batch, data_batch
from spate.engine.connectors.filesystem.file_formats import FileDecoder
from spate.engine.connectors.filesystem.object_store import FileEntry, Store, store_from_settings
from spate.engine.connectors.filesystem.spark_parquet import split_files
from spate.engine.connectors.formats.records import FormatSpec
from spate.engine.python_workers import settle

log = logging.getLogger(__name__)

SOURCE_NAME = "spate_filesystem"
#: The reader option carrying the S3 secrets apart from the settings (a name
#: ``spark.redaction.regex`` matches wherever Spark prints options).
SECRET_OPTION = "spate_filesystem_secret"
FRESH = {"mtime": -1, "names": [], "files": 0, "bytes": 0, "eof": False}


def done(entry: FileEntry, offset: dict[str, Any]) -> bool:
    """Whether ``offset`` says ``entry`` was read."""
    mark = int(offset["mtime"])
    return entry.mtime_ns < mark or (entry.mtime_ns == mark and entry.name in offset["names"])


def unread(entries: list[FileEntry], offset: dict[str, Any]) -> bool:
    """Whether some listed file is not read at ``offset`` (the next listing reads it)."""
    return any(not done(entry, offset) for entry in entries)


def advance(start: dict[str, Any], entries: list[FileEntry], most: int,
            bounded: bool) -> dict[str, Any]:
    """The offset after reading up to ``most`` files not read at ``start``."""
    fresh = sorted((e for e in entries if not done(e, start)),
                   key=lambda e: (e.mtime_ns, e.name))
    taken = fresh[:most]
    if not taken:
        return {**start, "eof": bounded}
    mark = taken[-1].mtime_ns
    names = [e.name for e in taken if e.mtime_ns == mark]
    if mark == int(start["mtime"]):
        names = sorted(set(start["names"]) | set(names))
    return {"mtime": mark, "names": sorted(names), "files": int(start["files"]) + len(taken),
            "bytes": int(start["bytes"]) + sum(e.size for e in taken),
            "eof": bounded and len(taken) == len(fresh)}


def between(entries: list[FileEntry], start: dict[str, Any], end: dict[str, Any]
            ) -> list[FileEntry]:
    """The files a batch from ``start`` to ``end`` reads, in order."""
    return sorted((e for e in entries if done(e, end) and not done(e, start)),
                  key=lambda e: (e.mtime_ns, e.name))


class FilesystemDataSource(core.SpateDataSource):
    """Registered as ``spate_filesystem``; see :mod:`.connector`."""

    source_name = SOURCE_NAME

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        settings = self.settings()
        if "s3" in settings["store"]:
            settings["store"]["s3"] |= json.loads(self.options[SECRET_OPTION])
        return FilesystemStreamReader(settings, schema, self.start_offset())


def _store(settings: dict[str, Any]) -> Store:
    return store_from_settings(settings["store"], settings["shown_path"],
                               core.Boundary.from_dict(settings["boundary"]))


class FilesystemStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Lists on the driver; reads the files of a batch on the executors."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.schema = schema
        self.start = start
        self.bounded: bool = settings["bounded"]
        self.readers: int = settings["readers"]
        self.poll_s: float = settings["poll_interval_s"]
        self._store: Store | None = None
        self._listed_at = -float("inf")
        self._last: dict[str, Any] | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = _store(self.settings)
        return self._store

    def initialOffset(self) -> dict[str, Any]:
        return core.initial_offset(self.start, lambda: dict(FRESH), self.settings["table"])

    def prepareForTriggerAvailableNow(self) -> None:
        """Whatever a listing finds is 'available now'."""

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        del limit
        if start["eof"]:
            return start
        now = time.monotonic()
        if not self.bounded and self._last == start and now - self._listed_at < self.poll_s:
            return start
        self._listed_at, self._last = now, start
        end = advance(start, self.store.list(), self.settings["max_files_per_batch"],
                      self.bounded)
        if end != start:
            self._last = end
        return end

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        if start == end:
            return []
        files = [e.name for e in between(self.store.list(), start, end)]
        if self.settings.get("spark_parquet"):  # the epoch reads those with Spark's reader
            files = split_batch(self.settings, self.schema, files)[1]
        eof = bool(end["eof"]) and not start["eof"]
        parts = []
        for reader in range(self.readers):
            mine = files[reader::self.readers]
            if mine or (eof and reader == 0):
                parts.append(InputPartition({"reader": reader, "files": mine,
                                             "eof": eof and reader == 0}))
        return parts

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        settle()
        reader, files, eof = (partition.value[k] for k in ("reader", "files", "eof"))
        schema = arrow_schema(self.schema)
        yield from _FileReader(self.settings, self.schema).read(reader, files)
        if eof:
            yield control_batch(schema, reader, core.CONTROL_EOF)


def decoded_schema(settings: dict[str, Any], schema: T.StructType) -> pa.Schema:
    """The Arrow schema files are decoded into: the physical columns but the file's name,
    NOT NULL ones not nullable."""
    required = set(settings["not_null"])
    physical = [f.with_nullable(f.name not in required)
                for f in list(arrow_schema(schema))[: len(schema) - 3]]
    return pa.schema([f for f in physical if f.name != settings.get("file_column")])


def split_batch(settings: dict[str, Any], schema: T.StructType, files: list[str]
                ) -> tuple[list[list[str]], list[str]]:
    """A batch's files as (per reader, those Spark's parquet reader reads; the ones the
    Python source decodes): the rule of :mod:`.spark_parquet`, with the files dealt to
    the readers round robin as the Python source deals its own."""
    native, python = split_files(settings["store"]["local"], files,
                                 decoded_schema(settings, schema),
                                 frozenset(settings["not_null"]))
    readers: int = settings["readers"]
    return [native[reader::readers] for reader in range(readers)], python


class _FileReader:
    """Decodes a partition's files into Arrow batches."""

    def __init__(self, settings: dict[str, Any], spark_schema: T.StructType) -> None:
        self.settings = settings
        schema = arrow_schema(spark_schema)
        self.table: str = settings["table"]
        self.schema = schema
        self.spec = FormatSpec(**settings["format"])
        self.file_column: str | None = settings.get("file_column")
        self.decoder = FileDecoder(settings["kind"], decoded_schema(settings, spark_schema),
                                   self.spec)
        self.store = _store(settings)

    def read(self, reader: int, files: list[str]) -> Iterator[pa.RecordBatch]:
        dropped = 0
        for name in files:
            table, bad = self.decoder.decode(self.store.read(name))
            if bad:
                if self.spec.bad_data != "drop":
                    index, problem = bad[0]
                    raise core.ConnectorError(
                        f"filesystem source '{self.table}': bad record in {name} (record "
                        f"{index + 1}): {problem}. Fix the file, or set {core.BAD_DATA.name} = "
                        "'drop' to skip undecodable records", option=core.BAD_DATA.name)
                dropped += len(bad)
            if not table.num_rows:
                continue
            columns = []
            for field in list(self.schema)[: len(self.schema) - 3]:
                if field.name == self.file_column:
                    columns.append(pa.array([name] * table.num_rows, pa.string()))
                else:
                    columns.append(table.column(field.name).combine_chunks().cast(field.type))
            stamps = pa.array(np.full(table.num_rows, time.time_ns() // 1000, np.int64),
                              pa.int64())
            yield data_batch(self.schema, columns, reader, stamps)
        if dropped:
            log.warning("dropped bad records", extra={"table": self.table, "dropped": dropped})
            yield control_batch(self.schema, reader, f"{core.CONTROL_DROPPED_PREFIX}{dropped}")
