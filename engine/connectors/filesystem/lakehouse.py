"""What the ``delta`` and ``iceberg`` sinks share: their Arrow schema and epoch commits.

Both are table formats with a typed schema, taken from the sink table's declared
columns (the planner casts every query writing the table to them), converted
Spark -> Arrow the way Spark's own ``toArrow`` does, every column nullable (a
lakehouse table's readers need no NOT NULL and a later pipeline may relax it).
Both name what a pipeline wrote by one application id, so that a replayed epoch
can be recognised in the table itself.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from typing import Any, ClassVar, Generic, TypeVar

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.core.executor_writes import write_partitions
from spate.engine.connectors.filesystem.lake_files import DataFiles

log = logging.getLogger(__name__)


def app_id(pipeline: str | None, table: str) -> str:
    """``spate-<tenant>/<pipeline>/<table>``: the writer's name in the table's log."""
    return f"spate-{pipeline}/{table}" if pipeline else f"spate-{table}"


def lake_columns(table: core.TableConfig, connector: str) -> tuple[core.ColumnDef, ...]:
    """The table's declared columns; a lakehouse table needs them."""
    if not table.columns:
        raise core.ConnectorError(
            f"{connector} sink '{table.name}' needs its columns declared: CREATE TABLE "
            f"{table.name} (col TYPE, ...) WITH (connector = '{connector}', ...)")
    return table.columns


def lake_schema(columns: tuple[core.ColumnDef, ...]) -> pa.Schema:
    """The Arrow schema of the table's columns, every field nullable."""
    spark = T.StructType([T.StructField(c.name, c.spark_type, True) for c in columns])
    try:
        return arrow_schema(spark)
    except (TypeError, ValueError, NotImplementedError) as error:
        raise core.ConnectorError(f"a column type has no Arrow equivalent: {error}") from None


def first_line(error: BaseException, *secrets: str | None) -> str:
    """The first line of ``error``'s text (at most 300 characters), ``secrets`` masked:
    what a message may show of a library's error."""
    text = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def check_append_only(df: DataFrame, connector: str, table: str) -> None:
    """The sinks append: an updating query (rows that withdraw rows) cannot write them."""
    if core.RETRACT in df.columns:
        raise core.ConnectorError(
            f"{connector} sink '{table}' only appends rows, but its query updates rows it "
            "wrote earlier (an aggregate without a window, a join); write it to a sink "
            "that takes updates or use a windowed query")


def table_columns(df: DataFrame, schema: pa.Schema) -> DataFrame:
    """``df``'s columns in the order of ``schema`` (the planner cast them already)."""
    if df.columns == schema.names:  # a projection costs a plan of its own: only if needed
        return df
    return df.select(*[F.col(f"`{name}`") for name in schema.names])


Settings = TypeVar("Settings")


class EpochAppendSink(core.Sink, Generic[Settings]):
    """A sink appending each epoch to a table in one commit tagged with its app id
    and the epoch; a replayed epoch the table already holds is skipped.

    The Spark tasks write the epoch's data files (:mod:`.lake_files`); the driver
    commits them. Subclasses open the table (setting ``_written``, the last epoch the
    table holds for this pipeline, from what the table says), say where and how the
    files are written (:meth:`_data_files`), commit them (:meth:`_commit`) and say
    the marker (:meth:`_marker`)."""

    #: the connector's name, in messages
    kind: ClassVar[str]

    def __init__(self, table: str, settings: Settings, schema: pa.Schema,
                 boundary: core.Boundary) -> None:
        self.table = table
        #: the table's settings, read from its options by its connector
        self.settings = settings
        self.schema = schema
        self.boundary = boundary
        #: the last epoch the table holds for this pipeline (-1: none to skip)
        self._written = -1

    @property
    def app_id(self) -> str:
        return app_id(self.pipeline, self.table)

    @abstractmethod
    def _opened(self) -> bool:
        """Whether :meth:`open` ran."""

    @abstractmethod
    def _data_files(self, epoch: int) -> DataFiles:
        """The writer of ``epoch``'s data files, run in each task."""

    @abstractmethod
    def _commit(self, epoch: int, files: list[dict[str, Any]]) -> None:
        """Commit the files the tasks reported (at least one) as ``epoch``."""

    @abstractmethod
    def _marker(self, epoch: int) -> dict[str, Any]:
        """The marker of ``epoch``, written or skipped."""

    def write_epoch(self, epoch: int, df: DataFrame) -> dict[str, Any]:
        if not self._opened():
            raise core.ConnectorError(f"{self.kind} sink '{self.table}' written before open()")
        if epoch <= self._written:
            log.info("epoch already in the table: skipped",
                     extra={"connector": self.kind, "table": self.table, "epoch": epoch})
            self.epoch_bytes = 0
            return self._marker(epoch)
        check_append_only(df, self.kind, self.table)
        files = write_partitions(table_columns(df, self.schema), self._data_files(epoch))
        self.epoch_bytes = sum(int(f["bytes"]) for f in files)
        if files:
            self._commit(epoch, files)
            self._written = epoch
        return self._marker(epoch)


class LakeConnector(core.Connector):
    """A table format's sink connector (Delta, Iceberg): the table's settings read from
    its options, its columns checked, one :class:`EpochAppendSink` per sink table."""

    roles = frozenset({core.SINK})
    #: the sink class, built from the table's name, settings, Arrow schema and boundary
    sink_class: ClassVar[type[EpochAppendSink[Any]]]

    @abstractmethod
    def read_settings(self, options: core.OptionReader, table: core.TableConfig) -> Any:
        """The table's settings, read from its options."""

    def _parse(self, table: core.TableConfig) -> Any:
        options = core.OptionReader(table)
        core.check_role(options, self.roles)
        core.reject_source_options(options)
        settings = self.read_settings(options, table)
        options.finish()
        lake_columns(table, self.name)
        return settings

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        self._parse(table)
        return table.columns

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        settings = self._parse(table)
        del schema  # the planner casts the query to the declared columns
        return self.sink_class(table.name, settings, lake_schema(table.columns), table.boundary)
