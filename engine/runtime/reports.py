"""What a committed epoch reports: its rows, bytes and state, per operator.

The runner counts these figures itself while the epoch runs (rows per source,
per query and per sink; the bytes of state its writers staged), so reporting
costs no extra Spark job.  Progress display, job events and metrics read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spate.engine.planner.plan import PipelinePlan, WindowAggregate

#: ``OperatorReport.kind`` values.
SOURCE_OPERATOR, NATIVE_OPERATOR, WINDOW_OPERATOR, STATEFUL_OPERATOR, SINK_OPERATOR = (
    "source", "native", "window", "stateful", "sink")


@dataclass(frozen=True)
class OperatorReport:
    """One operator's rows in one epoch.

    Sources report ``rows_out`` (data rows read), sinks ``rows_in`` (rows
    written).  A query reports both: a native query's ``rows_in`` are the
    rows of the sources it reads; a query with Spate operators (kind
    ``window`` when all are window aggregates, else ``stateful``) reports the
    rows that reached its operators (after the query's own filters).  Its
    ``rows_out`` are the rows it sent to its sink.

    ``busy_s`` is the time the operator's own work took, where it can be told
    apart: a query's Spate operators, the mean time of their state tasks; a
    sink, its write (the Spark job that also runs the native steps feeding
    it).  Sources and native queries run inside those jobs: None.
    """

    operator: str
    kind: str
    rows_in: int | None = None
    rows_out: int | None = None
    rows_late: int | None = None
    busy_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The figures that apply to this kind of operator."""
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass
class EpochReport:
    """What one committed epoch did, for progress display and metrics."""

    epoch: int
    rows_in: int
    rows_out: int
    rows_late: int
    rows_dropped: int
    watermark_us: int
    duration_s: float
    finished: bool
    #: ``time.monotonic()`` when the epoch started (spacing between epochs).
    started_s: float = 0.0
    #: Wall-clock time of the commit, as stored in the epoch's metadata.
    committed_at_ms: int = 0
    #: Bytes of state values the epoch's tasks staged (deletions count 0).
    state_bytes: int = 0
    #: The tasks' state reads: key groups served by their process caches, those
    #: read from the store, and the bytes those reads returned.
    cache_hits: int = 0
    cache_misses: int = 0
    remote_bytes: int = 0
    operators: list[OperatorReport] = field(default_factory=list)
    #: Bytes the sources read from their systems and the sinks wrote to theirs, where
    #: their connectors measure them (:meth:`Connector.batch_bytes`, ``Sink.epoch_bytes``).
    bytes_in: int = 0
    bytes_out: int = 0
    #: The live state the store holds for the pipeline after the epoch (measured every
    #: few minutes: ``spate.engine.runtime.epoch.STATE_SIZE_EVERY_S``).
    state_held_bytes: int = 0
    #: Of ``rows_dropped``, the undecodable records written to dead-letter tables.
    rows_dead_lettered: int = 0
    #: Rows the sources hold past the epoch's end, as last measured (None: not known;
    #: :mod:`spate.engine.runtime.backlog`).
    backlog: int | None = None


class OperatorNames:
    """The names a plan's operators are reported under, and their per-epoch figures."""

    def __init__(self, plan: PipelinePlan) -> None:
        self.plan = plan
        #: A query is named by its sink; several queries into one sink get ``#<index>``.
        per_sink: dict[str, int] = {}
        for query in plan.queries:
            per_sink[query.sink] = per_sink.get(query.sink, 0) + 1
        self.queries = {q.index: q.sink if per_sink[q.sink] == 1 else f"{q.sink}#{q.index}"
                        for q in plan.queries}

    def reports(self, source_rows: dict[str, int], operator_rows: dict[int, tuple[int, int]],
                rows_by_query: dict[int, int], query_busy_s: dict[int, float] | None = None,
                sink_busy_s: dict[str, float] | None = None) -> list[OperatorReport]:
        """Per source, query and sink: the rows one epoch counted.  ``operator_rows``:
        query index -> (rows into its Spate operators, late rows); ``query_busy_s`` and
        ``sink_busy_s``: the seconds their own work took (see :class:`OperatorReport`)."""
        query_busy_s = query_busy_s or {}
        sink_busy_s = sink_busy_s or {}
        reports = [OperatorReport(f"source:{name}", SOURCE_OPERATOR, rows_out=rows)
                   for name, rows in source_rows.items()]
        sink_rows: dict[str, int] = {}
        for query in self.plan.queries:
            rows_out = rows_by_query.get(query.index, 0)
            sink_rows[query.sink] = sink_rows.get(query.sink, 0) + rows_out
            name = self.queries[query.index]
            if not query.operators:
                rows_in = sum(source_rows.get(s, 0) for s in query.sources)
                reports.append(OperatorReport(name, NATIVE_OPERATOR, rows_in, rows_out))
            else:
                operators_in, late = operator_rows.get(query.index, (0, 0))
                kind = WINDOW_OPERATOR if all(isinstance(o, WindowAggregate)
                                              for o in query.operators) else STATEFUL_OPERATOR
                reports.append(OperatorReport(name, kind, operators_in, rows_out, late,
                                              _seconds(query_busy_s.get(query.index))))
        # A sink its queries sent nothing this epoch was not written: it took no time.
        reports.extend(OperatorReport(f"sink:{name}", SINK_OPERATOR, rows_in=rows,
                                      busy_s=_seconds(sink_busy_s.get(name, 0.0)))
                       for name, rows in sink_rows.items())
        return reports


def _seconds(value: float | None) -> float | None:
    """A duration as reported: to the millisecond."""
    return None if value is None else round(value, 3)
