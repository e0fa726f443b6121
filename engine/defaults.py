"""Defaults shared by the planner, the runtime and the job protocol, each
defined once here so that the job protocol needs no planner import."""

from __future__ import annotations

#: Default of ``pipeline.update-aggregate-flush-interval``: how often (ms of
#: processing time) an updating aggregate writes its changed groups; 0 means
#: every epoch.
DEFAULT_FLUSH_INTERVAL_MS = 1000
