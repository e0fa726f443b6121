"""``nats`` (docs/sql/connectors.md): NATS core subjects and JetStream streams.

Delivery guarantees:

- JetStream source (``nats.stream``): exactly-once into Spate. The offset is
  the stream sequence; each epoch reads the sequences ``(start, end]``
  (:mod:`.source`), so replays read the same messages while the stream
  retains them.
- Core source (``nats.subject``): at-most-once; what the subscription receives
  is handed to the next epoch, and nothing is replayed.
- Sink to ``nats.subject``: core publish, at-most-once; with ``nats.stream``,
  JetStream publish with a ``Nats-Msg-Id`` per record (the sink's producer id,
  the epoch and the record's digest and occurrence) waiting for every PubAck:
  a replayed epoch's messages are dropped by the stream's duplicate window, so
  exactly-once when the replay comes within that window. Each Spark task
  publishes its own rows over a connection of its own, so no record passes
  through the driver; with a stream, the epoch's records are first spread over
  the tasks by their bytes, so equal records (whose ids count their occurrences)
  meet in one task.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import nats
import pyarrow as pa
from nats.aio.client import Client as NatsClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from spate.engine.connectors import core
from spate.engine.connectors.core.executor_writes import write_partitions
from spate.engine.connectors.formats.records import (
    FormatSpec,
    check_sink_schema,
    encode_records,
    message_columns,
    parse_format,
    record_bytes,
    source_schema,
)
from spate.engine.connectors.nats.client import (
    AUTH_PASSWORD,
    AUTH_TYPE,
    AUTH_USERNAME,
    NATS_STREAM,
    NATS_SUBJECT,
    SERVERS,
    ConnectSettings,
    connect,
    connect_error,
    parse_servers,
    run_sync,
)
from spate.engine.connectors.nats.jetstream import jetstream_error, last_sequence, publish_all
from spate.engine.connectors.nats.source import (
    CORE_SOURCE,
    DELIVER_ALL,
    DELIVER_BY_START_SEQUENCE,
    DELIVER_NEW,
    JETSTREAM_SOURCE,
    PASSWORD_OPTION,
)

log = logging.getLogger(__name__)

#: An ``auth.type`` refused as not supported yet (rather than as unknown).
_AUTH_NOT_YET = "jwt"
_DELIVER_NOT_YET = ("last", "last_per_subject", "by_start_time")
#: Arroyo's consumer settings: Spate reads with its own ephemeral consumer per batch.
_CONSUMER_NOT_YET = ("ack_policy", "replay_policy", "ack_wait", "description",
                     "sample_frequency", "num_replicas", "inactive_threshold", "rate_limit",
                     "max_ack_pending", "max_deliver", "max_waiting", "max_batch", "max_bytes",
                     "max_expires")

# The connection's options (servers, auth.*, nats.stream, nats.subject) are declared
# in :mod:`.client`, whose errors name them.
DELIVER_POLICY = core.option("nats.consumer.deliver_policy", core.SOURCES, "JetStream ones: where "
                             "a new pipeline starts: `all` (the stream's first message), `new` "
                             "(after the last message when the pipeline starts) or "
                             "`by_start_sequence`; `last`, `last_per_subject` and `by_start_time` "
                             "are not supported yet",
                             choices=(DELIVER_ALL, DELIVER_NEW, DELIVER_BY_START_SEQUENCE),
                             default=DELIVER_ALL)
START_SEQUENCE = core.option("nats.consumer.start_sequence", core.SOURCES,
                             "the first stream sequence "
                             "read", kind=core.INTEGER, required_when="with `by_start_sequence`")
FILTER_SUBJECTS = core.option("nats.consumer.filter_subjects", core.SOURCES, "JetStream ones: read "
                              "only the messages of this subject (one subject, wildcards allowed; "
                              "several are not supported yet)", default_text="the whole stream")
MAX_MESSAGES_PER_BATCH = core.option("max_messages_per_batch", core.SOURCES, "JetStream ones: "
                                     "stream sequences per epoch at most", default=100_000)
#: The options of JetStream sources only.
_JETSTREAM_SOURCE = (DELIVER_POLICY, START_SEQUENCE, FILTER_SUBJECTS, MAX_MESSAGES_PER_BATCH)


@dataclass(frozen=True)
class NatsTable:
    """A validated ``nats`` table."""

    role: str
    connect: ConnectSettings
    subject: str | None
    stream: str | None
    spec: FormatSpec
    columns: tuple[core.ColumnDef, ...]
    deliver_policy: str
    start_sequence: int | None
    filter_subject: str | None
    max_messages_per_batch: int


def _connect_settings(options: core.OptionReader) -> ConnectSettings:
    servers = parse_servers(options.required(SERVERS))
    auth = options.choice(AUTH_TYPE, (*AUTH_TYPE.choices, _AUTH_NOT_YET))
    if auth == _AUTH_NOT_YET:
        raise core.ConnectorError(f"option '{AUTH_TYPE.name}' = '{_AUTH_NOT_YET}' is not supported "
                                  "yet; use 'none' or 'credentials'", option=AUTH_TYPE.name)
    if auth == "credentials":
        return ConnectSettings(servers, options.required(AUTH_USERNAME),
                               options.required(AUTH_PASSWORD))
    for key in (AUTH_USERNAME, AUTH_PASSWORD):
        if key in options:
            raise core.ConnectorError(f"option '{key.name}' needs '{AUTH_TYPE.name}' = "
                                      "'credentials'", option=key.name)
    return ConnectSettings(servers)


def _subject_or_stream(options: core.OptionReader, role: str) -> tuple[str | None, str | None]:
    subject = options.string(NATS_SUBJECT)
    stream = options.string(NATS_STREAM)
    subject = subject.strip() if subject is not None else None
    stream = stream.strip() if stream is not None else None
    if role == core.SINK and not subject:
        raise core.ConnectorError(f"a nats sink needs option '{NATS_SUBJECT.name}' (and "
                                  f"'{NATS_STREAM.name}' to publish through JetStream)",
                                  option=NATS_SUBJECT.name)
    if role == core.SOURCE and (subject is None) == (stream is None):
        raise core.ConnectorError(f"a nats source needs exactly one of '{NATS_STREAM.name}' "
                                  f"(JetStream) and '{NATS_SUBJECT.name}' (core NATS)",
                                  option=NATS_STREAM.name)
    for key, value in ((NATS_SUBJECT, subject), (NATS_STREAM, stream)):
        if value is not None and (not value or any(c.isspace() for c in value)):
            raise core.ConnectorError(f"option '{key.name}' must be a name without spaces, not "
                                      f"'{value}'", option=key.name)
    if stream is not None and any(c in stream for c in ".*>"):
        raise core.ConnectorError(f"option '{NATS_STREAM.name}' names a stream; '{stream}' holds "
                                  "'.', '*' or '>'", option=NATS_STREAM.name)
    return subject, stream


def _consumer(options: core.OptionReader, jetstream_source: bool) -> tuple[str, int | None,
                                                                           str | None]:
    """``nats.consumer.*``: the deliver policy, start sequence and filter subject."""
    for name in _CONSUMER_NOT_YET:
        options.reject(f"nats.consumer.{name}", "is not supported yet: Spate reads each batch "
                                               "with an ephemeral consumer of its own; remove it")
    if not jetstream_source:
        for key in _JETSTREAM_SOURCE:
            if key in options:
                raise core.ConnectorError(f"option '{key.name}' applies to JetStream sources (with "
                                          f"'{NATS_STREAM.name}') only", option=key.name)
        return DELIVER_ALL, None, None
    raw_policy = (options.string(DELIVER_POLICY) or DELIVER_ALL).strip().lower()
    if raw_policy in _DELIVER_NOT_YET:
        raise core.ConnectorError(f"option '{DELIVER_POLICY.name}' = '{raw_policy}' is not "
                                  "supported yet; use 'all', 'new' or 'by_start_sequence'",
                                  option=DELIVER_POLICY.name)
    policy = options.choice(DELIVER_POLICY) or DELIVER_ALL
    start = options.integer(START_SEQUENCE, minimum=1)
    if (policy == DELIVER_BY_START_SEQUENCE) != (start is not None):
        raise core.ConnectorError(f"option '{START_SEQUENCE.name}' goes with (and only with) "
                                  f"'{DELIVER_POLICY.name}' = '{DELIVER_BY_START_SEQUENCE}'",
                                  option=START_SEQUENCE.name)
    filters = [s.strip() for s in (options.string(FILTER_SUBJECTS) or "").split(",")
               if s.strip()]
    if len(filters) > 1:
        raise core.ConnectorError(f"option '{FILTER_SUBJECTS.name}': more than one subject is not "
                                  "supported yet; give one (wildcards allowed)",
                                  option=FILTER_SUBJECTS.name)
    return policy, start, filters[0] if filters else None


@core.register
class NatsConnector(core.Connector):
    """Core NATS subjects and JetStream streams, as sources and sinks."""

    name = "nats"
    roles = frozenset({core.SOURCE, core.SINK})
    options = (*core.TYPE, SERVERS, AUTH_TYPE, AUTH_USERNAME, AUTH_PASSWORD, NATS_STREAM,
               NATS_SUBJECT, *_JETSTREAM_SOURCE,
               *(spec for spec in core.FORMAT if spec is not core.FRAMING),  # framing is refused
               *core.MESSAGE_RECORDS)
    examples = {
        core.SOURCE: ({"type": "source", "format": "json", "json.unstructured": "true",
                       "servers": "nats://h:4222", "nats.stream": "s"},),
        core.SINK: ({"type": "sink", "format": "json", "servers": "nats://h:4222",
                     "nats.subject": "s"},)}

    def _parse(self, table: core.TableConfig) -> NatsTable:
        options = core.OptionReader(table)
        role = core.check_role(options, self.roles)
        connect_settings = _connect_settings(options)
        subject, stream = _subject_or_stream(options, role)
        options.reject(core.FRAMING, "is not supported yet by nats: one message is one record")
        spec = parse_format(options, role)
        policy, start, filter_subject = _consumer(options, role == core.SOURCE and bool(stream))
        max_messages = MAX_MESSAGES_PER_BATCH.default
        if role == core.SOURCE:
            core.check_source_options(options)
            max_messages = options.integer(MAX_MESSAGES_PER_BATCH, minimum=1) or max_messages
        else:
            core.reject_source_options(options)
        options.finish()
        columns = message_columns(table, spec, role)
        if table.boundary.egress is not None:
            for server in connect_settings.servers:
                table.boundary.egress.check_literal(server.host, server.port,
                                                    option=SERVERS.name)
        if table.boundary.egress is not None:
            connect_settings = replace(connect_settings, boundary=table.boundary.to_dict(),
                                       egress=table.boundary.egress)
        return NatsTable(role, connect_settings, subject, stream, spec, columns, policy, start,
                         filter_subject, max_messages)

    def metadata_fields(self, role: str) -> Mapping[str, tuple[T.DataType, ...]]:
        """The subject a source's message was published to."""
        return {"subject": (T.StringType(),)} if role == core.SOURCE else {}

    def validate(self, table: core.TableConfig) -> tuple[core.ColumnDef, ...]:
        return self._parse(table).columns

    def batch_limit(self, table: core.TableConfig) -> int | None:
        parsed = self._parse(table)
        if parsed.stream and parsed.role == core.SOURCE:
            return parsed.max_messages_per_batch
        return None

    def reader_options(self, table: core.TableConfig) -> tuple[str, dict[str, str]]:
        """The data source reading ``table`` and its options (:func:`source_options`)."""
        parsed = self._parse(table)
        if parsed.role != core.SOURCE:
            raise core.ConnectorError(f"nats table '{table.name}' is a sink; it cannot be read",
                                      option=core.TYPE_OPTION.name)
        connect_settings = parsed.connect.to_dict()
        password = connect_settings.pop("password")
        settings = {
            "table": table.name,
            "connect": connect_settings,
            "stream": parsed.stream,
            "subject": parsed.subject,
            "format": parsed.spec.to_dict(),
            "deliver_policy": parsed.deliver_policy,
            "start_sequence": parsed.start_sequence,
            "filter_subject": parsed.filter_subject,
            "max_messages_per_batch": parsed.max_messages_per_batch,
            "not_null": table.required_columns(parsed.columns),
            "metadata": dict(table.metadata),
        }
        name = JETSTREAM_SOURCE if parsed.stream else CORE_SOURCE
        options = core.source_options(source_schema(parsed.spec, parsed.columns), settings)
        if password is not None:
            options[PASSWORD_OPTION] = password
        return name, options

    def backlog(self, table: core.TableConfig, parallelism: int, offset: Any) -> int | None:
        """JetStream: the sequences the stream holds past ``offset``'s (its last sequence
        less the one read; messages deleted in between count too).  Core subjects keep
        nothing for an absent subscriber: None."""
        del parallelism
        parsed = self._parse(table)
        if parsed.role != core.SOURCE or parsed.stream is None:
            return None
        return run_sync(_messages_after(parsed.connect, parsed.stream, int(offset["sequence"])))

    def has_input_after(self, table: core.TableConfig, parallelism: int,
                        offset: Any) -> bool | None:
        """JetStream: whether the stream's last sequence is past ``offset``'s.  Core
        subjects cannot be watched (None), so such a pipeline never stops for want of
        input."""
        backlog = self.backlog(table, parallelism, offset)
        return None if backlog is None else backlog > 0

    def read_stream(self, spark: SparkSession, table: core.TableConfig,
                    parallelism: int) -> DataFrame:
        del parallelism  # one reader: a stream is read in sequence order
        name, options = self.reader_options(table)
        return core.load_stream(spark, name, options, table.primary_key)

    def create_sink(self, table: core.TableConfig, schema: T.StructType) -> core.Sink:
        parsed = self._parse(table)
        if parsed.role != core.SINK:
            return super().create_sink(table, schema)
        check_sink_schema(parsed.spec, schema)
        return NatsSink(table.name, parsed)

    def reach(self, options: Mapping[str, str], role: str | None, boundary: core.Boundary) -> str:
        """Connect with the servers and credentials, and look up ``nats.stream`` if named."""
        reader = core.OptionReader(core.TableConfig("test", self.name, role or core.SINK, options,
                                                    ()))
        connect_settings = _connect_settings(reader)
        stream = (reader.string(NATS_STREAM) or "").strip() or None
        if boundary.egress is not None:
            for server in connect_settings.servers:
                boundary.egress.check_literal(server.host, server.port, option=SERVERS.name)
            connect_settings = replace(connect_settings, boundary=boundary.to_dict(),
                                       egress=boundary.egress)
        return run_sync(_reach(connect_settings, stream))


