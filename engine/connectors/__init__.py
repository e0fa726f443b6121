"""Spate's connectors: sources as Python streaming data sources, sinks as epoch writers.

The contract lives in :mod:`spate.engine.connectors.base`; ``CONNECTORS`` maps each
connector name of docs/sql/connectors.md to its implementation.
"""

from __future__ import annotations

import importlib
import pkgutil
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
    registered,
)
from spate.engine.connectors.metadata import OptionSpec
from spate.engine.connectors.streaming import SpateDataSource


def _import_connector_modules() -> None:
    """Import every module of this package: each connector registers itself
    (``@register``), so adding one is adding its module."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


_import_connector_modules()

#: Every connector by name (``preview`` included: the planner's implicit sink).
CONNECTORS: Mapping[str, Connector] = MappingProxyType(dict(sorted(registered().items())))

#: Declarable connectors → their options by name.
CONNECTOR_OPTIONS: Mapping[str, Mapping[str, OptionSpec]] = MappingProxyType({
    name: MappingProxyType({spec.name: spec for spec in connector.options})
    for name, connector in CONNECTORS.items() if connector.declarable
})


def register_data_sources(spark: SparkSession) -> None:
    """Register Spate's Python data sources (every :class:`SpateDataSource` a
    connector module defines) with ``spark``; safe to call again."""
    for source in _data_sources(SpateDataSource):
        spark.dataSource.register(source)


def _data_sources(base: type[SpateDataSource]) -> list[type[SpateDataSource]]:
    found = []
    for cls in base.__subclasses__():
        found.append(cls)
        found.extend(_data_sources(cls))
    return found


__all__ = [
    "CONNECTORS",
    "CONNECTOR_OPTIONS",
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
