"""``filesystem`` (docs/sql/connectors.md): files in a local folder or an S3 prefix.

The source reads json-lines, parquet, avro or csv files, once (``one_shot``, a
bounded source) or as they appear (``continuous``), with files as offsets
(:mod:`.source`); an idle continuous source is watched by listing its
folder or prefix (:meth:`FilesystemConnector.has_input_after`). The sink writes
each epoch as files and publishes them only once the epoch is committed: exactly
once (:mod:`.sink`). Local paths are relative to the tenant's storage
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

from spate.engine.connectors import core
from spate.engine.connectors.core.lookup import _duration_s
from spate.engine.connectors.filesystem.file_formats import (
    FILE_FORMATS,
    JSON,
    PARQUET,
    check_types,
)
from spate.engine.connectors.filesystem.object_store import (
    AWS_ACCESS_KEY_ID,
    AWS_REGION,
    AWS_SECRET_ACCESS_KEY,
    AWS_SESSION_TOKEN,
    ENDPOINT_URL,
    PATH,
    SECRET_FIELDS,
    S3Location,
    Store,
    open_store,
    parse_location,
    store_settings,
)
from spate.engine.connectors.filesystem.sink import (
    PARTITIONING_FIELDS,
    PARTITIONING_TIME_FIELD,
    PARTITIONING_TIME_PATTERN,
    ROLLING_FILE_SIZE,
    ROLLING_INTERVAL,
    ROLLING_MAX_RECORDS,
    SINK_OPTIONS,
    FilesystemSink,
    SinkLayout,
)
from spate.engine.connectors.filesystem.source import (
    FRESH,
    SECRET_OPTION,
    SOURCE_NAME,
    between,
    done,
    split_batch,
    unread,
)
from spate.engine.connectors.filesystem.spark_parquet import spark_frame
from spate.engine.connectors.formats.records import (
    FormatSpec,
    check_columns,
    parse_format,
    source_schema,
)

ONE_SHOT, CONTINUOUS = "one_shot", "continuous"
DEFAULT_POLL_S = 10.0

FILE_FORMAT = core.FORMAT_OPTION.described(
    "`json` (one object per line), `parquet`, `avro` (an Avro object container file, its "
    "schema from the columns) or `csv` (a header line; scalar columns only)", kind=core.CHOICE,
    choices=FILE_FORMATS)
FILE_TIMESTAMP_FORMAT = core.JSON_TIMESTAMP_FORMAT.described("format `json` only: as for "
                                                             "[json](#json)",
                                                             default_text="`rfc3339`")
FILE_DECIMAL_ENCODING = core.JSON_DECIMAL_ENCODING.described("format `json` only: as for "
                                                             "[json](#json)",
                                                             default_text="`number`")
SOURCE_MODE = core.option("source.mode", core.SOURCES, "`one_shot` reads the files there and ends "
                          "(a bounded source); `continuous` keeps looking for new files",
                          choices=(ONE_SHOT, CONTINUOUS), default=ONE_SHOT)
SOURCE_POLL_INTERVAL = core.option("source.poll_interval", core.SOURCES, "how often a `continuous` "
                                   "source lists the folder or prefix", kind=core.DURATION,
                                   default_text="`10s`")
SOURCE_MAX_FILES = core.option("source.max_files_per_batch", core.SOURCES, "the most files one "
                               "epoch reads", default=1000)
FILE_BAD_DATA = core.BAD_DATA.described(
    "what an undecodable record does: `fail` the pipeline or `drop` it (counted) "
    "([bad data](#bad-data)); a json line is one record, a parquet, avro or csv file that "
    "cannot be read is one bad record (dropped whole)", choices=("fail", "drop"))
SOURCE_OPTIONS = (SOURCE_MODE, SOURCE_POLL_INTERVAL, SOURCE_MAX_FILES, FILE_BAD_DATA)
_SIZE = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]i?b?|b)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
#: A source offset's high-water mark: ``(mtime, names)`` (:mod:`.source`).
_Mark = tuple[int, tuple[str, ...]]


@dataclass(frozen=True)
class _Table:
    role: str
    root: str | S3Location
    given_path: str
    kind: str
    spec: FormatSpec
    columns: tuple[core.ColumnDef, ...]
    bounded: bool = True
    poll_s: float = DEFAULT_POLL_S
    max_files: int = SOURCE_MAX_FILES.default
    layout: SinkLayout | None = None


def _size(options: core.OptionReader, spec: core.OptionSpec) -> int | None:
    """A size option in bytes (its declared default when absent)."""
    value = options.string(spec, None)
    if value is None:
        default: int | None = spec.default
        return default
    match = _SIZE.fullmatch(value)
    if match is None or float(match.group(1)) <= 0:
        raise core.ConnectorError(f"option '{spec.name}' must be a size such as '128MB' or '1GB', "
                                  f"not '{value}'", option=spec.name)
    unit = (match.group(2) or "").lower()[:1]
    return int(float(match.group(1)) * _UNITS[unit])


def _format(options: core.OptionReader, role: str) -> tuple[str, FormatSpec]:
    kind = (options.peek(FILE_FORMAT) or "").strip().lower()
    if kind not in FILE_FORMATS:
        raise core.ConnectorError(f"connector 'filesystem' needs option '{FILE_FORMAT.name}', one "
                                  f"of {', '.join(repr(k) for k in FILE_FORMATS)}"
                                  + (f", not '{kind}'" if kind else ""), option=FILE_FORMAT.name)
    if kind == JSON:
        spec = parse_format(options, role)
        if spec.unstructured:
            raise core.ConnectorError(f"{core.JSON_UNSTRUCTURED.name} is not supported by the "
                                      f"filesystem "
                                      "connector; declare the columns",
                                      option=core.JSON_UNSTRUCTURED.name)
        return kind, spec
    options.string(FILE_FORMAT)
    bad = "fail"
    if role == core.SOURCE:
        bad = options.choice(FILE_BAD_DATA) or "fail"
    return kind, FormatSpec(kind=JSON, bad_data=bad)


def _layout(options: core.OptionReader, kind: str,
            columns: tuple[core.ColumnDef, ...]) -> SinkLayout:
    names = [c.name for c in columns]
    fields_text = options.string(PARTITIONING_FIELDS) or ""
    fields = tuple(f.strip() for f in fields_text.split(",") if f.strip())
    for name in fields:
        if columns and name not in names:
            raise core.ConnectorError(f"option '{PARTITIONING_FIELDS.name}' names '{name}', which "
                                      f"is not a column (columns: {', '.join(names)})",
                                      option=PARTITIONING_FIELDS.name)
    pattern = options.string(PARTITIONING_TIME_PATTERN)
    time_field = options.string(PARTITIONING_TIME_FIELD)
    if pattern is not None:
        if "%" not in pattern or ".." in pattern.split("/"):
            raise core.ConnectorError(f"option '{PARTITIONING_TIME_PATTERN.name}' must be a "
                                      "strftime pattern such as '%Y/%m/%d/%H'",
                                      option=PARTITIONING_TIME_PATTERN.name)
        stamps = [c.name for c in columns
                  if isinstance(c.spark_type, T.TimestampType | T.TimestampNTZType)]
        if time_field is None and columns:
            if not stamps:
                raise core.ConnectorError(f"option '{PARTITIONING_TIME_PATTERN.name}' needs a "
                                          "TIMESTAMP column; name it with "
                                          f"'{PARTITIONING_TIME_FIELD.name}'",
                                          option=PARTITIONING_TIME_PATTERN.name)
            time_field = stamps[0]
        elif time_field is not None and columns and time_field not in stamps:
            raise core.ConnectorError(f"option '{PARTITIONING_TIME_FIELD.name}' must name a "
                                      f"TIMESTAMP column, not '{time_field}'",
                                      option=PARTITIONING_TIME_FIELD.name)
    elif time_field is not None:
        raise core.ConnectorError(f"option '{PARTITIONING_TIME_FIELD.name}' needs "
                                  f"'{PARTITIONING_TIME_PATTERN.name}'",
                                  option=PARTITIONING_TIME_FIELD.name)
    max_records = options.integer(ROLLING_MAX_RECORDS, minimum=1)
    # Files close with their epoch at the latest: an interval only has to be valid.
    _duration_s(options, ROLLING_INTERVAL)
    return SinkLayout(kind=kind, partition_fields=fields, time_pattern=pattern,
                      time_field=time_field, max_records=max_records,
                      max_bytes=_size(options, ROLLING_FILE_SIZE))


@core.register
class FilesystemConnector(core.Connector):
    """Files under a local folder or an ``s3://bucket/prefix``."""

    name = "filesystem"
    roles = frozenset({core.SOURCE, core.SINK})
    options = (*core.TYPE, PATH, FILE_FORMAT, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
               AWS_SESSION_TOKEN, ENDPOINT_URL, FILE_TIMESTAMP_FORMAT, FILE_DECIMAL_ENCODING,
               *SOURCE_OPTIONS, *SINK_OPTIONS, *core.SOURCE_TIME)
    examples = {
        core.SOURCE: ({"type": "source", "format": "json", "path": "in"},),
        core.SINK: ({"type": "sink", "format": "json", "path": "out"},)}

    def __init__(self) -> None:
        #: location -> the mark a listing found no file past, and when (time.monotonic())
        self._quiet: dict[str | S3Location, tuple[_Mark, float]] = {}

    def _parse(self, table: core.TableConfig) -> _Table:
        options = core.OptionReader(table)
        role = core.check_role(options, self.roles)
        given = options.required(PATH)
        root = parse_location(given, options, table.boundary)
        kind, spec = _format(options, role)
        columns = table.data_columns
        if not columns and role == core.SOURCE:
            raise core.ConnectorError(f"filesystem source '{table.name}' needs its columns "
                                      "declared, e.g. CREATE TABLE t (id BIGINT, name TEXT) WITH "
                                      "(...)", option=FILE_FORMAT.name)
        check_columns(spec, columns, role)
        if role == core.SOURCE:
            core.check_source_options(options)
            for key in SINK_OPTIONS:
                options.reject(key, "applies to sinks only")
            mode = options.choice(SOURCE_MODE)
            poll = _duration_s(options, SOURCE_POLL_INTERVAL)
            if poll is not None and mode != CONTINUOUS:
                raise core.ConnectorError(f"option '{SOURCE_POLL_INTERVAL.name}' applies to "
                                          f"{SOURCE_MODE.name} = 'continuous' only",
                                          option=SOURCE_POLL_INTERVAL.name)
            most = options.integer(SOURCE_MAX_FILES, minimum=1)
            options.finish()
            return _Table(role, root, given, kind, spec, table.columns, mode == ONE_SHOT,
                          poll or DEFAULT_POLL_S, most or SOURCE_MAX_FILES.default)
        core.reject_source_options(options)
        for key in SOURCE_OPTIONS:
            options.reject(key, "applies to sources only")
        layout = _layout(options, kind, columns)
        options.finish()
        return _Table(role, root, given, kind, spec, columns, layout=layout)

    def _store(self, parsed: _Table, boundary: core.Boundary) -> Store:
        return open_store(parsed.root, parsed.given_path, boundary)

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        return self._parse(table).columns

    def metadata_fields(self, role: str) -> Mapping[str, tuple[T.DataType, ...]]:
        """The file a source row was read from, relative to the table's path."""
        return {"file_path": (T.StringType(),)} if role == core.SOURCE else {}

    def is_bounded(self, table: core.TableConfig) -> bool:
        return table.role == core.SOURCE and self._parse(table).bounded

    def partition_count(self, table: core.TableConfig, parallelism: int) -> int:
        del table
        return max(1, parallelism)

    def check_input(self, table: core.TableConfig, connect: bool = True) -> None:
        parsed = self._parse(table)
        if isinstance(parsed.root, str) and connect:
            self._store(parsed, table.boundary).reach()

    def batch_bytes(self, table: core.TableConfig, start: object | None, end: object) -> int | None:
        """The bytes of the files between the offsets (each offset counts them)."""
        del table
        before = int(start["bytes"]) if isinstance(start, dict) else 0
        return int(end["bytes"]) - before if isinstance(end, dict) else None

    def has_input_after(self, table: core.TableConfig, parallelism: int,
                        offset: Any) -> bool | None:
        """Whether a listing of the folder or prefix (names, sizes and times: no file is
        read) finds a file ``offset`` does not cover, as the reader's next listing would.
        It lists no more often than the running source does: asked again about the same
        offset within ``source.poll_interval`` of a listing that found nothing, it answers
        False without listing.  A ``one_shot`` source: whether its end is still to come
        (once it ended, nothing more is read whatever arrives)."""
        del parallelism
        if table.role != core.SOURCE:
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

    def backlog_bytes(self, table: core.TableConfig, parallelism: int, offset: Any) -> int | None:
        """The sizes of the listed files ``offset`` does not cover (a listing: no file is
        read); 0 once a ``one_shot`` source ended."""
        del parallelism
        if table.role != core.SOURCE:
            return None
        parsed = self._parse(table)
        if parsed.bounded and offset["eof"]:
            return 0
        return sum(entry.size for entry in self._store(parsed, table.boundary).list()
                   if not done(entry, offset))

    def reader_options(self, table: core.TableConfig, parallelism: int) -> dict[str, str]:
        settings, schema = self._reader_settings(table, parallelism)
        store = settings["store"]
        secrets = {}
        if "s3" in store:
            secrets = {key: store["s3"].pop(key) for key in SECRET_FIELDS}
        options = core.source_options(schema, settings)
        return {**options, SECRET_OPTION: json.dumps(secrets)}

    def _reader_settings(self, table: core.TableConfig, parallelism: int
                         ) -> tuple[dict[str, Any], T.StructType]:
        """What the source's readers are told (secrets included), and its stream's schema."""
        parsed = self._parse(table)
        if parsed.role != core.SOURCE:
            raise core.ConnectorError(f"filesystem table '{table.name}' is a sink; it cannot be "
                                      "read", option=core.TYPE_OPTION.name)
        file_column = next((c for c, key in table.metadata.items() if key == "file_path"),
                           None)
        settings = {
            "table": table.name,
            "store": store_settings(parsed.root),
            "shown_path": parsed.given_path,
            "boundary": table.boundary.to_dict(),
            "kind": parsed.kind,
            "format": parsed.spec.to_dict(),
            "bounded": parsed.bounded,
            "poll_interval_s": parsed.poll_s,
            "max_files_per_batch": parsed.max_files,
            "readers": self.partition_count(table, parallelism),
            "file_column": file_column,
            "not_null": table.required_columns(parsed.columns),
            # Local parquet files are read by Spark's own reader where it reads them as
            # the Python source would (:mod:`.spark_parquet`).
            "spark_parquet": parsed.kind == PARQUET and isinstance(parsed.root, str)
                             and file_column is None,
        }
        return settings, source_schema(parsed.spec, parsed.columns)

    def read_stream(self, spark: SparkSession, table: core.TableConfig,
                    parallelism: int) -> DataFrame:
        options = self.reader_options(table, parallelism)
        return core.load_stream(spark, SOURCE_NAME, options, table.primary_key)

    def reads_with_spark(self, table: core.TableConfig) -> bool:
        """A local parquet source without a ``file_path`` column (:mod:`.spark_parquet`)."""
        if table.role != core.SOURCE:
            return False
        return bool(self._reader_settings(table, 1)[0]["spark_parquet"])

    def spark_rows(self, spark: SparkSession, table: core.TableConfig, parallelism: int,
                   start: Any | None, end: Any) -> DataFrame | None:
        """The batch's parquet files that Spark's own reader reads (:mod:`.spark_parquet`);
        the Python source decodes the others."""
        if table.role != core.SOURCE or start == end:
            return None
        settings, schema = self._reader_settings(table, parallelism)
        if not settings["spark_parquet"]:
            return None
        store = self._store(self._parse(table), table.boundary)
        files = [e.name for e in between(store.list(), start or dict(FRESH), end)]
        native, _ = split_batch(settings, schema, files)
        columns = T.StructType(schema.fields[: len(schema.fields) - 3])
        return spark_frame(spark, settings["store"]["local"], native, columns)

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        parsed = self._parse(table)
        if parsed.role != core.SINK:
            return super().create_sink(table, schema)
        assert parsed.layout is not None
        problem = check_types(parsed.kind, schema)
        if problem is not None:
            raise core.ConnectorError(f"filesystem sink '{table.name}': {problem}",
                                      option=FILE_FORMAT.name)
        missing = [f for f in parsed.layout.partition_fields if f not in schema.fieldNames()]
        if parsed.layout.time_field is not None \
                and parsed.layout.time_field not in schema.fieldNames():
            missing.append(parsed.layout.time_field)
        if missing:
            raise core.ConnectorError(f"filesystem sink '{table.name}': partitioning names "
                                      f"{', '.join(missing)}, not columns of the rows written",
                                      option=PARTITIONING_FIELDS.name)
        return FilesystemSink(self._store(parsed, table.boundary), parsed.layout, schema,
                              table.name, parsed.spec)

    def reach(self, options: Mapping[str, str], role: str | None, boundary: core.Boundary) -> str:
        """Lists the S3 prefix (with the table's own keys) or checks the directory."""
        table = core.TableConfig("connection", self.name, role or core.SOURCE, options, (),
                                 boundary=boundary)
        reader = core.OptionReader(table)
        given = reader.required(PATH)
        root = parse_location(given, reader, boundary)
        return open_store(root, given, boundary).reach()
