"""The ``stdout`` and ``blackhole`` sinks (docs/sql/connectors.md)."""

from __future__ import annotations

import sys
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from spate.engine.connectors import core
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


class StdoutSink(core.Sink):
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


class BlackholeSink(core.Sink):
    """Discards rows, but still computes them (it is what benchmarks write to)."""

    def open(self, marker: Any | None) -> None:
        del marker

    def write_epoch(self, epoch: int, df: DataFrame) -> None:
        del epoch
        df.write.format("noop").mode("overwrite").save()

    def close(self) -> None:
        """Nothing to release."""


@core.register
class StdoutConnector(core.Connector):
    """``stdout``: a sink with a required ``format``."""

    name = "stdout"
    roles = frozenset({core.SINK})
    options = (*core.TYPE, LINE_FORMAT,
               *(spec for spec in core.FORMAT if spec is not core.FORMAT_OPTION))
    examples = {core.SINK: ({"format": "json"},)}

    def _parse(self, table: core.TableConfig) -> FormatSpec:
        options = core.OptionReader(table)
        core.check_role(options, self.roles)
        core.reject_source_options(options)
        require_line_format(options)
        spec = parse_format(options, core.SINK)
        options.finish()
        check_columns(spec, table.columns, core.SINK)
        return spec

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        self._parse(table)
        return table.columns

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        spec = self._parse(table)
        check_sink_schema(spec, schema)
        return StdoutSink(spec)


@core.register
class BlackholeConnector(core.Connector):
    """``blackhole``: a sink without options."""

    name = "blackhole"
    roles = frozenset({core.SINK})
    options = core.TYPE
    examples = {core.SINK: ({},)}

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        options = core.OptionReader(table)
        core.check_role(options, self.roles)
        core.reject_source_options(options)
        reject_format_options(options)
        options.finish()
        return table.columns

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        self.validate(table)
        del schema
        return BlackholeSink()
