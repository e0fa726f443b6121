"""Spate's connectors: sources as Python streaming data sources (the generators as native
Spark), sinks as epoch writers.

The contract lives in :mod:`spate.engine.connectors.core.base`; ``CONNECTORS`` maps each
connector name of docs/sql/connectors.md to its implementation.

``CONNECTORS`` and ``CONNECTOR_OPTIONS`` are built on first use, by importing every
module of this package (each connector registers itself).  Until then only what is
imported is loaded: the Python processes Spark starts for a query's source or sink
import that connector's module alone, not every system's client library, which
keeps each of them some 40 MB smaller.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from pyspark.sql import SparkSession

from spate.engine.connectors.core.base import (
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
from spate.engine.connectors.core.metadata import OptionSpec
from spate.engine.connectors.core.streaming import data_sources

#: Every connector by name (``preview`` included: the planner's implicit sink).
CONNECTORS: Mapping[str, Connector]
#: Declarable connectors → their options by name.
CONNECTOR_OPTIONS: Mapping[str, Mapping[str, OptionSpec]]

_loading = threading.Lock()


def __getattr__(name: str) -> Any:
    """The registries, built on their first use (see the module's docstring)."""
    if name not in ("CONNECTORS", "CONNECTOR_OPTIONS"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _load()
    return globals()[name]


def _load() -> None:
    """Import every module of this package and its subpackages, so that each connector
    registers itself (``@register``): adding one is adding its package."""
    with _loading:
        if "CONNECTORS" in globals():
            return
        for module in pkgutil.walk_packages(__path__, prefix=f"{__name__}."):
            importlib.import_module(module.name)
        connectors = MappingProxyType(dict(sorted(registered().items())))
        globals()["CONNECTOR_OPTIONS"] = MappingProxyType({
            name: MappingProxyType({spec.name: spec for spec in connector.options})
            for name, connector in connectors.items() if connector.declarable})
        globals()["CONNECTORS"] = connectors


def register_data_sources(spark: SparkSession) -> None:
    """Register every Python data source of Spate's connectors with ``spark``; safe to
    call again.  A pipeline's own sources are registered as it reads them
    (:func:`~spate.engine.connectors.core.streaming.register_data_source`)."""
    _load()
    for source in data_sources():
        spark.dataSource.register(source)


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
