"""The logical plan of a pipeline: what runs as native Spark SQL and what as
Spate's stateful operators."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spate.engine.connectors.core.base import RETRACT as RETRACT
from spate.engine.connectors.core.base import ROW_KEY as ROW_KEY

if TYPE_CHECKING:  # plan objects reach Spark's workers, which need no catalog
    from spate.engine.connectors.core.base import TableConfig
    from spate.engine.planner.catalog import Table
    from spate.engine.udf.signatures import UdfRegistry

#: Column names Spate adds to a source's rows; never visible to queries.
EVENT_TIME = "_spate_event_time"
WATERMARK = "_spate_watermark"
WINDOW_COLUMN = "__window"
#: Idle updating state lives 24 hours unless ``SET updating_ttl`` says otherwise (docs/sql/ddl.md).
DEFAULT_UPDATING_TTL_US = 24 * 3600 * 1_000_000
#: The column of an updating join side's input holding its join key (a string).
JOIN_KEY = "__spate_key"
#: Updating rows (docs/sql/updating.md) carry two hidden columns.  ``RETRACT`` is
#: true when the row withdraws a row sent earlier, false when it adds one;
#: ``ROW_KEY`` (a string) identifies the updated row (its group key or primary
#: key), so a withdrawal and an addition of one key in one epoch are an update.
#: An append-only stream has neither column.  They are defined (and imported
#: above) with the connectors, whose debezium_json sources produce them and sinks
#: consume them: ``RETRACT`` and ``ROW_KEY``.


@dataclass(frozen=True)
class WindowSpec:
    """TUMBLE, HOP or SESSION, in microseconds."""

    kind: str  # "tumble" | "hop" | "session"
    width_us: int
    slide_us: int
    gap_us: int = 0

    def describe(self) -> str:
        if self.kind == "session":
            return f"SESSION(gap={self.gap_us}us)"
        if self.kind == "tumble":
            return f"TUMBLE(width={self.width_us}us)"
        return f"HOP(slide={self.slide_us}us, width={self.width_us}us)"


@dataclass(frozen=True)
class AggregateCall:
    """One aggregate of a window operator over an input column ``a<i>``."""

    function: str  # count_star | count | count_distinct | sum | min | max | avg | ...
    argument: str | None
    output: str
    #: the fraction of percentile_cont (None for other functions)
    fraction: float | None = None


@dataclass(frozen=True)
class Stream:
    """What kind of rows a relation (table, subquery, SELECT) produces.

    ``window`` is set when its rows are results of TUMBLE/HOP/SESSION windows
    (a window aggregate's output, or a windowed join of two); such rows of one
    window all reach the next operator in the same epoch.  ``window_columns``
    are the output columns holding the window struct.  ``updating`` rows carry
    :data:`RETRACT` and :data:`ROW_KEY`.
    """

    updating: bool = False
    window: WindowSpec | None = None
    window_columns: frozenset[str] = frozenset()


APPEND_ONLY = Stream()


@dataclass(frozen=True)
class Operator:
    """A Spate operator inside a query: it reads native Spark SQL over the epoch's
    source views (and earlier operators' outputs) and its output is registered as
    the temporary view ``output_view`` for the SQL after it."""

    operator_id: str
    output_view: str

    def describe(self) -> str:
        """One line for ``explain``."""
        return self.operator_id

    def native_inputs(self) -> tuple[str, ...]:
        """The Spark SQL the operator reads (for ``explain``)."""
        return ()


@dataclass(frozen=True)
class WindowAggregate(Operator):
    """A Spate window operator: native pre-aggregation into panes, then state merge."""

    input_sql: str
    key_columns: tuple[str, ...]
    window: WindowSpec
    aggregates: tuple[AggregateCall, ...]

    def native_inputs(self) -> tuple[str, ...]:
        return (self.input_sql,)

    def describe(self) -> str:
        funcs = ", ".join(f"{a.function}({a.argument or '*'})" for a in self.aggregates)
        return (f"{self.operator_id}: {self.window.describe()} aggregate {funcs}; "
                "state in statestore by key group")


@dataclass(frozen=True)
class UpdatingAggregate(Operator):
    """A GROUP BY without a window: signed native partials, state merge, timed flushes."""

    input_sql: str
    key_columns: tuple[str, ...]
    aggregates: tuple[AggregateCall, ...]
    #: whether the input rows are updating (carry RETRACT): min/max keep multisets
    updating_input: bool
    #: SET updating_ttl (filled in once the whole script is read)
    ttl_us: int = DEFAULT_UPDATING_TTL_US

    def describe(self) -> str:
        funcs = ", ".join(f"{a.function}({a.argument or '*'})" for a in self.aggregates) \
            or "(none: DISTINCT)"
        keys = ", ".join(self.key_columns) or "(no keys)"
        return (f"{self.operator_id}: updating aggregate {funcs} by {keys}; state in "
                "statestore by key group, changes flushed every "
                "pipeline.update-aggregate-flush-interval")


@dataclass(frozen=True)
class UpdatingJoin(Operator):
    """Two append-only inputs joined on equalities, rows kept in state."""

    join_type: str
    #: the sides' names (their ON-clause qualifiers and output struct columns)
    left: str
    right: str
    #: Spark SQL giving each side's rows: its columns, event time, KEY, KEY_GROUP
    left_sql: str
    right_sql: str
    left_columns: tuple[str, ...]
    right_columns: tuple[str, ...]
    #: the ON clause, over views named ``left`` and ``right``
    condition_sql: str
    #: SET updating_ttl (filled in once the whole script is read)
    ttl_us: int = 0

    def native_inputs(self) -> tuple[str, ...]:
        return (self.left_sql, self.right_sql)

    def describe(self) -> str:
        return (f"{self.operator_id}: updating {self.join_type.upper()} JOIN on "
                f"{self.condition_sql}; rows in statestore by key group, kept "
                f"{self.ttl_us // 1_000_000} s after their key was last seen")


@dataclass(frozen=True)
class LookupJoin(Operator):
    """Appends to each row of ``input_sql`` the lookup-table row its key values name."""

    input_sql: str
    table: TableConfig
    #: columns of the input holding each PRIMARY KEY column's value, in key order
    key_inputs: tuple[str, ...]
    #: the output column of each column of the lookup table, in declaration order
    outputs: tuple[str, ...]
    #: LEFT JOIN: a row with no match is kept, the lookup columns NULL
    keep_unmatched: bool

    def describe(self) -> str:
        kind = "LEFT" if self.keep_unmatched else "INNER"
        keys = ", ".join(self.table.primary_key)
        return (f"{self.operator_id}: {kind} lookup join with {self.table.name} "
                f"({self.table.connector}) by {keys}; fetched per batch on executors")


@dataclass(frozen=True)
class QueryPlan:
    """One INSERT INTO (or bare SELECT) of the pipeline.

    ``operators`` run in order each epoch (an operator may read the output
    views of those before it); ``output_sql`` then reads their views and the
    source views.
    """

    index: int
    sink: str
    sources: tuple[str, ...]
    operators: tuple[Operator, ...]
    output_sql: str
    output_columns: tuple[str, ...]
    stream: Stream = APPEND_ONLY

    @property
    def aggregate(self) -> WindowAggregate | None:
        """The query's window aggregate when it has exactly one operator and that is one."""
        if len(self.operators) == 1 and isinstance(self.operators[0], WindowAggregate):
            return self.operators[0]
        return None

    @property
    def updating(self) -> bool:
        return self.stream.updating


@dataclass(frozen=True)
class PipelinePlan:
    """Everything the runner needs: tables and queries, in statement order."""

    tables: dict[str, Table]
    queries: tuple[QueryPlan, ...]
    #: The pipeline's Python UDFs, registered in its SparkSession before it runs.
    udfs: UdfRegistry | None = None
    #: ``SET updating_ttl``: how long updating state outlives its key's last row (µs)
    updating_ttl_us: int = DEFAULT_UPDATING_TTL_US

    @property
    def sources(self) -> list[Table]:
        names: list[str] = []
        for query in self.queries:
            names.extend(n for n in query.sources if n not in names)
        return [self.tables[n] for n in names]

    @property
    def bounded(self) -> bool:
        return all(t.bounded for t in self.sources)
