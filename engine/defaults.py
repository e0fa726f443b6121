"""Defaults shared by the planner, the runtime, the job protocol, the scheduler
and the API, each defined once here (the job protocol needs no planner import,
and no layer restates another's default)."""

from __future__ import annotations

#: Default of ``pipeline.update-aggregate-flush-interval``: how often (ms of
#: processing time) an updating aggregate writes its changed groups; 0 means
#: every epoch.
DEFAULT_FLUSH_INTERVAL_MS = 1000

#: Default of a source's ``idle_micros`` (docs/sql/ddl.md): after this much wall-clock
#: time (µs) without rows, a source partition stops holding the watermark back.
DEFAULT_IDLE_MICROS = 300_000_000

#: The state store ``spate run``, ``spate serve`` and the scheduler use unless told
#: otherwise: a SQLite file in ``.spate/`` under the working directory.
DEFAULT_STATE_URL = "sqlite:///.spate/state.db"

#: Rate-adaptive epochs (:mod:`spate.engine.runtime.pacing`): an epoch that read at
#: least this many rows is followed by the next at once ...
DEFAULT_EPOCH_MIN_ROWS = 100

#: ... and after a smaller one a pipeline waits for that many rows, at most this long
#: (ms; 0: epochs back to back, as Spark's default trigger).
DEFAULT_EPOCH_MAX_DELAY_MS = 5000
