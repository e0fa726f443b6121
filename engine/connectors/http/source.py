"""The bases of the HTTP family's sources (``websocket``, ``sse``, ``polling_http``).

Each source module subclasses :class:`FeedDataSource` (the pyspark data source Spark
opens by name) and :class:`FeedSourceConnector` (the connector the planner calls), so
it says only what is its own: how its feed receives, which options it reads, and how
its ``reach`` check connects.  The feeds and their reader live in :mod:`.common`.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from pyspark.sql import types as T
from pyspark.sql.datasource import DataSourceStreamReader

from spate.engine.connectors import core
from spate.engine.connectors.http.common import (
    Feed,
    FeedReader,
    SourceTable,
    data_source_secret,
)


class FeedDataSource(core.SpateDataSource):
    """The data source of an HTTP-family source: a subclass gives its ``source_name`` and
    the :class:`~.common.Feed` that receives (``feed_class``)."""

    feed_class: ClassVar[type[Feed]]

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        """A :class:`~.common.FeedReader` of ``feed_class`` over the shipped settings,
        headers and start offset."""
        return FeedReader(self.settings(), data_source_secret(self.options), schema,
                          self.start_offset(), feed_class=self.feed_class)


class FeedSourceConnector(core.Connector):
    """The connector of an HTTP-family source: a subclass parses its table's options
    (:meth:`source_table`) and loads its stream; its columns and its batch limit
    follow from those options here."""

    roles = frozenset({core.SOURCE})

    @abstractmethod
    def source_table(self, table: core.TableConfig) -> SourceTable:
        """Check every option of ``table``; return the ones all HTTP sources share."""

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        return self.source_table(table).columns

    def batch_limit(self, table: core.TableConfig) -> int | None:
        return self.source_table(table).max_messages_per_batch
