"""The ``filesystem`` sink: files per epoch, published exactly once in two phases.

Each epoch's rows are written on the executors, each task its own rows
(:mod:`.core.executor_writes`): split by the partitioning (``field=value/``
directories, a strftime pattern of a timestamp column) and by the rolling policy
(records, bytes), each piece encoded as one file, staged by the task. Every file of
an epoch is closed with the epoch: a file never spans two epochs, which is what
makes the epoch the unit of exactly-once (and lets the epoch's length, not a timer,
decide how big files get).

``write_epoch`` only *stages* the files (:meth:`.Store.stage`) and returns a
marker naming them; ``committed`` publishes them on the driver. Final names are a
function of the epoch, the writing task's partition and the file's sequence in it
(``part-<epoch>-<writer>-<seq>.<ext>``), so an epoch replayed after a crash writes
the same names again, and ``open`` finishes the committed epoch's publishing
(idempotent) then drops whatever later, uncommitted epochs (or failed task attempts)
had staged: no duplicate and no orphan is ever visible under the final names.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.core.arrow_batches import join_lines
from spate.engine.connectors.core.executor_writes import write_partitions
from spate.engine.connectors.filesystem.file_formats import (
    EXTENSIONS,
    JSON,
    encode,
    estimate_row_bytes,
)
from spate.engine.connectors.filesystem.object_store import Store
from spate.engine.connectors.formats.records import FormatSpec, record_column

log = logging.getLogger(__name__)

#: The column of a json sink's epoch holding each row's line, encoded by Spark.
_LINE = "__spate_line"

# The WITH options of a sink's layout (read by :mod:`.connector`).
ROLLING_MAX_RECORDS = core.option("rolling_policy.max_records", core.SINKS, "the most rows in one "
                                                                            "file",
                                  kind=core.INTEGER)
ROLLING_FILE_SIZE = core.option("rolling_policy.file_size", core.SINKS,
                                "the largest file, estimated from "
                                "the rows' size in memory (`'64MB'`, `'1GB'`)", kind=core.SIZE,
                                default=128 << 20, default_text="`128MB`")
ROLLING_INTERVAL = core.option("rolling_policy.interval", core.SINKS,
                               "accepted for Arroyo's pipelines; files close with their epoch at "
                               "the latest anyway", kind=core.DURATION)
PARTITIONING_FIELDS = core.option("partitioning.fields", core.SINKS, "comma-separated columns; "
                                  "rows go under `column=value/` folders (Hive style, NULL is "
                                  "`__null__`)")
PARTITIONING_TIME_PATTERN = core.option("partitioning.time_pattern", core.SINKS, "a strftime "
                                        "pattern (`'%Y/%m/%d/%H'`) of a timestamp column naming "
                                        "the folders above the field ones")
PARTITIONING_TIME_FIELD = core.option("partitioning.time_field", core.SINKS, "the column "
                                      "`partitioning.time_pattern` formats",
                                      default_text="the first `TIMESTAMP` column")
SINK_OPTIONS = (ROLLING_FILE_SIZE, ROLLING_INTERVAL, ROLLING_MAX_RECORDS, PARTITIONING_FIELDS,
                PARTITIONING_TIME_PATTERN, PARTITIONING_TIME_FIELD)


@dataclass(frozen=True)
class SinkLayout:
    """How an epoch's rows become files."""

    kind: str
    #: columns whose values name ``column=value/`` directories, in order
    partition_fields: tuple[str, ...] = ()
    #: strftime pattern of ``time_field`` naming directories above the field ones
    time_pattern: str | None = None
    time_field: str | None = None
    max_records: int | None = None
    max_bytes: int | None = None


