"""The watcher of an idle pipeline: no Spark, a look at its sources every few seconds.

A pipeline whose sources had no input for its idle period stops after a commit
(scale to zero, :mod:`spate.engine.runtime.idle`).
When a source cannot say when it will have more (a broker: only the broker knows),
the scheduler runs a watch job in the tenant's compute unit: this module, with the
pipeline's plan and its state store but no Spark.  It reads the offsets committed
with the pipeline's last epoch and asks each source whether it has input past them
(:meth:`~spate.engine.connectors.core.base.Connector.has_input_after`), every
:data:`WATCH_EVERY_S`.  When one has, or when a generator source's schedule comes
due, the watch ends ``idle`` due at once, and the scheduler starts the pipeline's
real job, which resumes from those same offsets.  A stop request ends it
``stopped``.  A source that cannot be reached is logged and asked again: the
pipeline stays idle until its input really arrives.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from spate.engine.connectors import CONNECTORS, ConnectorError
from spate.engine.planner import PipelinePlan
from spate.engine.runtime.offsets import StoredPosition
from spate.statestore import PipelineState

log = logging.getLogger(__name__)

#: How often the watcher asks the sources for input.
WATCH_EVERY_S = 2.0


@dataclass(frozen=True)
class Woken:
    """Why the watch ended: ``message``, and the wall-clock ms at which the pipeline is
    due (None: it was stopped)."""

    message: str
    due_ms: int | None


class SourceWatcher:
    """Watches one idle pipeline's sources from its committed offsets; stoppable."""

    def __init__(self, plan: PipelinePlan, state: PipelineState, parallelism: int,
                 every_s: float = WATCH_EVERY_S) -> None:
        self.plan = plan
        self.parallelism = parallelism
        self.every_s = every_s
        self.offsets: dict[str, Any] = StoredPosition.from_metadata(
            state.epoch_metadata()).offsets or {}
        self._stop = threading.Event()
        self._warned: dict[str, str] = {}

    # What a job's stop control needs (spate.engine.job.control.Stoppable).
    def request_stop(self) -> None:
        self._stop.set()

    def stop_now(self) -> None:
        self._stop.set()

    def run(self, on_start: Callable[[], None] = lambda: None) -> Woken:
        """Watch until input arrives, a schedule comes due or a stop is asked for."""
        due_ms = self._scheduled_ms()
        on_start()
        while True:
            table = self._source_with_input()
            now_ms = int(time.time() * 1000)
            if table is not None:
                return Woken(f"input arrived on '{table}': the pipeline resumes", now_ms)
            if due_ms is not None and now_ms >= due_ms:
                return Woken("its generated input is due: the pipeline resumes", due_ms)
            if self._stop.wait(self.every_s):
                return Woken("stopped while idle", None)

    def _scheduled_ms(self) -> int | None:
        """When the earliest source with a schedule (a generator) has input again."""
        due = [when for table in self.plan.sources
               if (when := CONNECTORS[table.config.connector].next_input_ms(
                   table.config, self.parallelism, self.offsets.get(table.name))) is not None]
        return min(due, default=None)

    def _source_with_input(self) -> str | None:
        for table in self.plan.sources:
            connector = CONNECTORS[table.config.connector]
            offset = self.offsets.get(table.name)
            if offset is None or connector.next_input_ms(table.config, self.parallelism,
                                                         offset) is not None:
                continue  # nothing committed to look past, or a schedule says when
            try:
                if connector.has_input_after(table.config, self.parallelism, offset):
                    return table.name
            except ConnectorError as error:
                self._warn(table.name, str(error))
        return None

    def _warn(self, table: str, message: str) -> None:
        """Log a source's failure once per distinct message, not every few seconds."""
        if self._warned.get(table) != message:
            self._warned[table] = message
            log.warning("cannot look for input on '%s': %s", table, message)
