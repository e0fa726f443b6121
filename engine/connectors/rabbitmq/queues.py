"""``rabbitmq`` in ``mode = 'queue'``: an AMQP 0-9-1 queue source and exchange sink (pika).

Delivery guarantee: **at-least-once**, both ways.

Source: one reader on the driver (pyspark's ``SimpleDataSourceStreamReader``)
consumes the queue with manual acknowledgements and a prefetch of twice
``max_messages_per_batch`` (one batch awaiting its commit, the next being read).
A queue cannot be re-read, so the offset ``{"delivered": n}`` only counts the
messages taken.  A message is acknowledged once the epoch holding it committed:
Spark asks for the next batch (``read`` starting at that batch's end) or calls
``commit`` only after the epoch's ``foreachBatch`` — where Spate commits it —
returned.  Messages of an epoch that never committed (a crash, a stop before
the acknowledgement went out) are redelivered by the broker when the connection
closes, and appear again.  A batch Spark logged but never committed before a
restart is therefore replayed empty: its messages reach later batches instead.
A row's event time is the time its message was read.

Sink: publishes each record as one persistent message to ``exchange`` with
``routing_key``, on a channel in confirm mode, as mandatory (a message no queue
takes fails the epoch). Each Spark task publishes its own rows, in its order,
over a connection of its own, so no record passes through the driver;
``write_epoch`` returns once every task's messages are confirmed. An epoch
replayed after a crash (or a task Spark retried) is published again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pika
import pika.exceptions
import pyarrow as pa
from pika.adapters.blocking_connection import BlockingChannel
from pyspark.sql import DataFrame
from pyspark.sql import types as T
from pyspark.sql.datasource import SimpleDataSourceStreamReader

from spate.engine.connectors import core
from spate.engine.connectors.core.arrow_batches import arrow_schema
from spate.engine.connectors.core.executor_writes import write_partitions
from spate.engine.connectors.formats.records import encode_records, record_bytes
from spate.engine.connectors.rabbitmq.settings import (
    EXCHANGE,
    QUEUE_NAME,
    ROUTING_KEY,
    TIMEOUT_S,
    MessageDecoder,
    RabbitSettings,
    shipped_settings,
)

SOURCE_NAME = "spate_rabbitmq_queue"
#: Seconds without a delivery after which a read ends with what it has.
_IDLE_S = 0.05
_HEARTBEAT_S = 600


def connect(settings: RabbitSettings) -> pika.BlockingConnection:
    """A connection to the broker at the checked address; raises :class:`ConnectorError`
    naming host:port, the same whatever failed (refused, login, virtual host)."""
    parameters = pika.ConnectionParameters(
        host=settings.address, port=settings.port, virtual_host=settings.virtual_host,
        credentials=pika.PlainCredentials(settings.username, settings.password),
        connection_attempts=1, socket_timeout=TIMEOUT_S, blocked_connection_timeout=TIMEOUT_S,
        stack_timeout=TIMEOUT_S, heartbeat=_HEARTBEAT_S)
    try:
        return pika.BlockingConnection(parameters)
    except (pika.exceptions.AMQPError, OSError):
        raise settings.unreachable() from None


def check_queue(connection: pika.BlockingConnection, settings: RabbitSettings) -> int:
    """The messages ready in the source's queue; raises when it does not exist."""
    channel = connection.channel()
    try:
        declared = channel.queue_declare(settings.queue or "", passive=True)
    except pika.exceptions.ChannelClosedByBroker:
        raise core.ConnectorError(f"rabbitmq table '{settings.table}': queue '{settings.queue}' "
                                  f"does not exist on {settings.host}:{settings.port} (virtual "
                                  f"host '{settings.virtual_host}'); declare it first",
                                  option=QUEUE_NAME.name) from None
    count = int(declared.method.message_count)
    channel.close()
    return count


def check_exchange(connection: pika.BlockingConnection, settings: RabbitSettings) -> None:
    """Raise :class:`ConnectorError` unless the sink's exchange exists."""
    channel = connection.channel()
    try:
        channel.exchange_declare(settings.exchange, passive=True)
    except pika.exceptions.ChannelClosedByBroker:
        raise core.ConnectorError(f"rabbitmq table '{settings.table}': exchange "
                                  f"'{settings.exchange}' does not exist on {settings.host}:"
                                  f"{settings.port} (virtual host '{settings.virtual_host}'); "
                                  "declare it first", option=EXCHANGE.name) from None
    channel.close()


class RabbitQueueDataSource(core.SpateDataSource):
    """Registered as ``spate_rabbitmq_queue``; see this module's docstring."""

    source_name = SOURCE_NAME

    def simpleStreamReader(self, schema: T.StructType) -> SimpleDataSourceStreamReader:
        return RabbitQueueReader(shipped_settings(self), schema,
                                 self.start_offset())


