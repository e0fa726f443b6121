"""The ``stdout`` and ``blackhole`` sinks (docs/sql/connectors.md)."""

from __future__ import annotations

import sys
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from spate.engine.connectors.core.base import (
    SINK,
    ColumnDef,
    Connector,
    Sink,
    TableConfig,
    register,
)
from spate.engine.connectors.core.metadata import FORMAT, FORMAT_OPTION, TYPE
from spate.engine.connectors.core.options import OptionReader, check_role, reject_source_options
from spate.engine.connectors.formats.records import (
    FormatSpec,
    check_columns,
    check_sink_schema,
    encoded_lines,
    parse_format,
    reject_format_options,
    require_line_format,
)
from spate.engine.connectors.single_file.connector import LINE_FORMAT


class StdoutSink(Sink):
    """Writes one encoded record per line to the process's standard output."""

    def __init__(self, spec: FormatSpec) -> None:
        self.spec = spec

    def open(self, marker: Any | None) -> None:
        del marker  # stdout cannot be rewound: at-least-once after a crash

    def write_epoch(self, epoch: int, df: DataFrame) -> None:
        del epoch
        text = encoded_lines(df, self.spec).decode("utf-8")
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()

    def close(self) -> None:
        sys.stdout.flush()


class BlackholeSink(Sink):
    """Discards rows, but still computes them (it is what benchmarks write to)."""

    def open(self, marker: Any | None) -> None:
        del marker

    def write_epoch(self, epoch: int, df: DataFrame) -> None:
        del epoch
        df.write.format("noop").mode("overwrite").save()

    def close(self) -> None:
        """Nothing to release."""


@register
class StdoutConnector(Connector):
    """``stdout``: a sink with a required ``format``."""

    name = "stdout"
    roles = frozenset({SINK})
    options = (*TYPE, LINE_FORMAT, *(spec for spec in FORMAT if spec is not FORMAT_OPTION))
    examples = {SINK: ({"format": "json"},)}

    def _parse(self, table: TableConfig) -> FormatSpec:
        options = OptionReader(table)
        check_role(options, self.roles)
        reject_source_options(options)
        require_line_format(options)
        spec = parse_format(options, SINK)
        options.finish()
        check_columns(spec, table.columns, SINK)
        return spec

    def validate(self, table: TableConfig) -> tuple[ColumnDef, ...]:
        self._parse(table)
        return table.columns

    def create_sink(self, table: TableConfig, schema: T.StructType) -> Sink:
        spec = self._parse(table)
        check_sink_schema(spec, schema)
        return StdoutSink(spec)


@register
class BlackholeConnector(Connector):
    """``blackhole``: a sink without options."""

    name = "blackhole"
    roles = frozenset({SINK})
    options = TYPE
    examples = {SINK: ({},)}

    def validate(self, table: TableConfig) -> tuple[ColumnDef, ...]:
        options = OptionReader(table)
        check_role(options, self.roles)
        reject_source_options(options)
        reject_format_options(options)
        options.finish()
        return table.columns

    def create_sink(self, table: TableConfig, schema: T.StructType) -> Sink:
        self.validate(table)
        del schema
        return BlackholeSink()
