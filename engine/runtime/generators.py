"""A pipeline's generator sources in its epochs: their offsets, their rows, their pace.

A generator (:mod:`spate.engine.connectors.generators.native`) streams one tick per
Spark batch.  Each epoch its offsets are computed (by
:class:`~spate.engine.runtime.offsets.BatchEpochs`, from the offsets committed
with the epoch before and the batch's logged trigger time), its ticks are
replaced by the rows between those offsets, computed natively, and after the
epoch the runner waits until its next row is due: a tick source always has a
batch to offer, so without that wait a trickle would run empty epochs back to
back.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from pyspark.sql import DataFrame

from spate.engine.connectors import CONNECTORS
from spate.engine.connectors.generators.native import GeneratorConnector
from spate.engine.planner.catalog import Table
from spate.engine.runtime.sources import with_rows

#: The longest wait after an epoch that read nothing, in a pipeline that reads other
#: sources besides its generators: their input is not known to be due at any time.
POLL_OTHERS_S = 1.0
#: Waits end this long after the row is due (ms): Spark dates batches to the millisecond.
_DUE_MARGIN_MS = 1


class Generators:
    """The generator sources among a pipeline's sources."""

    def __init__(self, sources: list[Table], parallelism: int) -> None:
        self.sources = sources
        self.parallelism = parallelism
        #: generator source table -> its connector
        self.connectors: dict[str, GeneratorConnector] = {}
        for table in sources:
            connector = CONNECTORS[table.config.connector]
            if isinstance(connector, GeneratorConnector):
                self.connectors[table.name] = connector
        self._tables = {t.name: t for t in sources if t.name in self.connectors}
        #: whether every source is a generator (then their schedules say when input is due)
        self.only = len(self.connectors) == len(sources)
        #: each generator's offset at the end of the last epoch that ran
        self._ends: dict[str, Any] = {}

    def advancers(self) -> dict[str, Callable[[Any | None, int], Any]]:
        """Per generator: its end offset from its start offset and the batch's time (ms)."""
        return {name: partial(connector.advance, self._tables[name].config, self.parallelism)
                for name, connector in self.connectors.items()}

    def batch(self, batch: DataFrame, offsets: Mapping[str, tuple[Any | None, Any]]
              ) -> DataFrame:
        """``batch`` with each generator's ticks replaced by its rows between ``offsets``
        (the epoch's ``(start, end)`` per source)."""
        if not self.connectors:
            return batch
        rows = {}
        for name, connector in self.connectors.items():
            start, end = offsets[name]
            rows[name] = connector.rows(batch.sparkSession, self._tables[name].config,
                                        self.parallelism, start, end)
            self._ends[name] = end
        return with_rows(batch, self.sources, rows)

    def wait_s(self, rows_in: int, now_ms: int | None = None) -> float:
        """How long to wait after an epoch that read ``rows_in`` rows before the next:
        until a generator's next row is due; in a pipeline with other sources only
        after an epoch that read nothing, and at most :data:`POLL_OTHERS_S`."""
        if not self.connectors or (not self.only and rows_in):
            return 0.0
        now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
        dues = [due for name, connector in self.connectors.items()
                if name in self._ends and (due := connector.next_input_ms(
                    self._tables[name].config, self.parallelism, self._ends[name])) is not None]
        if self.only:
            return 0.0 if not dues else max(0.0, (min(dues) + _DUE_MARGIN_MS - now_ms) / 1000)
        if not dues:
            return POLL_OTHERS_S
        return min(POLL_OTHERS_S, max(0.0, (min(dues) + _DUE_MARGIN_MS - now_ms) / 1000))
