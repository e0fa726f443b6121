"""The connector contract shared by the planner, the runner and every connector.

A connector validates a table's WITH options (``validate``), turns a source
table into a streaming DataFrame (``read_stream``) and a sink table into a
:class:`Sink` the runner writes one epoch at a time (``create_sink``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from spate.engine.connectors.core.boundary import UNCONFINED, Boundary

# ConnectorError is re-exported: connectors import it from here with the contract.
from spate.engine.connectors.core.errors import ConnectorError as ConnectorError

if TYPE_CHECKING:
    from spate.engine.connectors.core.metadata import OptionSpec

#: INT: index of the source partition (reader) that produced the row.
HIDDEN_PARTITION = "_spate_partition"
#: TIMESTAMP: the connector's own event time for the row (NULL on control rows).
HIDDEN_TIMESTAMP = "_spate_timestamp"
#: STRING: NULL on data rows; ``eof`` or ``dropped:N`` on control rows.
HIDDEN_CONTROL = "_spate_control"
HIDDEN_COLUMNS = (HIDDEN_PARTITION, HIDDEN_TIMESTAMP, HIDDEN_CONTROL)

#: Updating rows (docs/sql/updating.md) carry two more hidden columns (the planner's
#: ``plan.RETRACT`` / ``plan.ROW_KEY``): BOOLEAN, true when the row withdraws a
#: row sent earlier; STRING, the key (group or primary key) of the updated row.
#: A ``debezium_json`` source's rows have both, before the three above.
RETRACT = "_spate_retract"
ROW_KEY = "_spate_key"

#: Control value of the one row a bounded source emits when it reaches its end.
CONTROL_EOF = "eof"
#: Prefix of the control row reporting records dropped under ``bad_data = 'drop'``.
CONTROL_DROPPED_PREFIX = "dropped:"

SOURCE = "source"
SINK = "sink"
#: The role of a table a lookup join reads (engine/connectors/core/lookup.py).
LOOKUP = "lookup"


@dataclass(frozen=True)
class ColumnDef:
    """A physical column of a connector table."""

    name: str
    spark_type: T.DataType
    nullable: bool = True


@dataclass(frozen=True)
class TableConfig:
    """A ``CREATE TABLE ... WITH (...)`` as the planner hands it to a connector.

    ``options`` hold every WITH option but ``connector``, values as strings with
    ``{{ ENV }}`` references already substituted.
    """

    name: str
    connector: str
    role: str
    options: Mapping[str, str]
    columns: tuple[ColumnDef, ...]
    #: the columns declared PRIMARY KEY, in declaration order (debezium_json, lookup)
    primary_key: tuple[str, ...] = ()
    #: what the table's connector may touch: the tenant's storage root and egress policy
    boundary: Boundary = UNCONFINED
    #: ``<tenant>/<pipeline>`` of the job reading the table, set by the runner before
    #: ``read_stream`` (None when planning), for sources that name themselves to their
    #: system (an MQTT session): two pipelines reading one table never share one
    owner: str | None = None
    #: metadata columns (``col type METADATA FROM 'key'``): column -> key, keys the planner
    #: checked against :meth:`Connector.metadata_fields`.  They are among ``columns`` but
    #: not in the records: the source fills them from what its system says of each record.
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def data_columns(self) -> tuple[ColumnDef, ...]:
        """The columns decoded from the records: ``columns`` less the metadata columns."""
        return tuple(c for c in self.columns if c.name not in self.metadata)

    def required_columns(self, columns: Iterable[ColumnDef] | None = None) -> list[str]:
        """The columns (of ``columns``, by default the table's) a decoded record must hold
        a value in: the NOT NULL ones and the PRIMARY KEY (a change record's key), never a
        metadata column, which its source fills."""
        return [c.name for c in (self.columns if columns is None else columns)
                if (not c.nullable or c.name in self.primary_key)
                and c.name not in self.metadata]


def hidden_fields() -> list[T.StructField]:
    """The Spark fields of the hidden columns every source appends."""
    return [
        T.StructField(HIDDEN_PARTITION, T.IntegerType(), True),
        T.StructField(HIDDEN_TIMESTAMP, T.TimestampType(), True),
        T.StructField(HIDDEN_CONTROL, T.StringType(), True),
    ]


def stream_schema(columns: tuple[ColumnDef, ...]) -> T.StructType:
    """The schema of a source's streaming DataFrame: physical then hidden columns.

    Physical columns are nullable at the top level whatever their declaration:
    control rows carry NULL in every physical column.
    """
    fields = [T.StructField(c.name, c.spark_type, True) for c in columns]
    return T.StructType(fields + hidden_fields())


class Sink(ABC):
    """An open sink the runner writes one epoch at a time, exactly once."""

    #: Bytes the last :meth:`write_epoch` wrote to the destination, as the destination
    #: stores them (None: the sink does not measure them); metered as ``bytes_out``.
    epoch_bytes: int | None = None
    #: ``<tenant>/<pipeline>`` the sink writes for, set by the runner before :meth:`open`
    #: (None: not known), for sinks that name themselves to their system (Kafka).
    pipeline: str | None = None

    @abstractmethod
    def open(self, marker: Any | None) -> None:
        """Restore the output to the last committed epoch (``marker``); None: fresh start."""

    @abstractmethod
    def write_epoch(self, epoch: int, df: DataFrame) -> Any:
        """Write an epoch's rows; return a small msgpack-able marker committed with it."""

    def committed(self, epoch: int) -> None:  # noqa: B027 (optional hook: no-op by default)
        """The engine committed ``epoch`` (with the marker :meth:`write_epoch` returned).

        A two-phase sink publishes here what :meth:`write_epoch` staged (files moved
        from their pending names, multipart uploads completed). A crash before this
        call leaves the publishing to the next :meth:`open`, whose marker names what
        the committed epoch staged; so publishing must be idempotent. Default: nothing.
        """

    @abstractmethod
    def close(self) -> None:
        """Release the sink's resources."""


@dataclass(frozen=True)
class BatchFacts:
    """What a source's offsets say about one batch (:meth:`Connector.batch_facts`)."""

    #: data rows the batch holds (control rows not counted)
    rows: int
    #: the input ended in this batch or before it
    finished: bool


class Connector(ABC):
    """One connector: option validation, a streaming source, a sink factory.

    A connector module declares its class with :func:`register`, which is all
    it takes for the planner, the API and Spark to know it (see the checklist
    in this package's README)."""

    name: str
    roles: frozenset[str]
    #: Every WITH option it knows (:class:`~.metadata.OptionSpec`), for settings kept
    #: outside the SQL (the API's connection profiles), and their secrets.
    options: ClassVar[tuple[OptionSpec, ...]] = ()
    #: Whether a CREATE TABLE may name it (the implicit preview sink may not).
    declarable: ClassVar[bool] = True
    #: WITH options of valid tables, by role (a lookup table's with an ``id`` key): the
    #: first of each is its simplest table, any others its other modes.  Its tests
    #: try every declared option on them.
    examples: ClassVar[Mapping[str, tuple[Mapping[str, str], ...]]] = {}

    @abstractmethod
    def validate(self, table: TableConfig) -> tuple[ColumnDef, ...]:
        """Check the role and every option; return the table's physical columns."""

    def metadata_fields(self, role: str) -> Mapping[str, tuple[T.DataType, ...]]:
        """The keys a table of ``role`` may read with ``METADATA FROM 'key'``, each with the
        column types it can fill (the first is the one to declare).  The source fills
        :attr:`TableConfig.metadata` columns of every data row (NULL on control rows)."""
        del role
        return {}

    def check_input(self, table: TableConfig, connect: bool = True) -> None:
        """Raise :class:`ConnectorError` (naming the option) when a source's input is
        plainly not there; what can only be known by reading is left to the job.
        ``connect``: whether it may connect to a remote system to know (not where the
        planning runs outside the tenant's compute unit: the API's)."""
        del table, connect

    def is_bounded(self, table: TableConfig) -> bool:
        """Whether the source ends by itself (sinks: False)."""
        del table
        return False

    def partition_count(self, table: TableConfig, parallelism: int) -> int:
        """Source partitions (readers) at ``parallelism``: rows carry their index."""
        del table, parallelism
        return 1

    def batch_facts(self, table: TableConfig, parallelism: int, start: Any | None,
                    end: Any) -> BatchFacts | None:
        """A batch's data rows and whether the input ended, from its offsets alone
        (``start`` None: the source's beginning).  None: only its rows can tell (bad
        records dropped, lines that are not rows), and the runner counts them as they
        pass, which costs a little per row."""
        del table, parallelism, start, end
        return None

    def reads_with_spark(self, table: TableConfig) -> bool:
        """Whether some of the source's rows may come from :meth:`spark_rows`."""
        del table
        return False

    def spark_rows(self, spark: SparkSession, table: TableConfig, parallelism: int,
                   start: Any | None, end: Any) -> DataFrame | None:
        """Rows of a batch that Spark's own reader reads, next to the rows the source's
        stream carries (``start`` None: the source's beginning): the stream's physical
        and hidden columns. None: the stream carries every row."""
        del spark, table, parallelism, start, end
        return None

    def batch_bytes(self, table: TableConfig, start: Any | None, end: Any) -> int | None:
        """The bytes a batch read from the source's system, from its offsets alone
        (``start`` None: the source's beginning); metered as ``bytes_in``.  None: not
        known (a generator reads nothing from outside)."""
        del table, start, end
        return None

    def batch_limit(self, table: TableConfig) -> int | None:
        """The most rows one batch of the source reads (None: all there is).  A batch
        that big is followed at once by the next: there may be more waiting
        (:mod:`spate.engine.runtime.pacing`)."""
        del table
        return None

    def next_input_ms(self, table: TableConfig, parallelism: int, offset: Any) -> int | None:
        """When (wall clock, ms) a source read up to ``offset`` has new input, where its
        offsets tell (a generator's schedule); None: only looking at the source can
        tell, or it has ended.  A pipeline stops for want of input (scale to zero)
        only when every source can say when it resumes."""
        del table, parallelism, offset
        return None

    def reach(self, options: Mapping[str, str], role: str | None, boundary: Boundary) -> str | None:
        """Connect to what ``options`` point at, for a table of ``role`` (None: a connection
        profile, role unknown), through ``boundary``'s egress policy, and say what was
        reached (the ``/test`` endpoints' answer).  None: the connector reaches nothing
        outside the job.  Raise :class:`ConnectorError` when it cannot be reached; the
        message must name no secret and be the same whatever made a refused address fail
        (no scanning through it)."""
        del options, role, boundary
        return None

    def has_input_after(self, table: TableConfig, parallelism: int, offset: Any) -> bool | None:
        """Whether a source read up to ``offset`` has more input now, by asking its system
        without Spark (a broker's end offsets, a stream's last id).  The runner asks it
        before stopping an idle pipeline, and the idle pipeline's watcher
        (:mod:`spate.engine.job.watch`) every few seconds after; None (the default): only
        reading can tell, so a pipeline with this source never stops for want of input
        unless :meth:`next_input_ms` says when it resumes.  May raise
        :class:`ConnectorError` when the system cannot be reached."""
        del table, parallelism, offset
        return None

    def backlog(self, table: TableConfig, parallelism: int, offset: Any) -> int | None:
        """How many records a source read up to ``offset`` has yet to read, asked of its
        system without Spark (a broker's end offsets); the run reports it every few
        seconds, and the autoscaler scales on it (:mod:`spate.engine.runtime.backlog`).
        None (the default): the source cannot tell.  May raise :class:`ConnectorError`."""
        del table, parallelism, offset
        return None

    def backlog_bytes(self, table: TableConfig, parallelism: int, offset: Any) -> int | None:
        """How many bytes a source read up to ``offset`` has yet to read, from a listing
        that reads no data (a folder's files): for a source that cannot count its records
        without reading them.  The run turns them into rows at the rows per byte the
        source has read so far (:mod:`spate.engine.runtime.backlog`); its connector must
        also measure :meth:`batch_bytes`.  None (the default): the source cannot tell.
        May raise :class:`ConnectorError`."""
        del table, parallelism, offset
        return None

    def read_stream(self, spark: SparkSession, table: TableConfig, parallelism: int) -> DataFrame:
        """A streaming DataFrame: physical columns then :data:`HIDDEN_COLUMNS`."""
        del spark, parallelism
        raise ConnectorError(f"connector '{self.name}' cannot be read: table '{table.name}' "
                             "is not a source")

    def create_sink(self, table: TableConfig, schema: T.StructType) -> Sink:
        """The sink writing ``schema``-shaped rows into ``table``."""
        del schema
        raise ConnectorError(f"connector '{self.name}' cannot be written: table "
                             f"'{table.name}' is not a sink")


def _strip_nullability(data_type: T.DataType) -> T.DataType:
    if isinstance(data_type, T.StructType):
        return T.StructType([T.StructField(f.name, _strip_nullability(f.dataType), True)
                             for f in data_type.fields])
    if isinstance(data_type, T.ArrayType):
        return T.ArrayType(_strip_nullability(data_type.elementType), True)
    return data_type


def check_fixed_columns(table: TableConfig, fixed: tuple[ColumnDef, ...]) -> tuple[ColumnDef, ...]:
    """A fixed-schema source: declared columns (if any) must match ``fixed``.

    Names and types must agree; nullability may be left out of the declaration.
    """
    if not table.columns:
        return fixed
    declared = [(c.name, _strip_nullability(c.spark_type)) for c in table.columns]
    expected = [(c.name, _strip_nullability(c.spark_type)) for c in fixed]
    if declared != expected:
        wanted = ", ".join(f"{c.name} {c.spark_type.simpleString()}" for c in fixed)
        raise ConnectorError(
            f"connector '{table.connector}' has the fixed schema ({wanted}); declare exactly "
            "these columns or none")
    return fixed


_REGISTERED: dict[str, Connector] = {}

C = TypeVar("C", bound=type[Connector])


def register(cls: C) -> C:
    """Class decorator: make a connector known by its ``name``."""
    connector = cls()
    if connector.name in _REGISTERED:
        raise ValueError(f"two connectors are named '{connector.name}'")
    _REGISTERED[connector.name] = connector
    return cls


def registered() -> dict[str, Connector]:
    """The connectors registered so far, by name."""
    return dict(_REGISTERED)
