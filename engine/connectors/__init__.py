"""Spate's connectors: sources as Python streaming data sources, sinks as epoch writers.

The contract lives in :mod:`spate.engine.connectors.base`; ``CONNECTORS`` maps each
connector name of docs/sql/connectors.md to its implementation.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from pyspark.sql import SparkSession

from spate.engine.connectors.base import (
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
from spate.engine.connectors.impulse import ImpulseConnector, ImpulseDataSource
from spate.engine.connectors.nexmark import NexmarkConnector, NexmarkDataSource
from spate.engine.connectors.postgres_lookup import PostgresLookupConnector
from spate.engine.connectors.preview import PreviewConnector
from spate.engine.connectors.redis_lookup import RedisLookupConnector
from spate.engine.connectors.single_file import SingleFileConnector
from spate.engine.connectors.single_file_reader import SingleFileDataSource
from spate.engine.connectors.sinks import BlackholeConnector, StdoutConnector

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