class FilesystemSink(core.Sink):
    """Writes each epoch as files under a store's root; marker
    ``{"epoch": n, "files": [[name, token], ...]}``."""

    def __init__(self, store: Store, layout: SinkLayout, schema: T.StructType,
                 table: str, spec: FormatSpec) -> None:
        self.store = store
        self.layout = layout
        #: how json lines are written (json.timestamp_format, json.decimal_encoding)
        self.spec = spec
        self.schema = schema
        self.table = table
        self._staged: dict[int, list[list[str]]] = {}

    def open(self, marker: Any | None) -> None:
        if marker is not None:
            epoch = int(marker["epoch"])
            for name, token in marker["files"]:
                self.store.publish(epoch, name, token)
        self.store.discard_staged()
        self._staged.clear()
        log.info("filesystem sink opened", extra={"table": self.table,
                                                  "epoch": None if marker is None
                                                  else marker["epoch"]})

    def write_epoch(self, epoch: int, df: DataFrame) -> dict[str, Any]:
        if self.layout.kind == JSON:  # lines encoded natively, next to the columns to split by
            layout = self.layout
            by = [*layout.partition_fields, *([layout.time_field] if layout.time_pattern
                                              and layout.time_field else [])]
            df = df.select(*(F.col(f"`{name}`") for name in dict.fromkeys(by)),
                           record_column(df, self.spec).alias(_LINE))
        reports = write_partitions(df, EpochFiles(self.store, self.layout, self.schema, epoch))
        files = sorted([report["name"], report["token"]] for report in reports)
        self.epoch_bytes = sum(int(report["bytes"]) for report in reports)
        self._staged[epoch] = files
        log.debug("epoch staged", extra={"table": self.table, "epoch": epoch,
                                         "files": len(files), "bytes": self.epoch_bytes})
        return {"epoch": epoch, "files": files}

    def committed(self, epoch: int) -> None:
        for name, token in self._staged.pop(epoch, []):
            self.store.publish(epoch, name, token)

    def close(self) -> None:
        self._staged.clear()


@dataclass(frozen=True)
class EpochFiles:
    """Stages one task's rows of an epoch as files (runs on the executors).

    The task's partition number is the writer's in every file name
    (``part-<epoch>-<writer>-<seq>``), so a replayed task writes the same names.
    """

    store: Store
    layout: SinkLayout
    schema: T.StructType
    epoch: int

    def __call__(self, partition: int, rows: pa.Table) -> list[dict[str, Any]]:
        kind = self.layout.kind
        reports = []
        for sequence, (directory, piece) in enumerate(_pieces(self.layout, rows)):
            name = (f"{directory}part-{self.epoch:010d}-{partition:03d}-{sequence:05d}."
                    f"{EXTENSIONS[kind]}")
            data = (join_lines(piece.column(_LINE)) if kind == JSON
                    else encode(kind, piece, self.schema))
            token = self.store.stage(self.epoch, name, data)
            reports.append({"name": name, "token": token, "bytes": len(data)})
        return reports


# -- splitting a task's rows into files ----------------------------------------------

def _pieces(layout: SinkLayout, table: pa.Table) -> list[tuple[str, pa.Table]]:
    """``(directory, rows)`` of each file ``table``'s rows make."""
    if table.num_rows == 0:
        return []
    pieces: list[tuple[str, pa.Table]] = []
    for directory, rows in _groups(layout, table):
        pieces.extend((directory, chunk) for chunk in _roll(layout, rows))
    return pieces


def _directories(layout: SinkLayout, table: pa.Table) -> list[str]:
    parts: list[list[str]] = [[] for _ in range(table.num_rows)]
    if layout.time_pattern is not None and layout.time_field is not None:
        times = table.column(layout.time_field).to_pylist()
        for index, value in enumerate(times):
            parts[index].append("__null__" if value is None
                                else value.strftime(layout.time_pattern).strip("/"))
    for name in layout.partition_fields:
        values = table.column(name).to_pylist()
        for index, value in enumerate(values):
            shown = "__null__" if value is None else quote(str(value), safe=" -.:@")
            parts[index].append(f"{name}={shown}")
    return ["".join(f"{p}/" for p in row) for row in parts]


def _groups(layout: SinkLayout, table: pa.Table) -> list[tuple[str, pa.Table]]:
    if not layout.partition_fields and layout.time_pattern is None:
        return [("", table)]
    directories = pa.array(_directories(layout, table), pa.string())
    # One sort and one take, then a slice per directory (not a filter per directory).
    order = pc.sort_indices(directories)
    rows, keys = table.take(order), directories.take(order).to_pylist()
    groups, start = [], 0
    for end in range(1, len(keys) + 1):
        if end == len(keys) or keys[end] != keys[start]:
            groups.append((keys[start], rows.slice(start, end - start)))
            start = end
    return groups


def _roll(layout: SinkLayout, rows: pa.Table) -> list[pa.Table]:
    per_file = rows.num_rows
    if layout.max_records is not None:
        per_file = min(per_file, layout.max_records)
    if layout.max_bytes is not None:
        sized = rows.select([_LINE]) if layout.kind == JSON else rows
        by_size = math.floor(layout.max_bytes / max(1.0, estimate_row_bytes(sized)))
        per_file = min(per_file, max(1, by_size))
    if per_file <= 0:
        raise core.ConnectorError("rolling policy leaves no room for a row",
                                  option=ROLLING_MAX_RECORDS.name)
    return [rows.slice(first, per_file) for first in range(0, rows.num_rows, per_file)]
