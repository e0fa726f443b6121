"""``single_file`` (docs/sql/connectors.md): a bounded line file source and a file sink."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors.core.base import (
    SINK,
    SOURCE,
    ColumnDef,
    Connector,
    ConnectorError,
    Sink,
    TableConfig,
    register,
)
from spate.engine.connectors.core.metadata import (
    BAD_DATA,
    BOTH,
    FORMAT,
    FORMAT_OPTION,
    FORMAT_SOURCE,
    SOURCE_TIME,
    SOURCES,
    TYPE,
    TYPE_OPTION,
    option,
)
from spate.engine.connectors.core.options import (
    OptionReader,
    check_role,
    check_source_options,
    reject_source_options,
)
from spate.engine.connectors.core.streaming import load_stream, source_options
from spate.engine.connectors.formats.records import (
    FormatSpec,
    check_columns,
    check_sink_schema,
    parse_format,
    require_line_format,
    single_value_columns,
    source_schema,
    with_row_key,
)
from spate.engine.connectors.single_file.sink import SingleFileSink
from spate.engine.connectors.single_file.source import PATH, SOURCE_NAME

#: Records are lines: the binary formats are refused (``require_line_format``).
LINE_FORMAT = FORMAT_OPTION.described("`json`, `debezium_json` or `raw_string` "
                                      "([formats](#formats))")
MAX_LINES_PER_BATCH = option("max_lines_per_batch", SOURCES, "lines per epoch (Spark "
                             "micro-batch)", default=100_000)
WAIT_FOR_CONTROL = option("wait_for_control", BOTH, "accepted for compatibility; no effect",
                          default=False)
#: Its lines have no dead-letter table yet (refused when planned, saying so).
LINE_BAD_DATA = BAD_DATA.described("what an undecodable line does: `fail` the pipeline or "
                                   "`drop` it (counted); `dead_letter` is not supported by "
                                   "single_file sources yet", choices=("fail", "drop"))


@dataclass(frozen=True)
class _FileTable:
    role: str
    #: the absolute path, and the path as the table's options give it (for messages)
    path: str
    given_path: str
    spec: FormatSpec
    columns: tuple[ColumnDef, ...]
    max_lines_per_batch: int


@register
class SingleFileConnector(Connector):
    """Newline-delimited records in one local file."""

    name = "single_file"
    roles = frozenset({SOURCE, SINK})
    options = (*TYPE, PATH, LINE_FORMAT, MAX_LINES_PER_BATCH, WAIT_FOR_CONTROL,
               *(spec for spec in FORMAT if spec is not FORMAT_OPTION), LINE_BAD_DATA,
               *(spec for spec in FORMAT_SOURCE if spec is not BAD_DATA), *SOURCE_TIME)
    examples = {
        SOURCE: ({"type": "source", "format": "json", "path": "in.jsonl",
                  "json.unstructured": "true"},),
        SINK: ({"type": "sink", "format": "json", "path": "out.jsonl"},)}

    def _parse(self, table: TableConfig) -> _FileTable:
        options = OptionReader(table)
        role = check_role(options, self.roles)
        # Under a tenant's boundary the path is relative to its storage root.
        given_path = options.required(PATH)
        path = table.boundary.resolve_path(given_path)
        require_line_format(options)
        spec = parse_format(options, role)
        options.boolean(WAIT_FOR_CONTROL)  # accepted for Arroyo compatibility
        if role == SOURCE:
            check_source_options(options)
            max_lines = options.integer(MAX_LINES_PER_BATCH, minimum=1)
        else:
            reject_source_options(options)
            options.reject(MAX_LINES_PER_BATCH, "applies to sources only")
            max_lines = MAX_LINES_PER_BATCH.default
        options.finish()
        columns = table.columns
        if not columns and role == SOURCE and spec.single_value:
            columns = single_value_columns(spec)
        check_columns(spec, columns, role)
        assert max_lines is not None
        return _FileTable(role, path, given_path, spec, columns, max_lines)

    def validate(self, table: TableConfig) -> tuple[ColumnDef, ...]:
        return self._parse(table).columns

    def is_bounded(self, table: TableConfig) -> bool:
        return table.role == SOURCE

    def check_input(self, table: TableConfig, connect: bool = True) -> None:
        del connect  # a file of the tenant's storage root
        parsed = self._parse(table)
        if os.path.isdir(parsed.path):
            raise ConnectorError(f"{parsed.given_path} is a directory; a single_file source "
                                 "reads one file", option=PATH.name)
        if not os.path.isfile(parsed.path):
            raise ConnectorError(f"file {parsed.given_path} does not exist", option=PATH.name)

    def reader_options(self, table: TableConfig) -> dict[str, str]:
        """The options of the data source reading ``table`` (see :func:`source_options`)."""
        parsed = self._parse(table)
        if parsed.role != SOURCE:
            raise ConnectorError(f"single_file table '{table.name}' is a sink; it cannot be "
                                 "read", option=TYPE_OPTION.name)
        path = parsed.path
        if not os.path.isfile(path):
            raise ConnectorError(f"single_file source '{table.name}': file "
                                 f"{parsed.given_path} does not exist", option=PATH.name)
        settings = {
            "table": table.name,
            "path": path,
            # errors name the file as the SQL did, not where it lives on the server
            "shown_path": parsed.given_path,
            "format": parsed.spec.to_dict(),
            "max_lines_per_batch": parsed.max_lines_per_batch,
            "not_null": table.required_columns(parsed.columns),
        }
        return source_options(source_schema(parsed.spec, parsed.columns), settings)

    def batch_bytes(self, table: TableConfig, start: Any | None, end: Any) -> int | None:
        """The file's bytes between the offsets (``{"line", "byte", "eof"}``)."""
        del table
        return max(0, int(end["byte"]) - (int(start["byte"]) if start else 0))

    def read_stream(self, spark: SparkSession, table: TableConfig, parallelism: int) -> DataFrame:
        del parallelism  # one reader: a file is read in order
        frame = load_stream(spark, SOURCE_NAME, self.reader_options(table))
        return with_row_key(frame, table.primary_key)

    def create_sink(self, table: TableConfig, schema: T.StructType) -> Sink:
        parsed = self._parse(table)
        if parsed.role != SINK:
            return super().create_sink(table, schema)
        check_sink_schema(parsed.spec, schema)
        return SingleFileSink(parsed.path, parsed.spec, table.name, parsed.given_path)
