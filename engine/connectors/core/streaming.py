"""Plumbing between connectors and PySpark's Python streaming data sources.

The driver validates a table once, then ships the parsed settings to the data
source as one JSON option; readers never re-parse user options.  A source
opened inside :func:`starting_at` also carries the offset it starts at (a
pipeline resuming from its state store), which its ``initialOffset`` returns.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ClassVar

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSource
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows

from spate.engine.connectors.core.base import HIDDEN_CONTROL, RETRACT, ROW_KEY
from spate.engine.connectors.core.errors import ConnectorError

#: The single reader option carrying a source's settings as JSON.
CONFIG_OPTION = "spate_config"
_SCHEMA_KEY = "stream_schema"
_START_KEY = "start_offset"
#: The reader option carrying a format's schema-registry settings (its credentials): a
#: name ``spark.redaction.regex`` matches, so Spark hides it wherever it prints options.
FORMAT_SECRET_OPTION = "spate_format_secret"

#: Source table name -> the offset it starts at, while :func:`starting_at` is active.
_START_OFFSETS: ContextVar[Mapping[str, Any] | None] = ContextVar("spate_start_offsets",
                                                                  default=None)


class SpateDataSource(DataSource):
    """Base of Spate's data sources: settings and schema come from :data:`CONFIG_OPTION`.

    A source sets ``source_name``, the name Spark opens it by (``spate_<system>``); a base
    several sources share sets none and is no source of its own."""

    source_name: ClassVar[str]

    @classmethod
    def name(cls) -> str:
        return cls.source_name

    def settings(self) -> dict[str, Any]:
        """The connector's settings, as :func:`load_stream` shipped them."""
        payload: dict[str, Any] = json.loads(self.options[CONFIG_OPTION])
        payload.pop(_SCHEMA_KEY, None)
        payload.pop(_START_KEY, None)
        registry = self.options.get(FORMAT_SECRET_OPTION)
        if registry is not None and isinstance(payload.get("format"), dict):
            payload["format"] = {**payload["format"], "registry": json.loads(registry)}
        return payload

    def start_offset(self) -> dict[str, Any] | None:
        """The offset the source resumes at (:func:`starting_at`); None: its beginning."""
        start: dict[str, Any] | None = json.loads(self.options[CONFIG_OPTION]).get(_START_KEY)
        return start

    def schema(self) -> T.StructType:
        payload = json.loads(self.options[CONFIG_OPTION])
        return T.StructType.fromJson(payload[_SCHEMA_KEY])


def source_options(schema: T.StructType, settings: dict[str, Any]) -> dict[str, str]:
    """The reader options carrying ``settings`` and the stream ``schema`` to a data source."""
    payload = dict(settings)
    payload[_SCHEMA_KEY] = schema.jsonValue()
    options: dict[str, str] = {}
    shipped_format = payload.get("format")
    if isinstance(shipped_format, dict) and shipped_format.get("registry") is not None:
        options[FORMAT_SECRET_OPTION] = json.dumps(shipped_format["registry"])
        payload["format"] = {**shipped_format, "registry": None}
    options[CONFIG_OPTION] = json.dumps(payload)
    return options


@contextmanager
def starting_at(offsets: Mapping[str, Any]) -> Iterator[None]:
    """Sources opened by :func:`load_stream` inside start at ``offsets[their table]``.

    A table ``offsets`` does not name starts at its beginning.  Spark asks a
    source for its initial offset only when its checkpoint has none.
    """
    token = _START_OFFSETS.set(offsets)
    try:
        yield
    finally:
        _START_OFFSETS.reset(token)


def load_stream(spark: SparkSession, source_name: str, options: dict[str, str],
                primary_key: tuple[str, ...] = ()) -> DataFrame:
    """A source table's streaming DataFrame: data source ``source_name`` with
    :func:`source_options`, its change rows keyed by ``primary_key`` (:func:`with_row_key`)."""
    payload = json.loads(options[CONFIG_OPTION])
    schema = T.StructType.fromJson(payload[_SCHEMA_KEY])
    start = (_START_OFFSETS.get() or {}).get(payload.get("table"))
    if start is not None:
        options = with_start_offset(options, start)
    register_data_source(spark, source_name)
    frame = spark.readStream.format(source_name).schema(schema).options(**options).load()
    return with_row_key(frame, primary_key)


def with_row_key(frame: DataFrame, primary_key: tuple[str, ...]) -> DataFrame:
    """Add :data:`ROW_KEY` (the primary key as JSON) after :data:`RETRACT`, if present.

    Computed natively over the decoded rows; NULL on control rows.
    """
    if RETRACT not in frame.columns:
        return frame
    key = F.to_json(F.struct(*(F.col(f"`{name}`") for name in primary_key)))
    columns: list[Column] = []
    for name in frame.columns:
        columns.append(F.col(f"`{name}`"))
        if name == RETRACT:
            columns.append(F.when(F.col(HIDDEN_CONTROL).isNull(), key).alias(ROW_KEY))
    return frame.select(*columns)


def register_data_source(spark: SparkSession, name: str) -> None:
    """Register the data source called ``name`` with ``spark`` (again is harmless).

    Sources are registered as a pipeline reads them: each registration is a round
    trip to the JVM with the pickled class (about 0.1 s), so registering all of
    them at session start cost every job more than a second.
    """
    found = [s for s in data_sources() if s.name() == name]
    if not found:
        from spate.engine.connectors import register_data_sources  # imports every connector

        register_data_sources(spark)
        return
    spark.dataSource.register(found[0])


def data_sources(base: type[SpateDataSource] | None = None) -> list[type[SpateDataSource]]:
    """Every :class:`SpateDataSource` subclass imported so far that names itself (a base
    shared by several sources, which does not, is no source of its own)."""
    found = []
    for cls in (base or SpateDataSource).__subclasses__():
        if "source_name" in vars(cls):
            found.append(cls)
        found.extend(data_sources(cls))
    return found


def with_start_offset(options: dict[str, str], offset: dict[str, Any]) -> dict[str, str]:
    """:func:`source_options` of a source that starts at ``offset``."""
    payload = json.loads(options[CONFIG_OPTION])
    return dict(options, **{CONFIG_OPTION: json.dumps(payload | {_START_KEY: offset})})


def initial_offset(start: dict[str, Any] | None, fresh: Callable[[], dict[str, Any]],
                   table: str) -> dict[str, Any]:
    """A reader's ``initialOffset``: ``start`` when resuming, else ``fresh()``.

    ``start`` must have the fields of the connector's offsets: an offset stored
    by another connector (the table was redefined) is refused.
    """
    offset = fresh()
    if start is None:
        return offset
    if set(start) != set(offset):
        raise ConnectorError(
            f"source '{table}' cannot resume at its stored offset {json.dumps(start)}: it is "
            f"not an offset of this connector (fields {', '.join(sorted(offset))}); the table "
            "was redefined since the state was written. Drop the pipeline's state to start "
            "afresh")
    return dict(start)


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
