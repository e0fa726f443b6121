"""The implicit ``preview`` sink of bare SELECTs: rows go to an in-process queue.

The engine creates it (it cannot be declared in SQL); a reader in the same
process takes ``channel(name).get()``: a list of row dicts per epoch, then
:data:`END_OF_STREAM` once the sink is closed.  Updating rows are shown as
changes (:func:`spate.engine.connectors.core.changes.change_rows`): an ``op`` column, then
the row's values.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.core.changes import change_rows

#: Put on a channel after the last epoch.
END_OF_STREAM = object()

_channels: dict[str, queue.Queue[Any]] = {}
_channels_lock = threading.Lock()


def channel(name: str) -> queue.Queue[Any]:
    """The queue of preview sink ``name`` (created on first use by sink or reader)."""
    with _channels_lock:
        found = _channels.get(name)
        if found is None:
            found = _channels[name] = queue.Queue()
        return found


def discard(name: str) -> None:
    """Forget channel ``name`` (a reader calls this once it saw the end)."""
    with _channels_lock:
        _channels.pop(name, None)


class PreviewSink(core.Sink):
    """Puts each epoch's rows on :func:`channel` ``(name)``."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._queue = channel(name)
        self._last_epoch = -1

    def open(self, marker: Any | None) -> None:
        del marker  # a preview restarts with the pipeline; nothing to restore

    def write_epoch(self, epoch: int, df: DataFrame) -> None:
        if epoch <= self._last_epoch:  # a replay in this process was already delivered
            return
        rows = [row.asDict(recursive=True) for row in change_rows(df).collect()]
        self._queue.put(rows)
        self._last_epoch = epoch

    def close(self) -> None:
        self._queue.put(END_OF_STREAM)


@core.register
class PreviewConnector(core.Connector):
    """``preview``: created by the engine for bare SELECTs, never declared."""

    name = "preview"
    roles = frozenset({core.SINK})
    declarable = False

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        raise core.ConnectorError(
            f"table '{table.name}': connector 'preview' cannot be declared; a bare SELECT "
            "writes to the preview automatically")

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        del schema
        return PreviewSink(table.name)
