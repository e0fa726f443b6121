"""Plumbing between connectors and PySpark's Python streaming data sources.

The driver validates a table once, then ships the parsed settings to the data
source as one JSON option; readers never re-parse user options.
"""

from __future__ import annotations

import json
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

#: The single reader option carrying a source's settings as JSON.
CONFIG_OPTION = "spate_config"
_SCHEMA_KEY = "stream_schema"


class SpateDataSource(DataSource):
    """Base of Spate's data sources: settings and schema come from :data:`CONFIG_OPTION`."""

    def settings(self) -> dict[str, Any]:
        """The connector's settings, as :func:`load_stream` shipped them."""
        payload: dict[str, Any] = json.loads(self.options[CONFIG_OPTION])
        payload.pop(_SCHEMA_KEY, None)
        return payload

    def schema(self) -> T.StructType:
        payload = json.loads(self.options[CONFIG_OPTION])
        return T.StructType.fromJson(payload[_SCHEMA_KEY])


def source_options(schema: T.StructType, settings: dict[str, Any]) -> dict[str, str]:
    """The reader options carrying ``settings`` and the stream ``schema`` to a data source."""
    payload = dict(settings)
    payload[_SCHEMA_KEY] = schema.jsonValue()
    return {CONFIG_OPTION: json.dumps(payload)}


def load_stream(spark: SparkSession, source_name: str, options: dict[str, str]) -> DataFrame:
    """A streaming DataFrame over data source ``source_name`` with :func:`source_options`."""
    schema = T.StructType.fromJson(json.loads(options[CONFIG_OPTION])[_SCHEMA_KEY])
    return spark.readStream.format(source_name).schema(schema).options(**options).load()


def max_rows(limit: ReadLimit, default: int | None) -> int | None:
    """Rows a ``latestOffset`` call may admit: None = all available."""
    if isinstance(limit, ReadAllAvailable):
        return None
    if isinstance(limit, ReadMaxRows):
        return max(1, int(limit.max_rows))
    return default


def default_limit(rows: int | None) -> ReadLimit:
    """The read limit a source reports through ``getDefaultReadLimit``."""
    return ReadAllAvailable() if rows is None else ReadMaxRows(rows)