async def _messages_after(connect_settings: ConnectSettings, stream: str,
                          sequence: int) -> int:
    what = f"nats source stream '{stream}'"
    client = await connect(connect_settings, what)
    try:
        return max(0, await last_sequence(client, stream) - sequence)
    except nats.errors.Error as error:
        raise jetstream_error(what, stream, error) from None
    finally:
        await client.close()


async def _reach(connect_settings: ConnectSettings, stream: str | None) -> str:
    what = "nats connection test"
    client = await connect(connect_settings, what)
    try:
        version = client.connected_server_version
        message = (f"reached NATS server {version.major}.{version.minor}.{version.patch} at "
                   f"{connect_settings.shown}")
        if stream is None:
            return message
        try:
            info = await client.jetstream().stream_info(stream)
        except nats.errors.Error as error:
            raise jetstream_error(what, stream, error) from None
        return (f"{message}; JetStream stream '{stream}' holds "
                f"{info.state.messages} messages (sequences {info.state.first_seq}.."
                f"{info.state.last_seq})")
    finally:
        await client.close()


class NatsSink(core.Sink):
    """Publishes one message per record; marker ``{"producer": id}`` with JetStream."""

    def __init__(self, table: str, parsed: NatsTable) -> None:
        self.table = table
        self.parsed = parsed
        self.what = f"nats sink '{table}'"
        #: the first part of every Nats-Msg-Id, kept across restarts by the marker
        self.producer = ""

    def open(self, marker: Any | None) -> None:
        # A fresh pipeline gets a new producer id, so its messages are never taken
        # for duplicates of an earlier pipeline's; a restarted one keeps its own.
        self.producer = str(marker["producer"]) if marker else uuid.uuid4().hex

    def write_epoch(self, epoch: int, df: DataFrame) -> dict[str, str] | None:
        records = encode_records(df, self.parsed.spec)
        if self.parsed.stream is not None:  # equal records in one task: ids stay a
            # function of the epoch's records whatever tasks a replay has
            records = records.repartition(*(F.col(c) for c in records.columns))
        publisher = _TaskPublisher(self.what, self.parsed.connect.to_dict(),
                                   str(self.parsed.subject), self.parsed.stream,
                                   self.producer, epoch)
        reports = write_partitions(records, publisher)  # a task's ConnectorError names it
        self.epoch_bytes = sum(int(report["bytes"]) for report in reports)
        duplicates = sum(int(report["duplicates"]) for report in reports)
        if duplicates:
            log.info("replayed messages dropped by the stream", extra={
                "table": self.table, "epoch": epoch, "duplicates": duplicates})
        return None if self.parsed.stream is None else {"producer": self.producer}

    def close(self) -> None:
        """Every task opens and closes its own connection: nothing to release."""


