"""The ``rabbitmq`` connector's settings, and what its queue and stream halves share.

A table's WITH options are read once on the driver into :class:`RabbitSettings`,
a plain JSON-serialisable value shipped to the reader; the broker's host is
resolved through the tenant's egress policy there too, so readers and sinks
connect to the checked address (``address``) while messages name the host the
tenant wrote.  The options are declared here, where they are read; the queue and
stream modules name them in their errors.  :func:`decode_messages` turns message
bodies into the table's Arrow batches with the shared record decoders, under the
table's ``bad_data``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from spate.engine.connectors import core
from spate.engine.connectors.core.arrow_batches import data_batch
from spate.engine.connectors.core.dead_letter import BadRecords
from spate.engine.connectors.core.egress import unreachable
from spate.engine.connectors.formats.decoders import source_decoder
from spate.engine.connectors.formats.records import FormatSpec, parse_format

QUEUE = "queue"
STREAM = "stream"
EARLIEST = "earliest"
LATEST = "latest"
AMQP_PORT = 5672
STREAM_PORT = 5552
#: Seconds to wait for the broker to accept a connection or answer a request.
TIMEOUT_S = 10.0
#: The reader option carrying the password apart from the other settings: Spark hides
#: the value of an option whose name says "password" wherever it prints a plan.
PASSWORD_OPTION = "spate_password"
#: Options of Arroyo's RabbitMQ connector that Spate does not implement yet.
_NOT_YET = ("tls_config", "load_balancer_mode")
_NOT_YET_PREFIXES = ("tls_config.", "tls.")

MODE = core.option("mode", core.BOTH, "`stream` or `queue`", choices=(QUEUE, STREAM),
                   default=STREAM)
HOST = core.option("host", core.BOTH, "the broker's host name or address", required=True)
PORT = core.option("port", core.BOTH, "the broker's port", kind=core.INTEGER,
                   default_text=f"{STREAM_PORT} (`stream`), {AMQP_PORT} (`queue`)")
USERNAME = core.option("username", core.BOTH, "the user to log in as", default="guest")
PASSWORD = core.option("password", core.BOTH, "the user's password", default="guest")
VIRTUAL_HOST = core.option("virtual_host", core.BOTH, "the virtual host", default="/")
STREAM_NAME = core.option("stream", core.BOTH, "the stream to read or write; it must exist",
                          required_when="`stream` mode")
SOURCE_OFFSET = core.option("source.offset", core.SOURCES, "`stream` mode: where a new pipeline "
                            "starts, `earliest` (the first message the stream holds) or `latest` "
                            "(after its last message)", choices=(EARLIEST, LATEST), default=LATEST)
PRODUCER_NAME = core.option("producer_name", core.SINKS, "`stream` mode: the name RabbitMQ "
                            "de-duplicates under; unique per pipeline",
                            default_text="`spate:<tenant>/<pipeline>/<table name>`")
QUEUE_NAME = core.option("queue", core.SOURCES, "the queue to consume; it must exist",
                         required_when="`queue` sources")
EXCHANGE = core.option("exchange", core.SINKS, "`queue` mode: where messages are published",
                       default="",
                       default_text="`''` (the default exchange)")
ROUTING_KEY = core.option("routing_key", core.SINKS, "the messages' routing key: with the default "
                          "exchange, the name of the queue to deliver to",
                          required_when="`queue` sinks")
MAX_MESSAGES_PER_BATCH = core.option("max_messages_per_batch", core.SOURCES, "messages per epoch",
                                     default=10_000)


@dataclass(frozen=True)
class RabbitSettings:
    """Everything a reader or sink needs; ``address`` is what to connect to."""

    table: str
    role: str
    mode: str
    host: str
    port: int
    address: str
    username: str
    password: str = field(repr=False)
    virtual_host: str
    format: dict[str, Any]
    queue: str | None = None
    exchange: str = ""
    routing_key: str | None = None
    stream: str | None = None
    start: str = LATEST
    max_messages_per_batch: int = MAX_MESSAGES_PER_BATCH.default
    producer_name: str | None = None
    #: columns whose value every record must have (NOT NULL, PRIMARY KEY)
    not_null: tuple[str, ...] = ()
    #: metadata columns (column -> key: ``routing_key``), filled by the source
    metadata: dict[str, str] = field(default_factory=dict)

    @property
    def spec(self) -> FormatSpec:
        return FormatSpec(**self.format)

    def to_dict(self) -> dict[str, Any]:
        """The settings but the password (see :data:`PASSWORD_OPTION`)."""
        data = asdict(self)
        del data["password"]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any], password: str) -> RabbitSettings:
        return cls(**{**data, "password": password, "not_null": tuple(data["not_null"])})

    def where(self) -> str:
        """What the table points at, for messages (never a credential)."""
        target = f"queue '{self.queue}'" if self.mode == QUEUE and self.role == core.SOURCE else (
            f"stream '{self.stream}'" if self.mode == STREAM
            else f"exchange '{self.exchange}' with routing key '{self.routing_key}'")
        return f"{target} on {self.host}:{self.port}"

    def unreachable(self) -> core.ConnectorError:
        """The one error for a broker that could not be reached or refused the login."""
        return unreachable(f"rabbitmq table '{self.table}'", self.host, self.port)


def shipped_settings(source: core.SpateDataSource) -> RabbitSettings:
    """The settings a data source was opened with (``RabbitMQConnector.read_stream``)."""
    return RabbitSettings.from_dict(source.settings(), source.options.get(PASSWORD_OPTION, ""))


def read_settings(table: core.TableConfig, roles: frozenset[str],
                  resolve: bool = True) -> RabbitSettings:
    """Check every option of a rabbitmq table; ``resolve``: look the host up through
    the egress policy now (else only a literal address is checked)."""
    options = core.OptionReader(table)
    role = core.check_role(options, roles)
    _reject_not_yet(options)
    mode = options.choice(MODE) or STREAM
    host = options.required(HOST).strip()
    port = options.integer(PORT, STREAM_PORT if mode == STREAM else AMQP_PORT, minimum=1)
    assert port is not None
    if port > 65535:
        raise core.ConnectorError(f"option '{PORT.name}' must be at most 65535, not {port}",
                                  option=PORT.name)
    spec = parse_format(options, role, records_in=(STREAM_NAME, QUEUE_NAME))
    target = _queue_target(options, role) if mode == QUEUE else _stream_target(options, role,
                                                                                table.name)
    max_messages = _batch_size(options, role)
    if role == core.SOURCE:
        core.check_source_options(options)
    else:
        core.reject_source_options(options)
    settings = RabbitSettings(
        table=table.name, role=role, mode=mode, host=host, port=port,
        address=_address(table, host, port, resolve),
        username=options.string(USERNAME) or str(USERNAME.default),
        password=options.string(PASSWORD) or "",
        virtual_host=options.string(VIRTUAL_HOST) or str(VIRTUAL_HOST.default),
        format=spec.to_dict(), max_messages_per_batch=max_messages,
        not_null=tuple(table.required_columns()),
        metadata=dict(table.metadata),
        **target)
    options.finish()
    return settings


def _reject_not_yet(options: core.OptionReader) -> None:
    for key in list(options.table.options):
        name = key.lower()
        if name in _NOT_YET or name.startswith(_NOT_YET_PREFIXES):
            options.reject(name, "is not supported yet by the rabbitmq connector (plain "
                                 "connections only); remove it")


def _queue_target(options: core.OptionReader, role: str) -> dict[str, Any]:
    for key in (STREAM_NAME, SOURCE_OFFSET, PRODUCER_NAME):
        options.reject(key, f"applies to {MODE.name} '{STREAM}' only")
    if role == core.SOURCE:
        for key in (EXCHANGE, ROUTING_KEY):
            options.reject(key, "applies to sinks only: a source consumes a queue")
        return {"queue": options.required(QUEUE_NAME)}
    options.reject(QUEUE_NAME, f"applies to sources only: a sink publishes to "
                               f"'{EXCHANGE.name}' with '{ROUTING_KEY.name}' ({EXCHANGE.name} "
                               "'' delivers to the queue named by the key)")
    return {"exchange": options.string(EXCHANGE) or "",
            "routing_key": options.required(ROUTING_KEY)}


def _stream_target(options: core.OptionReader, role: str, table: str) -> dict[str, Any]:
    for key in (QUEUE_NAME, EXCHANGE, ROUTING_KEY):
        options.reject(key, f"applies to {MODE.name} '{QUEUE}' only")
    stream = options.required(STREAM_NAME)
    if role == core.SOURCE:
        options.reject(PRODUCER_NAME, "applies to sinks only")
        start = options.choice(SOURCE_OFFSET) or LATEST
        return {"stream": stream, "start": start}
    options.reject(SOURCE_OFFSET, "applies to sources only")
    name = options.string(PRODUCER_NAME)
    if name is not None and not name.strip():
        raise core.ConnectorError(f"option '{PRODUCER_NAME.name}' must not be empty",
                                  option=PRODUCER_NAME.name)
    return {"stream": stream, "producer_name": name}


def _batch_size(options: core.OptionReader, role: str) -> int:
    if role == core.SINK:
        options.reject(MAX_MESSAGES_PER_BATCH, "applies to sources only")
        return int(MAX_MESSAGES_PER_BATCH.default)
    size = options.integer(MAX_MESSAGES_PER_BATCH, minimum=1)
    assert size is not None
    return size


def _address(table: core.TableConfig, host: str, port: int, resolve: bool) -> str:
    egress = table.boundary.egress
    if egress is None:
        return host
    if not resolve:
        egress.check_literal(host, port, option=HOST.name)
        return host
    return egress.resolve(host, port, option=HOST.name)[0]


# -- decoding ----------------------------------------------------------------------


class MessageDecoder:
    """Message bodies -> the table's Arrow batches; one message is one record.

    ``schema`` is the table's stream schema; its ``routing_key`` metadata column (if
    declared) is filled from what the reader says of each message."""

    def __init__(self, settings: RabbitSettings, schema: pa.Schema) -> None:
        self.settings = settings
        self.spec = settings.spec
        self.schema = schema
        self.metadata = dict(settings.metadata)
        decoded = core.decoded_schema(schema, self.metadata)
        self.decoder = source_decoder(decoded, self.spec, settings.not_null)
        #: what numbers a message in positions: a stream's offset, a queue's delivery count
        self.what = "offset" if settings.mode == STREAM else "message"
        self.bad = BadRecords(self.spec, schema, 0, f"rabbitmq source '{settings.table}'",
                              f"in {settings.where()} at {{position}}")

    def batches(self, bodies: list[bytes], stamps_us: np.ndarray, first_position: int,
                routing_keys: list[str | None] | None = None) -> list[pa.RecordBatch]:
        """The data batch (and dead-letter or ``dropped:N`` control batches) of ``bodies``;
        ``first_position`` numbers the first message (a stream offset, or the count of
        messages a queue delivered); ``routing_keys``: each message's, if known."""
        if not bodies:
            return []
        lines = [self._one_line(body) for body in bodies]
        lengths = np.array([len(line) for line in lines], dtype=np.int64)
        starts = np.zeros(len(lines), dtype=np.int64)
        np.cumsum(lengths[:-1] + 1, out=starts[1:])
        buf = np.frombuffer(b"\n".join(lines), dtype=np.uint8)
        empty = [] if self.spec.opaque else [
            (i, "the message is empty") for i, line in enumerate(lines) if not line.strip()]
        decoded = self.decoder.decode(buf, starts, lengths)
        bad = sorted(set(decoded.bad) | set(empty))
        out: list[pa.RecordBatch] = []
        dead = self.bad.handle([(bodies[i], problem, f"{self.what} {first_position + i}")
                                for i, problem in bad])
        if dead is not None:
            out.append(dead)
        if decoded.num_rows:
            rows_at = self._rows_at(decoded.lines, len(bodies), bad, decoded.num_rows)
            stamps = pa.array(np.asarray(stamps_us, dtype=np.int64)[rows_at], pa.int64())
            columns = decoded.columns
            if self.metadata:  # 'routing_key'
                keys = pa.array(routing_keys or [None] * len(bodies), pa.string())
                columns = core.merge_physical(self.schema, columns, dict.fromkeys(
                    self.metadata, keys.take(pa.array(rows_at, pa.int64()))))
            out.append(data_batch(self.schema, columns, 0, stamps))
        dropped = self.bad.finish()
        if dropped is not None:
            out.append(dropped)
        return out

    def _one_line(self, body: bytes) -> bytes:
        # The decoders read newline-separated records; within JSON a line break can
        # only be whitespace, and a raw_string value is the whole message.
        if self.spec.opaque or (b"\n" not in body and b"\r" not in body):
            return body
        return body.replace(b"\r", b" ").replace(b"\n", b" ")

    @staticmethod
    def _rows_at(lines: np.ndarray | None, count: int, bad: list[tuple[int, str]],
                 rows: int) -> np.ndarray:
        """The message each row was decoded from (a change record split in two: its
        rows take the batch's last message, for its time and routing key)."""
        if lines is not None and len(lines) == rows:
            return np.asarray(lines, dtype=np.int64)
        good = np.delete(np.arange(count, dtype=np.int64), [i for i, _ in bad])
        if len(good) == rows:
            return good
        return np.full(rows, count - 1, dtype=np.int64)
