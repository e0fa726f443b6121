"""Spate's connectors: sources as Python streaming data sources, sinks as epoch writers.

The contract lives in :mod:`engine.connectors.base`; ``CONNECTORS`` maps each
connector name of SQL.md 1.3 to its implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pyspark.sql import SparkSession

from engine.connectors.base import (
    HIDDEN_COLUMNS,
    HIDDEN_CONTROL,
    HIDDEN_PARTITION,
    HIDDEN_TIMESTAMP,
    ColumnDef,
    Connector,
    ConnectorError,
    Sink,
    TableConfig,
)
from engine.connectors.impulse import ImpulseConnector, ImpulseDataSource
from engine.connectors.nexmark import NexmarkConnector, NexmarkDataSource
from engine.connectors.postgres_lookup import PostgresLookupConnector
from engine.connectors.preview import PreviewConnector
from engine.connectors.redis_lookup import RedisLookupConnector
from engine.connectors.single_file import SingleFileConnector
from engine.connectors.single_file_reader import SingleFileDataSource
from engine.connectors.sinks import BlackholeConnector, StdoutConnector

CONNECTORS: Mapping[str, Connector] = MappingProxyType({
    connector.name: connector
    for connector in (SingleFileConnector(), ImpulseConnector(), NexmarkConnector(),
                      StdoutConnector(), BlackholeConnector(), PreviewConnector(),
                      RedisLookupConnector(), PostgresLookupConnector())
})

_DATA_SOURCES = (SingleFileDataSource, ImpulseDataSource, NexmarkDataSource)


def register_data_sources(spark: SparkSession) -> None:
    """Register Spate's Python data sources with ``spark`` (safe to call again)."""
    for source in _DATA_SOURCES:
        spark.dataSource.register(source)


__all__ = [
    "CONNECTORS",
    "HIDDEN_COLUMNS",
    "HIDDEN_CONTROL",
    "HIDDEN_PARTITION",
    "HIDDEN_TIMESTAMP",
    "ColumnDef",
    "Connector",
    "ConnectorError",
    "Sink",
    "TableConfig",
    "register_data_sources",
]
