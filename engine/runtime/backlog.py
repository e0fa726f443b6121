"""How far behind its sources a run is: the rows they hold past the last epoch's end.

The autoscaler (:mod:`spate.scheduler.autoscale`) scales a pipeline up when its backlog
would take too long to read. Only the run can measure it: the sources' systems are
reached from the tenant's compute unit, never from the control plane. So the run asks
each source (:meth:`~spate.engine.connectors.core.base.Connector.backlog`) every
:data:`MEASURE_EVERY_S`, in a thread of its own (a broker's answer takes a round trip,
which an epoch should not wait for), and each epoch's report carries the latest answer.
Only sources whose connector implements ``backlog`` are asked; the backlog is theirs
(None when none can tell), and a run without such a source measures nothing at all.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from spate.engine.connectors import CONNECTORS
from spate.engine.connectors.core.base import Connector
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
                        if type(CONNECTORS[table.config.connector]).backlog
                        is not Connector.backlog}
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

    def read_up_to(self, offsets: dict[str, Any]) -> None:
        """The end offsets of the latest epoch, by source table (a table missing: not read
        yet); the measuring starts with the first."""
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
                rows = CONNECTORS[table.connector].backlog(table, self.parallelism,
                                                           offsets[name])
            except Exception as error:  # noqa: BLE001 - a gauge never fails the run
                log.info("source %s cannot say its backlog now: %s", name, error)
                continue
            with self._lock:
                if rows is None:
                    del self._tables[name]
                    self._rows.pop(name, None)
                else:
                    self._rows[name] = rows
