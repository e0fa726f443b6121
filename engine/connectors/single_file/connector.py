"""``single_file`` (docs/sql/connectors.md): a bounded line file source and a file sink."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.formats.records import (
    FormatSpec,
    check_columns,
    check_sink_schema,
    parse_format,
    require_line_format,
    single_value_columns,
    source_schema,
)
from spate.engine.connectors.single_file.sink import SingleFileSink
from spate.engine.connectors.single_file.source import PATH, SOURCE_NAME

#: Records are lines: the binary formats are refused (``require_line_format``).
LINE_FORMAT = core.FORMAT_OPTION.described("`json`, `debezium_json` or `raw_string` "
                                           "([formats](#formats))")
MAX_LINES_PER_BATCH = core.option("max_lines_per_batch", core.SOURCES, "lines per epoch (Spark "
                                  "micro-batch)", default=100_000)
WAIT_FOR_CONTROL = core.option("wait_for_control", core.BOTH, "accepted for compatibility; no "
                                                              "effect",
                               default=False)
#: Its lines have no dead-letter table yet (refused when planned, saying so).
LINE_BAD_DATA = core.BAD_DATA.described("what an undecodable line does: `fail` the pipeline or "
                                        "`drop` it (counted); `dead_letter` is not supported by "
                                        "single_file sources yet", choices=("fail", "drop"))


@dataclass(frozen=True)
class _FileTable:
    role: str
    #: the absolute path, and the path as the table's options give it (for messages)
    path: str
    given_path: str
    spec: FormatSpec
    columns: tuple[core.ColumnDef, ...]
    max_lines_per_batch: int


@core.register
class SingleFileConnector(core.Connector):
    """Newline-delimited records in one local file."""

    name = "single_file"
    roles = frozenset({core.SOURCE, core.SINK})
    options = (*core.TYPE, PATH, LINE_FORMAT, MAX_LINES_PER_BATCH, WAIT_FOR_CONTROL,
               *(spec for spec in core.FORMAT if spec is not core.FORMAT_OPTION), LINE_BAD_DATA,
               *(spec for spec in core.FORMAT_SOURCE if spec is not core.BAD_DATA),
               *core.SOURCE_TIME)
    examples = {
        core.SOURCE: ({"type": "source", "format": "json", "path": "in.jsonl",
                       "json.unstructured": "true"},),
        core.SINK: ({"type": "sink", "format": "json", "path": "out.jsonl"},)}

    def _parse(self, table: core.TableConfig) -> _FileTable:
        options = core.OptionReader(table)
        role = core.check_role(options, self.roles)
        # Under a tenant's boundary the path is relative to its storage root.
        given_path = options.required(PATH)
        path = table.boundary.resolve_path(given_path)
        require_line_format(options)
        spec = parse_format(options, role)
        options.boolean(WAIT_FOR_CONTROL)  # accepted for Arroyo compatibility
        if role == core.SOURCE:
            core.check_source_options(options)
            max_lines = options.integer(MAX_LINES_PER_BATCH, minimum=1)
        else:
            core.reject_source_options(options)
            options.reject(MAX_LINES_PER_BATCH, "applies to sources only")
            max_lines = MAX_LINES_PER_BATCH.default
        options.finish()
        columns = table.columns
        if not columns and role == core.SOURCE and spec.single_value:
            columns = single_value_columns(spec)
        check_columns(spec, columns, role)
        assert max_lines is not None
        return _FileTable(role, path, given_path, spec, columns, max_lines)

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        return self._parse(table).columns

    def is_bounded(self, table: core.TableConfig) -> bool:
        return table.role == core.SOURCE

    def check_input(self, table: core.TableConfig, connect: bool = True) -> None:
        del connect  # a file of the tenant's storage root
        parsed = self._parse(table)
        if os.path.isdir(parsed.path):
            raise core.ConnectorError(f"{parsed.given_path} is a directory; a single_file source "
                                      "reads one file", option=PATH.name)
        if not os.path.isfile(parsed.path):
            raise core.ConnectorError(f"file {parsed.given_path} does not exist", option=PATH.name)

    def partition_count(self, table: core.TableConfig, parallelism: int) -> int:
        """``parallelism`` readers share a batch's lines, unless its rows must keep the
        file's order: rows keyed by a primary key (``debezium_json`` changes among
        them), where a later line updates an earlier one."""
        return 1 if table.primary_key else max(1, parallelism)

    def reader_options(self, table: core.TableConfig, parallelism: int = 1) -> dict[str, str]:
        """The options of the data source reading ``table`` (see :func:`source_options`)."""
        parsed = self._parse(table)
        if parsed.role != core.SOURCE:
            raise core.ConnectorError(f"single_file table '{table.name}' is a sink; it cannot be "
                                      "read", option=core.TYPE_OPTION.name)
        path = parsed.path
        if not os.path.isfile(path):
            raise core.ConnectorError(f"single_file source '{table.name}': file "
                                      f"{parsed.given_path} does not exist", option=PATH.name)
        settings = {
            "table": table.name,
            "path": path,
            # errors name the file as the SQL did, not where it lives on the server
            "shown_path": parsed.given_path,
            "format": parsed.spec.to_dict(),
            "max_lines_per_batch": parsed.max_lines_per_batch,
            "readers": self.partition_count(table, parallelism),
            "not_null": table.required_columns(parsed.columns),
        }
        return core.source_options(source_schema(parsed.spec, parsed.columns), settings)

    def batch_bytes(self, table: core.TableConfig, start: Any | None, end: Any) -> int | None:
        """The file's bytes between the offsets (``{"line", "byte", "eof"}``)."""
        del table
        return max(0, int(end["byte"]) - (int(start["byte"]) if start else 0))

    def read_stream(self, spark: SparkSession, table: core.TableConfig,
                    parallelism: int) -> DataFrame:
        return core.load_stream(spark, SOURCE_NAME, self.reader_options(table, parallelism),
                                table.primary_key)

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        parsed = self._parse(table)
        if parsed.role != core.SINK:
            return super().create_sink(table, schema)
        check_sink_schema(parsed.spec, schema)
        return SingleFileSink(parsed.path, parsed.spec, table.name, parsed.given_path)
