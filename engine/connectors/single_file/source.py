"""The ``single_file`` source as a Python streaming data source.

Offsets are ``{"line", "byte", "eof"}``: the count of lines consumed, the byte
position after them, and whether that position is the end of the file. A batch
covers at most ``max_lines_per_batch`` lines; the batch whose end offset is the
end of file carries the one ``eof`` control row. Reading a range is a pure
function of the offsets and the file, so Spark replays batches identically,
and a pipeline resuming from the offset its state store kept goes on at that byte.
"""

from __future__ import annotations

import logging
import os
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
from spate.engine.connectors.formats.decoders import source_decoder, split_lines
from spate.engine.connectors.formats.records import FormatSpec
from spate.engine.python_workers import settle

log = logging.getLogger(__name__)

SOURCE_NAME = "spate_single_file"
#: Declared here, where the reader's (and the sink's) errors point at it; the connector
#: (:mod:`.connector`) declares its other options.
PATH = core.option("path", core.BOTH, "the file; relative paths are relative to the working "
                   "directory of `spate run`, and to the tenant's storage root in the Spate "
                   "service (which refuses paths leading out of it)", required=True)
_SCAN_CHUNK_BYTES = 4 << 20
#: Lines decoded (and yielded) per Arrow batch inside one read.
_DECODE_LINES = 65_536


class SingleFileDataSource(core.SpateDataSource):
    """Registered as ``spate_single_file``; see :mod:`.connector`."""

    source_name = SOURCE_NAME

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        return SingleFileStreamReader(self.settings(), schema, self.start_offset())


def scan_lines(path: str, start_byte: int, limit: int | None,
               shown_path: str | None = None) -> tuple[int, int, bool]:
    """From ``start_byte``, up to ``limit`` lines: ``(lines, end_byte, at_eof)``;
    errors name the file ``shown_path`` (as the SQL wrote it) when given.

    A last line without a terminator counts once the end of the file is reached.
    """
    size = os.path.getsize(path)
    if size < start_byte:
        raise core.ConnectorError(f"{shown_path or path} shrank below byte {start_byte} while "
                                  "being read; a "
                                  "source file must not be modified while a pipeline reads it",
                                  option=PATH.name)
    lines, position, line_end = 0, start_byte, start_byte
    with open(path, "rb") as handle:
        handle.seek(start_byte)
        while position < size:
            chunk = handle.read(min(_SCAN_CHUNK_BYTES, size - position))
            if not chunk:
                break
            newlines = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
            if limit is not None and len(newlines) >= limit - lines:
                end = position + int(newlines[limit - lines - 1]) + 1
                return limit, end, end >= size
            lines += len(newlines)
            if len(newlines):
                line_end = position + int(newlines[-1]) + 1
            position += len(chunk)
    tail = 1 if line_end < size else 0  # an unterminated last line
    return lines + tail, size, True


class SingleFileStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """One reader over one file, in line ranges."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.path: str = settings["path"]
        self.shown_path: str = settings.get("shown_path", self.path)
        self.schema = schema
        self.max_lines: int = settings["max_lines_per_batch"]
        #: the offset a resumed pipeline starts at (from its state store); None: the start
        self.start = start

    def initialOffset(self) -> dict[str, Any]:
        return core.initial_offset(self.start, lambda: {"line": 0, "byte": 0, "eof": False},
                                   self.settings["table"])

    def getDefaultReadLimit(self) -> ReadLimit:
        return core.default_limit(self.max_lines)

    def prepareForTriggerAvailableNow(self) -> None:
        """A file source is bounded: everything up to end of file is 'available now'."""

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if start["eof"]:
            return start
        if not os.path.isfile(self.path):
            raise core.ConnectorError(f"single_file source '{self.settings['table']}': file "
                                      f"{self.shown_path} does not exist (any more)",
                                      option=PATH.name)
        lines, end_byte, at_eof = scan_lines(self.path, start["byte"],
                                             core.max_rows(limit, self.max_lines), self.shown_path)
        return {"line": start["line"] + lines, "byte": end_byte, "eof": at_eof}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        if start == end:
            return []
        return [InputPartition({"start": start, "end": end})]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        settle()
        start, end = partition.value["start"], partition.value["end"]
        reader = _RangeReader(self.settings, self.schema)
        yield from reader.read(start, end)
        if end["eof"] and not start["eof"]:
            yield control_batch(reader.arrow_schema, 0, core.CONTROL_EOF)


class _RangeReader:
    """Decodes the lines of one offset range into Arrow batches."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType) -> None:
        self.path: str = settings["path"]
        self.shown_path: str = settings.get("shown_path", self.path)
        self.table: str = settings["table"]
        self.spec = FormatSpec(**settings["format"])
        self.arrow_schema = arrow_schema(schema)
        self.decoder = source_decoder(self.arrow_schema, self.spec, settings["not_null"])

    def read(self, start: dict[str, Any], end: dict[str, Any]) -> Iterator[pa.RecordBatch]:
        with open(self.path, "rb") as handle:
            handle.seek(start["byte"])
            data = handle.read(end["byte"] - start["byte"])
        buf, starts, lengths = split_lines(data)
        expected = end["line"] - start["line"]
        if len(starts) != expected:
            raise core.ConnectorError(
                f"single_file source '{self.table}': {self.shown_path} changed while being read "
                f"(expected {expected} lines from byte {start['byte']}, found {len(starts)}); "
                "a source file must not be modified while a pipeline reads it",
                option=PATH.name)
        ingested = np.full(1, time.time_ns() // 1000, dtype=np.int64)
        dropped = 0
        for first in range(0, expected, _DECODE_LINES):
            block = slice(first, first + _DECODE_LINES)
            decoded = self.decoder.decode(buf, starts[block], lengths[block])
            dropped += self._handle_bad(decoded.bad, start["line"] + first)
            if decoded.num_rows:
                stamps = pa.array(np.repeat(ingested, decoded.num_rows), pa.int64())
                yield data_batch(self.arrow_schema, decoded.columns, 0, stamps)
        if dropped:
            log.warning("dropped bad records", extra={"table": self.table, "path": self.path,
                                                      "dropped": dropped})
            yield control_batch(self.arrow_schema, 0, f"{core.CONTROL_DROPPED_PREFIX}{dropped}")

    def _handle_bad(self, bad: list[tuple[int, str]], first_line: int) -> int:
        if not bad:
            return 0
        if self.spec.bad_data == "drop":
            return len(bad)
        index, problem = bad[0]
        raise core.ConnectorError(
            f"single_file source '{self.table}': bad record in {self.shown_path} at line "
            f"{first_line + index + 1}: {problem}. Fix the record, or set {core.BAD_DATA.name} = "
            "'drop' to skip undecodable records", option=core.BAD_DATA.name)
