"""Scale to zero: when a run may stop for want of input, and when to start it again.

A run that read nothing for ``idle_stop_s`` asks each source, from the offsets
of its last committed epoch, when it has more: a source with a schedule (a
generator's next row) says when; another says whether it has input now
(:meth:`~spate.engine.connectors.core.base.Connector.has_input_after`), and if not, a
watcher looks for it without Spark (:mod:`spate.engine.job.watch`).  A source
that cannot tell keeps the run going.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from spate.engine.connectors import CONNECTORS
from spate.engine.connectors.core.base import Connector, ConnectorError, TableConfig
from spate.engine.planner.plan import PipelinePlan

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class IdleStop:
    """Why a run may stop: whether a watcher must look for input, and when the earliest
    source with a schedule has some (None: none has one)."""

    watch_sources: bool
    wake_at_ms: int | None


class IdleWatch:
    """Tracks when input was last seen and decides whether the run may stop."""

    def __init__(self, plan: PipelinePlan, parallelism: int, idle_stop_s: float | None) -> None:
        self.plan = plan
        self.parallelism = parallelism
        self.idle_stop_s = idle_stop_s
        #: ``time.monotonic()`` of the last epoch that read input (or of the start)
        self.input_seen_s = time.monotonic()

    def input_seen(self) -> None:
        self.input_seen_s = time.monotonic()

    def due(self) -> bool:
        """Whether no input came for ``idle_stop_s`` (never, without one)."""
        return (self.idle_stop_s is not None
                and time.monotonic() - self.input_seen_s >= self.idle_stop_s)

    def decide(self, offsets: dict[str, Any] | None) -> IdleStop | None:
        """Whether the run may stop, given its last committed epoch's source ``offsets``
        (None: nothing committed yet).  None: it may not, and the next question waits
        another ``idle_stop_s``; so does a source whose input is due within that time
        (a slow or busy machine's trigger, not a quiet source)."""
        assert self.idle_stop_s is not None
        stop = None if offsets is None else self._sources_idle(offsets)
        soon_ms = time.time() * 1000 + self.idle_stop_s * 1000
        if stop is None or (stop.wake_at_ms is not None and stop.wake_at_ms < soon_ms):
            self.input_seen()
            return None
        return stop

    def _sources_idle(self, offsets: dict[str, Any]) -> IdleStop | None:
        due: list[int] = []
        watched = False
        for table in self.plan.sources:
            offset = offsets.get(table.name)
            if offset is None:
                return None
            connector = CONNECTORS[table.config.connector]
            when = connector.next_input_ms(table.config, self.parallelism, offset)
            if when is not None:
                due.append(when)
            elif _has_input(connector, table.config, self.parallelism, offset) is False:
                watched = True
            else:
                return None
        if not due and not watched:
            return None
        return IdleStop(watched, min(due, default=None))


def _has_input(connector: Connector, table: TableConfig, parallelism: int,
               offset: Any) -> bool | None:
    """The source's answer to whether it has input past ``offset``; None when it cannot
    tell, or cannot be reached now (the run goes on; it asks again after another idle
    period)."""
    try:
        return connector.has_input_after(table, parallelism, offset)
    except ConnectorError as error:
        log.info("source %s cannot tell whether it has input: %s", table.name, error)
        return None
