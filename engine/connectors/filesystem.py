"""``filesystem`` (docs/sql/connectors.md): files in a local folder or an S3 prefix.

The source reads json-lines, parquet, avro or csv files, once (``one_shot``, a
bounded source) or as they appear (``continuous``), with files as offsets
(:mod:`.filesystem_reader`); an idle continuous source is watched by listing its
folder or prefix (:meth:`FilesystemConnector.has_input_after`). The sink writes
each epoch as files and publishes them only once the epoch is committed: exactly
once (:mod:`.filesystem_sink`). Local paths are relative to the tenant's storage
root; S3 goes through the egress policy with the table's own keys
(:mod:`.object_store`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors.base import (
    SINK,
    SOURCE,
    ColumnDef,
    Connector,
    ConnectorError,
    Sink,
    TableConfig,
    register,
)
from spate.engine.connectors.boundary import Boundary
from spate.engine.connectors.file_formats import FILE_FORMATS, JSON, check_types
from spate.engine.connectors.filesystem_reader import SECRET_OPTION, SOURCE_NAME, unread
from spate.engine.connectors.filesystem_sink import FilesystemSink, SinkLayout
from spate.engine.connectors.formats import (
    FormatSpec,
    check_columns,
    parse_format,
    source_schema,
    with_row_key,
)
from spate.engine.connectors.lookup import _duration_s
from spate.engine.connectors.metadata import BOTH, SINKS, SOURCE_TIME, SOURCES, TYPE, specs
from spate.engine.connectors.object_store import (
    S3_OPTIONS,
    SECRET_FIELDS,
    S3Location,
    Store,
    open_store,
    parse_location,
    store_settings,
)
from spate.engine.connectors.options import (
    OptionReader,
    check_role,
    check_source_options,
    reject_source_options,
)
from spate.engine.connectors.streaming import load_stream, source_options

ONE_SHOT, CONTINUOUS = "one_shot", "continuous"
DEFAULT_POLL_S = 10.0
DEFAULT_MAX_FILES = 1000
DEFAULT_FILE_SIZE = 128 << 20
SOURCE_OPTIONS = ("source.mode", "source.poll_interval", "source.max_files_per_batch",
                  "bad_data")
SINK_OPTIONS = ("rolling_policy.file_size", "rolling_policy.interval",
                "rolling_policy.max_records", "partitioning.fields",
                "partitioning.time_pattern", "partitioning.time_field")
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
#: A source offset's high-water mark: ``(mtime, names)`` (:mod:`.filesystem_reader`).
_Mark = tuple[int, tuple[str, ...]]


@dataclass(frozen=True)
class _Table:
    role: str
    root: str | S3Location
    given_path: str
    kind: str
    spec: FormatSpec
    columns: tuple[ColumnDef, ...]
    bounded: bool = True
    poll_s: float = DEFAULT_POLL_S
    max_files: int = DEFAULT_MAX_FILES
    layout: SinkLayout | None = None


def _size(options: OptionReader, key: str) -> int | None:
    value = options.string(key)
    if value is None:
        return None
    match = _SIZE.fullmatch(value)
    if match is None or float(match.group(1)) <= 0:
        raise ConnectorError(f"option '{key}' must be a size such as '128MB' or '1GB', not "
                             f"'{value}'", option=key)
    unit = (match.group(2) or "").lower()[:1]
    return int(float(match.group(1)) * _UNITS[unit])


def _format(options: OptionReader, role: str) -> tuple[str, FormatSpec]:
    kind = (options.peek("format") or "").strip().lower()
    if kind not in FILE_FORMATS:
        raise ConnectorError(f"connector 'filesystem' needs option 'format', one of "
                             f"{', '.join(repr(k) for k in FILE_FORMATS)}"
                             + (f", not '{kind}'" if kind else ""), option="format")
    if kind == JSON:
        spec = parse_format(options, role)
        if spec.unstructured:
            raise ConnectorError("json.unstructured is not supported by the filesystem "
                                 "connector; declare the columns", option="json.unstructured")
        return kind, spec
    options.string("format")
    bad = "fail"
    if role == SOURCE:
        bad = options.choice("bad_data", ("fail", "drop"), "fail") or "fail"
    return kind, FormatSpec(kind=JSON, bad_data=bad)


def _layout(options: OptionReader, kind: str, columns: tuple[ColumnDef, ...]) -> SinkLayout:
    names = [c.name for c in columns]
    fields_text = options.string("partitioning.fields") or ""
    fields = tuple(f.strip() for f in fields_text.split(",") if f.strip())
    for name in fields:
        if columns and name not in names:
            raise ConnectorError(f"option 'partitioning.fields' names '{name}', which is not a "
                                 f"column (columns: {', '.join(names)})",
                                 option="partitioning.fields")
    pattern = options.string("partitioning.time_pattern")
    time_field = options.string("partitioning.time_field")
    if pattern is not None:
        if "%" not in pattern or ".." in pattern.split("/"):
            raise ConnectorError("option 'partitioning.time_pattern' must be a strftime "
                                 "pattern such as '%Y/%m/%d/%H'",
                                 option="partitioning.time_pattern")
        stamps = [c.name for c in columns
                  if isinstance(c.spark_type, T.TimestampType | T.TimestampNTZType)]
        if time_field is None and columns:
            if not stamps:
                raise ConnectorError("option 'partitioning.time_pattern' needs a TIMESTAMP "
                                     "column; name it with 'partitioning.time_field'",
                                     option="partitioning.time_pattern")
            time_field = stamps[0]
        elif time_field is not None and columns and time_field not in stamps:
            raise ConnectorError(f"option 'partitioning.time_field' must name a TIMESTAMP "
                                 f"column, not '{time_field}'", option="partitioning.time_field")
    elif time_field is not None:
        raise ConnectorError("option 'partitioning.time_field' needs "
                             "'partitioning.time_pattern'", option="partitioning.time_field")
    max_records = options.integer("rolling_policy.max_records", None, minimum=1)
    size = _size(options, "rolling_policy.file_size")
    # Files close with their epoch at the latest: an interval only has to be valid.
    _duration_s(options, "rolling_policy.interval")
    return SinkLayout(kind=kind, partition_fields=fields, time_pattern=pattern,
                      time_field=time_field, max_records=max_records,
                      max_bytes=size if size is not None else DEFAULT_FILE_SIZE)


@register
class FilesystemConnector(Connector):
    """Files under a local folder or an ``s3://bucket/prefix``."""

    name = "filesystem"
    roles = frozenset({SOURCE, SINK})
    options = (*TYPE, *specs(BOTH, "path", "format", "json.timestamp_format",
                             "json.decimal_encoding", *S3_OPTIONS),
               *SOURCE_TIME, *specs(SOURCES, *SOURCE_OPTIONS), *specs(SINKS, *SINK_OPTIONS))

    def __init__(self) -> None:
        #: location -> the mark a listing found no file past, and when (time.monotonic())
        self._quiet: dict[str | S3Location, tuple[_Mark, float]] = {}

    def _parse(self, table: TableConfig) -> _Table:
        options = OptionReader(table)
        role = check_role(options, self.roles)
        given = options.required("path")
        s3 = {key: options.string(key) for key in S3_OPTIONS}
        root = parse_location(given, s3, table.boundary)
        kind, spec = _format(options, role)
        columns = table.data_columns
        if not columns and role == SOURCE:
            raise ConnectorError(f"filesystem source '{table.name}' needs its columns "
                                 "declared, e.g. CREATE TABLE t (id BIGINT, name TEXT) WITH "
                                 "(...)", option="format")
        check_columns(spec, columns, role)
        if role == SOURCE:
            check_source_options(options)
            for key in SINK_OPTIONS:
                options.reject(key, "applies to sinks only")
            mode = options.choice("source.mode", (ONE_SHOT, CONTINUOUS), ONE_SHOT)
            poll = _duration_s(options, "source.poll_interval")
            if poll is not None and mode != CONTINUOUS:
                raise ConnectorError("option 'source.poll_interval' applies to "
                                     "source.mode = 'continuous' only",
                                     option="source.poll_interval")
            most = options.integer("source.max_files_per_batch", DEFAULT_MAX_FILES, minimum=1)
            options.finish()
            return _Table(role, root, given, kind, spec, table.columns, mode == ONE_SHOT,
                          poll or DEFAULT_POLL_S, most or DEFAULT_MAX_FILES)
        reject_source_options(options)
        for key in SOURCE_OPTIONS:
            options.reject(key, "applies to sources only")
        layout = _layout(options, kind, columns)
        options.finish()
        return _Table(role, root, given, kind, spec, columns, layout=layout)

    def _store(self, parsed: _Table, boundary: Boundary) -> Store:
        return open_store(parsed.root, parsed.given_path, boundary)

    def validate(self, table: TableConfig) -> tuple[ColumnDef, ...]:
        return self._parse(table).columns

    def metadata_fields(self, role: str) -> Mapping[str, tuple[T.DataType, ...]]:
        """The file a source row was read from, relative to the table's path."""
        return {"file_path": (T.StringType(),)} if role == SOURCE else {}

    def is_bounded(self, table: TableConfig) -> bool:
        return table.role == SOURCE and self._parse(table).bounded

    def partition_count(self, table: TableConfig, parallelism: int) -> int:
        del table
        return max(1, parallelism)

    def check_input(self, table: TableConfig, connect: bool = True) -> None:
        parsed = self._parse(table)
        if isinstance(parsed.root, str) and connect:
            self._store(parsed, table.boundary).reach()

    def batch_bytes(self, table: TableConfig, start: object | None, end: object) -> int | None:
        """The bytes of the files between the offsets (each offset counts them)."""
        del table
        before = int(start["bytes"]) if isinstance(start, dict) else 0
        return int(end["bytes"]) - before if isinstance(end, dict) else None

    def has_input_after(self, table: TableConfig, parallelism: int, offset: Any) -> bool | None:
        """Whether a listing of the folder or prefix (names, sizes and times: no file is
        read) finds a file ``offset`` does not cover, as the reader's next listing would.
        It lists no more often than the running source does: asked again about the same
        offset within ``source.poll_interval`` of a listing that found nothing, it answers
        False without listing.  A ``one_shot`` source: whether its end is still to come
        (once it ended, nothing more is read whatever arrives)."""
        del parallelism
        if table.role != SOURCE:
            return None
        parsed = self._parse(table)
        if parsed.bounded:
            return not offset["eof"]
        mark: _Mark = (int(offset["mtime"]), tuple(offset["names"]))
        listed_s = time.monotonic()
        quiet = self._quiet.get(parsed.root)
        if quiet is not None and quiet[0] == mark and listed_s - quiet[1] < parsed.poll_s:
            return False
        if unread(self._store(parsed, table.boundary).list(), offset):
            self._quiet.pop(parsed.root, None)
            return True
        self._quiet[parsed.root] = (mark, listed_s)
        return False

    def reader_options(self, table: TableConfig, parallelism: int) -> dict[str, str]:
        parsed = self._parse(table)
        if parsed.role != SOURCE:
            raise ConnectorError(f"filesystem table '{table.name}' is a sink; it cannot be "
                                 "read", option="type")
        store = store_settings(parsed.root)
        secrets = {}
        if "s3" in store:
            secrets = {key: store["s3"].pop(key) for key in SECRET_FIELDS}
        file_column = next((c for c, key in table.metadata.items() if key == "file_path"),
                           None)
        settings = {
            "table": table.name,
            "store": store,
            "shown_path": parsed.given_path,
            "boundary": table.boundary.to_dict(),
            "kind": parsed.kind,
            "format": parsed.spec.to_dict(),
            "bounded": parsed.bounded,
            "poll_interval_s": parsed.poll_s,
            "max_files_per_batch": parsed.max_files,
            "readers": self.partition_count(table, parallelism),
            "file_column": file_column,
            "not_null": [c.name for c in parsed.columns
                         if (not c.nullable or c.name in table.primary_key)
                         and c.name not in table.metadata],
        }
        options = source_options(source_schema(parsed.spec, parsed.columns), settings)
        return {**options, SECRET_OPTION: json.dumps(secrets)}

    def read_stream(self, spark: SparkSession, table: TableConfig, parallelism: int) -> DataFrame:
        frame = load_stream(spark, SOURCE_NAME, self.reader_options(table, parallelism))
        return with_row_key(frame, table.primary_key)

    def create_sink(self, table: TableConfig, schema: T.StructType) -> Sink:
        parsed = self._parse(table)
        if parsed.role != SINK:
            return super().create_sink(table, schema)
        assert parsed.layout is not None
        problem = check_types(parsed.kind, schema)
        if problem is not None:
            raise ConnectorError(f"filesystem sink '{table.name}': {problem}", option="format")
        missing = [f for f in parsed.layout.partition_fields if f not in schema.fieldNames()]
        if parsed.layout.time_field is not None \
                and parsed.layout.time_field not in schema.fieldNames():
            missing.append(parsed.layout.time_field)
        if missing:
            raise ConnectorError(f"filesystem sink '{table.name}': partitioning names "
                                 f"{', '.join(missing)}, not columns of the rows written",
                                 option="partitioning.fields")
        return FilesystemSink(self._store(parsed, table.boundary), parsed.layout, schema,
                              table.name, parsed.spec)

    def reach(self, options: Mapping[str, str], role: str | None, boundary: Boundary) -> str:
        """Lists the S3 prefix (with the table's own keys) or checks the directory."""
        table = TableConfig("connection", self.name, role or SOURCE, options, (),
                            boundary=boundary)
        reader = OptionReader(table)
        given = reader.required("path")
        root = parse_location(given, {key: reader.string(key) for key in S3_OPTIONS},
                              boundary)
        return open_store(root, given, boundary).reach()
