"""How far behind its sources a run is: the rows they hold past the last epoch's end.

The autoscaler (:mod:`spate.scheduler.autoscale`) scales a pipeline up when its backlog
would take too long to read. Only the run can measure it: the sources' systems are
reached from the tenant's compute unit, never from the control plane. So the run asks
each source (:meth:`~spate.engine.connectors.core.base.Connector.backlog`) every
:data:`MEASURE_EVERY_S`, in a thread of its own (a broker's answer takes a round trip,
which an epoch should not wait for), and each epoch's report carries the latest answer.
Only sources whose connector implements ``backlog`` are asked; the backlog is theirs
(None when none can tell), and a run without such a source measures nothing at all.

A source that cannot count its records without reading them (a folder of files)
tells the bytes it has yet to read instead (``backlog_bytes``, from a listing); they
count as rows at the rows per byte the run has read from that source so far, and not
at all before its first bytes are read.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping
from typing import Any

from spate.engine.connectors import CONNECTORS
from spate.engine.connectors.core.base import Connector, TableConfig
from spate.engine.planner.plan import PipelinePlan

log = logging.getLogger(__name__)

#: How often the sources are asked.
MEASURE_EVERY_S = 5.0


class BacklogGauge:
    """The rows the plan's sources hold past the offsets of the latest epoch."""

    def __init__(self, plan: PipelinePlan, parallelism: int,
                 every_s: float = MEASURE_EVERY_S) -> None:
        self.parallelism = parallelism
        self.every_s = every_s
        #: the sources asked: those whose connector can tell (one that answers None after
        #: all is dropped)
        self._tables = {table.name: table.config for table in plan.sources
                        if _tells(table.config.connector, "backlog")
                        or _tells(table.config.connector, "backlog_bytes")}
        #: of those, the sources that tell bytes (their rows per byte turn them into rows)
        self._in_bytes = {name for name, table in self._tables.items()
                          if not _tells(table.connector, "backlog")}
        #: per source telling bytes: the rows and bytes the run has read from it
        self._read: dict[str, tuple[int, int]] = {}
        self._offsets: dict[str, Any] = {}
        self._rows: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def measures(self) -> bool:
        """Whether any source of the run can say its backlog."""
        return bool(self._tables)

    @property
    def rows(self) -> int | None:
        """The latest backlog measured (None: no source can tell, or none measured yet)."""
        with self._lock:
            return sum(self._rows.values()) if self._rows else None

    def read_up_to(self, offsets: Mapping[str, Any],
                   read: Mapping[str, tuple[int, Any]] | None = None) -> None:
        """The end offsets of the latest epoch, by source table (a table missing: not read
        yet); the measuring starts with the first.  ``read``: per source, the rows the
        epoch read from it and its start offset (for the sources telling bytes)."""
        for name in self._in_bytes & set(read or {}):
            rows, start = (read or {})[name]
            end = offsets.get(name)
            if end is None:
                continue
            table = self._tables[name]
            size = CONNECTORS[table.connector].batch_bytes(table, start, end) or 0
            with self._lock:
                before_rows, before_bytes = self._read.get(name, (0, 0))
                self._read[name] = (before_rows + rows, before_bytes + size)
        with self._lock:
            self._offsets.update({name: end for name, end in offsets.items()
                                  if end is not None})
        if self._thread is None and self._tables:
            self._thread = threading.Thread(target=self._measure_until_stopped,
                                            name="backlog", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()

    def _measure_until_stopped(self) -> None:
        while self._tables and not self._stopped.is_set():
            self.measure()
            self._stopped.wait(self.every_s)

    def measure(self) -> None:
        """Ask every source that can tell, from the latest end offsets."""
        with self._lock:
            offsets = dict(self._offsets)
        for name, table in list(self._tables.items()):
            if name not in offsets:
                continue
            try:
                rows = self._ask(name, table, offsets[name])
            except _NotYet:
                continue
            except Exception as error:  # noqa: BLE001 - a gauge never fails the run
                log.info("source %s cannot say its backlog now: %s", name, error)
                continue
            with self._lock:
                if rows is None:
                    del self._tables[name]
                    self._rows.pop(name, None)
                else:
                    self._rows[name] = rows

    def _ask(self, name: str, table: TableConfig, offset: Any) -> int | None:
        """The source's backlog in rows (None: it cannot tell); raises :class:`_NotYet`
        for a source telling bytes whose rows per byte are not known yet."""
        connector = CONNECTORS[table.connector]
        if name not in self._in_bytes:
            return connector.backlog(table, self.parallelism, offset)
        left = connector.backlog_bytes(table, self.parallelism, offset)
        if left is None:
            return None
        with self._lock:
            rows, size = self._read.get(name, (0, 0))
        if left == 0:
            return 0
        if size <= 0:
            raise _NotYet
        return math.ceil(left * rows / size)


class _NotYet(Exception):
    """A source's backlog cannot be told in rows yet."""


def _tells(connector: str, method: str) -> bool:
    """Whether ``connector`` implements ``method`` (rather than the contract's None)."""
    return getattr(type(CONNECTORS[connector]), method) is not getattr(Connector, method)
