"""The ``single_file`` source as a Python streaming data source.

Offsets are ``{"line", "byte", "eof"}``: the count of lines consumed, the byte
position after them, and whether that position is the end of the file. A batch
covers at most ``max_lines_per_batch`` lines; the batch whose end offset is the
end of file carries the one ``eof`` control row. Reading a range is a pure
function of the offsets and the file, so Spark replays batches identically,
and a pipeline resuming from the offset its state store kept goes on at that byte.

A batch of many lines is read by several readers at once (``readers``, the
pipeline's parallelism where the connector allows it): its range is cut at line
ends into parts of about equal bytes (:func:`line_parts`), each decoded by a
task of its own and tagged with its part's index as its source partition.  A
table whose rows must stay in the file's order (a primary key: a later line
updates an earlier one) keeps one reader.
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
#: A batch is cut into parts of at least this many lines (fewer: one task reads it).
MIN_PART_LINES = 16_384
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


def line_parts(path: str, start: dict[str, Any], end: dict[str, Any], readers: int
               ) -> list[dict[str, int]]:
    """The boundaries (``{"line", "byte"}``, ``start`` first and ``end`` last) of up to
    ``readers`` consecutive parts of whole lines between the two offsets, of about
    equal bytes, none of fewer than :data:`MIN_PART_LINES` lines.

    Cutting counts the lines before each cut, which reads the range once on the
    driver (a few milliseconds for 250,000 lines).  A file that is not what the
    offsets say (modified while read) gives one part, whose reader says so.
    """
    first = {"line": int(start["line"]), "byte": int(start["byte"])}
    last = {"line": int(end["line"]), "byte": int(end["byte"])}
    parts = min(readers, (last["line"] - first["line"]) // MIN_PART_LINES)
    if parts <= 1:
        return [first, last]
    with open(path, "rb") as handle:
        handle.seek(first["byte"])
        data = handle.read(last["byte"] - first["byte"])
    if len(data) != last["byte"] - first["byte"]:
        return [first, last]
    buf = np.frombuffer(data, dtype=np.uint8)
    bounds, lines, cut = [first], first["line"], 0
    for part in range(1, parts):
        after = data.find(b"\n", len(data) * part // parts)
        if after < 0 or after + 1 >= len(data):
            break
        lines += int(np.count_nonzero(buf[cut:after + 1] == 10))
        cut = after + 1
        if lines > bounds[-1]["line"]:
            bounds.append({"line": lines, "byte": first["byte"] + cut})
    bounds.append(last)
    return bounds


class SingleFileStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Readers over one file, in line ranges."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.path: str = settings["path"]
        self.shown_path: str = settings.get("shown_path", self.path)
        self.schema = schema
        self.max_lines: int = settings["max_lines_per_batch"]
        self.readers: int = settings.get("readers", 1)
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
        bounds = line_parts(self.path, start, end, self.readers)
        finishing = bool(end["eof"]) and not start["eof"]
        last = len(bounds) - 2
        return [InputPartition({"part": part, "start": bounds[part], "end": bounds[part + 1],
                                "eof": finishing and part == last})
                for part in range(len(bounds) - 1)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        settle()
        part, start, end, eof = (partition.value[k] for k in ("part", "start", "end", "eof"))
        reader = _RangeReader(self.settings, self.schema, part)
        yield from reader.read(start, end)
        if eof:
            yield control_batch(reader.arrow_schema, part, core.CONTROL_EOF)


class _RangeReader:
    """Decodes the lines of one offset range into Arrow batches, of source partition
    ``part``."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType, part: int = 0) -> None:
        self.part = part
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
                yield data_batch(self.arrow_schema, decoded.columns, self.part, stamps)
        if dropped:
            log.warning("dropped bad records", extra={"table": self.table, "path": self.path,
                                                      "dropped": dropped})
            yield control_batch(self.arrow_schema, self.part,
                                f"{core.CONTROL_DROPPED_PREFIX}{dropped}")

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