@dataclass(frozen=True)
class _TaskPublisher:
    """Publishes one task's records of an epoch (picklable: it runs in the tasks)."""

    what: str
    #: :meth:`ConnectSettings.to_dict` (the tenant's boundary, not the live policy; the
    #: password: never shown)
    connect: dict[str, Any] = field(repr=False)
    subject: str
    stream: str | None
    producer: str
    epoch: int

    def __call__(self, partition: int, rows: pa.Table) -> list[dict[str, Any]]:
        del partition  # a message's id depends on the record, not on its task
        records = [record_bytes(value) for value in rows.column(0).to_pylist()]
        if self.stream is None:
            run_sync(self._session(lambda client: _publish_core(client, self.subject,
                                                                records)))
            duplicates = 0
        else:
            ids = message_ids(self.producer, self.epoch, records)
            stream = self.stream
            duplicates = run_sync(self._session(lambda client: publish_all(
                client, self.subject, stream, records, ids)))
        return [{"bytes": sum(len(record) for record in records), "duplicates": duplicates}]

    async def _session(self, operation: Any) -> Any:
        settings = ConnectSettings.from_dict(self.connect)
        client = await connect(settings, self.what)
        try:
            return await operation(client)
        except core.ConnectorError:
            raise
        except (OSError, TimeoutError) as error:
            raise connect_error(settings, self.what, error) from None
        except nats.errors.Error as error:
            raise jetstream_error(self.what, str(self.stream), error) from None
        finally:
            await client.close()


async def _publish_core(client: NatsClient, subject: str | None,
                        records: Sequence[bytes]) -> None:
    for record in records:
        await client.publish(str(subject), record)
    await client.flush()


def message_ids(producer: str, epoch: int, records: Sequence[bytes]) -> list[str]:
    """``Nats-Msg-Id`` of each record: producer, epoch, the record's digest and its
    occurrence among equal records, so a replayed epoch gets the same ids whatever
    order Spark returns its rows in."""
    seen: Counter[bytes] = Counter()
    ids = []
    for record in records:
        digest = hashlib.blake2b(record, digest_size=12).digest()
        ids.append(f"{producer}-{epoch}-{digest.hex()}-{seen[digest]}")
        seen[digest] += 1
    return ids