class RabbitQueueReader(SimpleDataSourceStreamReader):
    """Consumes one queue; offsets ``{"delivered": n}`` count the messages taken."""

    def __init__(self, settings: RabbitSettings, schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.start = start
        self.decoder = MessageDecoder(settings, arrow_schema(schema))
        self._connection: pika.BlockingConnection | None = None
        self._channel: BlockingChannel | None = None
        #: (end offset of a batch, delivery tag of its last message), oldest first
        self._pending: list[tuple[int, int]] = []

    def initialOffset(self) -> dict[str, Any]:
        return core.initial_offset(self.start, lambda: {"delivered": 0}, self.settings.table)

    def read(self, start: dict[str, Any]) -> tuple[Iterator[pa.RecordBatch], dict[str, Any]]:
        # Asked for what follows ``start``: every batch ending there has committed.
        self._acknowledge_through(int(start["delivered"]))
        return self._take(int(start["delivered"]), self.settings.max_messages_per_batch)

    def readBetweenOffsets(self, start: dict[str, Any],
                           end: dict[str, Any]) -> Iterator[pa.RecordBatch]:
        """A batch logged before a restart but never committed reads nothing: its
        messages were never acknowledged, so the broker redelivers them to later
        batches.  (Spark runs this on an executor, which could not acknowledge.)"""
        del start, end
        return iter([])

    def commit(self, end: dict[str, Any]) -> None:
        self._acknowledge_through(int(end["delivered"]))

    def stop(self) -> None:
        """Unacknowledged messages go back to the queue when the connection closes."""
        if self._connection is not None and self._connection.is_open:
            self._connection.close()
        self._connection = self._channel = None

    def _take(self, delivered: int, limit: int) -> tuple[Iterator[pa.RecordBatch],
                                                         dict[str, Any]]:
        channel = self._open_channel()
        bodies: list[bytes] = []
        keys: list[str | None] = []
        last_tag = 0
        for method, _, body in channel.consume(self.settings.queue or "", auto_ack=False,
                                               inactivity_timeout=_IDLE_S):
            if method is None:  # nothing more for now
                break
            bodies.append(body)
            keys.append(method.routing_key)
            last_tag = method.delivery_tag
            if len(bodies) >= limit:
                break
        stop = delivered + len(bodies)
        if bodies:
            self._pending.append((stop, last_tag))
        stamps = np.full(len(bodies), time.time_ns() // 1000, dtype=np.int64)
        batches = self.decoder.batches(bodies, stamps, delivered + 1, keys)
        return iter(batches), {"delivered": stop}

    def _acknowledge_through(self, delivered: int) -> None:
        done = [tag for stop, tag in self._pending if stop <= delivered]
        if not done or self._channel is None:
            return
        self._channel.basic_ack(delivery_tag=max(done), multiple=True)
        self._pending = [(stop, tag) for stop, tag in self._pending if stop > delivered]

    def _open_channel(self) -> BlockingChannel:
        if self._channel is not None and self._channel.is_open:
            return self._channel
        # A lost connection took its unacknowledged messages back to the queue.
        self._pending = []
        self._connection = connect(self.settings)
        check_queue(self._connection, self.settings)
        channel = self._connection.channel()
        channel.basic_qos(prefetch_count=2 * self.settings.max_messages_per_batch)
        self._channel = channel
        return channel


class RabbitQueueSink(core.Sink):
    """Publishes each epoch's records with publisher confirms (at-least-once), each
    Spark task its own rows over a connection of its own."""

    def __init__(self, settings: RabbitSettings, schema: T.StructType) -> None:
        self.settings = settings
        self.schema = schema
        self._opened = False

    def open(self, marker: Any | None) -> None:
        del marker  # a published message cannot be taken back: nothing to restore
        connect(self.settings).close()  # a wrong address or login fails the start
        self._opened = True

    def write_epoch(self, epoch: int, df: DataFrame) -> None:
        if not self._opened:
            raise core.ConnectorError(f"rabbitmq sink '{self.settings.table}' written before "
                                      f"open()")
        records = encode_records(df, self.settings.spec)
        reports = write_partitions(records, _TaskPublisher(self.settings, epoch))
        self.epoch_bytes = sum(int(report["bytes"]) for report in reports)

    def close(self) -> None:
        self._opened = False


@dataclass(frozen=True)
class _TaskPublisher:
    """Publishes one task's records of an epoch, each confirmed before the next
    (picklable: it runs in the tasks)."""

    settings: RabbitSettings
    epoch: int

    def __call__(self, partition: int, rows: pa.Table) -> list[dict[str, Any]]:
        del partition  # every task publishes to the same exchange
        connection = connect(self.settings)
        try:
            channel = connection.channel()
            channel.confirm_delivery()
            properties = pika.BasicProperties(delivery_mode=pika.DeliveryMode.Persistent)
            written = 0
            for record in rows.column(0).to_pylist():
                body = record_bytes(record)
                written += len(body)
                self._publish(channel, body, properties)
        finally:
            if connection.is_open:
                connection.close()
        return [{"bytes": written}]

    def _publish(self, channel: BlockingChannel, body: bytes,
                 properties: pika.BasicProperties) -> None:
        settings = self.settings
        try:  # in confirm mode this returns once the broker confirmed the message
            channel.basic_publish(settings.exchange, settings.routing_key or "", body,
                                  properties, mandatory=True)
        except pika.exceptions.UnroutableError:
            raise core.ConnectorError(
                f"rabbitmq sink '{settings.table}': epoch {self.epoch}: no queue takes "
                f"messages sent to {settings.where()}; bind a queue to it",
                option=ROUTING_KEY.name) from None
        except pika.exceptions.ChannelClosedByBroker as error:
            raise core.ConnectorError(f"rabbitmq sink '{settings.table}': the broker refused "
                                      f"to publish to {settings.where()}: {error.reply_text}",
                                      option=EXCHANGE.name) from None
        except (pika.exceptions.AMQPError, OSError):
            raise settings.unreachable() from None
