"""The ``mqtt`` source as a Python streaming data source: at-least-once.

Spark keeps one stream reader alive in one process for the whole query; it
holds the MQTT client.  The client subscribes in a persistent MQTT 5 session
(a stable client id, ``clean_start`` false, a session kept 7 days) with
manual acknowledgements: paho buffers each arriving message, and nothing is
acknowledged when it arrives.

Offsets are ``{"messages": n}``: how many messages were handed to batches so far,
a count that only grows and is kept with each committed epoch.  ``latestOffset``
numbers the buffered messages on from its start and admits them into the next
batch; ``partitions`` puts the batch's payloads into its one partition, decoded on
an executor.  A message is acknowledged (PUBACK) once its batch is behind the
start Spark plans the next batch from, or is committed (``commit``): by then the
engine has committed the epoch that holds it.  A crash or a stop before that
leaves it unacknowledged, and the broker delivers it again to the session when the
pipeline resumes: at-least-once (an epoch committed just before a stop may be
delivered twice).  With ``qos = 0`` the broker neither keeps nor redelivers
anything: at-most-once.  Event time is the arrival time at the reader.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import paho.mqtt.client as paho
import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit

from spate.engine.connectors.core.arrow_batches import arrow_schema, data_batch
from spate.engine.connectors.core.base import ConnectorError
from spate.engine.connectors.core.dead_letter import BadRecords
from spate.engine.connectors.core.metadata_columns import decoded_schema, merge_physical
from spate.engine.connectors.core.numbered import NumberedBuffer
from spate.engine.connectors.core.streaming import (
    SpateDataSource,
    default_limit,
    initial_offset,
    max_rows,
)
from spate.engine.connectors.formats.decoders import source_decoder
from spate.engine.connectors.formats.records import FormatSpec
from spate.engine.connectors.mqtt.client import (
    URL,
    BrokerSettings,
    close,
    connect,
    subscribe,
)
from spate.engine.python_workers import settle

log = logging.getLogger(__name__)

SOURCE_NAME = "spate_mqtt"
#: JSON whitespace for the line breaks inside a JSON message (records are lines).
_LINE_BREAKS = bytes.maketrans(b"\r\n", b"  ")


@dataclass(frozen=True)
class Message:
    """One received message: what acknowledging and decoding it need."""

    mid: int
    qos: int
    topic: str
    payload: bytes
    arrival_us: int


class MqttDataSource(SpateDataSource):
    """Registered as ``spate_mqtt``; see :mod:`spate.engine.connectors.mqtt.connector`."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        return MqttStreamReader(self.settings(), schema, self.start_offset())


class MqttStreamReader(DataSourceStreamReader):
    """One subscription; batches are runs of the messages it received, in order.

    Spark pickles the reader to ship ``read`` to executors: the subscription, made
    on first use in the driver's reader process, is never part of that.
    """

    def __init__(self, settings: dict[str, Any], schema: T.StructType,
                 start: dict[str, Any] | None = None) -> None:
        self.settings = settings
        self.schema = schema
        #: the offset a resumed pipeline starts at (from its state store); None: the start
        self.start = start
        self._subscription: _Subscription | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_subscription": None}

    def initialOffset(self) -> dict[str, Any]:
        return initial_offset(self.start, lambda: {"messages": 0}, self.settings["table"])

    def getDefaultReadLimit(self) -> ReadLimit:
        return default_limit(self.settings["max_messages_per_batch"])

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        subscription = self._subscribed()
        first = int(start["messages"])
        subscription.acknowledge_through(first)  # Spark plans from here: those committed
        return {"messages": first + subscription.admit(first, max_rows(limit, None))}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        first, last = int(start["messages"]), int(end["messages"])
        if first == last:
            return []
        messages = self._subscribed().batch(first, last)
        if not messages:
            return []
        return [InputPartition((
            [m.payload for m in messages], [m.topic for m in messages],
            [m.arrival_us for m in messages], first + 1))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        settle()
        payloads, topics, arrivals, number = partition.value
        yield from _BatchDecoder(self.settings, self.schema).decode(payloads, topics, arrivals,
                                                                    number)

    def commit(self, end: dict[str, Any]) -> None:
        if self._subscription is not None:
            self._subscription.acknowledge_through(int(end["messages"]))

    def stop(self) -> None:
        if self._subscription is not None:
            self._subscription.close()
            self._subscription = None

    def _subscribed(self) -> _Subscription:
        if self._subscription is None:
            self._subscription = _Subscription(self.settings)
        self._subscription.check()
        return self._subscription


class _Subscription:
    """The MQTT client of a source, and the messages it received but did not acknowledge.

    Messages are numbered by the offset count after them as they join batches.
    """

    def __init__(self, settings: dict[str, Any]) -> None:
        self.table: str = settings["table"]
        self.broker = BrokerSettings(**settings["broker"])
        #: received, then numbered into batches until acknowledged
        self._messages: NumberedBuffer[Message] = NumberedBuffer()
        self._lost: str | None = None
        what = f"mqtt source '{self.table}'"
        self._client = connect(self.broker, settings["client_id"], what=what, persistent=True,
                               manual_ack=True, on_message=self._on_message)
        self._client.on_disconnect = self._on_disconnect
        try:
            subscribe(self._client, self.broker, settings["topic"], settings["qos"], what)
        except ConnectorError:
            close(self._client)
            raise
        log.info("mqtt source subscribed", extra={"table": self.table,
                                                  "broker": self.broker.shown})

    def check(self) -> None:
        """Raise if the connection was lost: the resumed pipeline gets the messages again."""
        if self._lost is not None:
            raise ConnectorError(self._lost, option=URL.name)

    def admit(self, after: int, most: int | None) -> int:
        """Number waiting messages from ``after + 1`` (at most ``most``) into a batch;
        how many joined."""
        return len(self._messages.admit(after, most))

    def batch(self, first: int, last: int) -> list[Message]:
        """The messages numbered ``first + 1 .. last`` (a replayed batch: the ones the
        broker delivers again, waiting up to :data:`~.numbered.REPLAY_WAIT_S`)."""
        return self._messages.batch(first, last)

    def acknowledge_through(self, number: int) -> None:
        """Acknowledge the messages numbered up to ``number``: their epochs committed."""
        for message in self._messages.release_through(number):
            if message.qos > 0:
                self._client.ack(message.mid, message.qos)

    def close(self) -> None:
        close(self._client)

    def _on_message(self, _client: paho.Client, _userdata: Any,
                    message: paho.MQTTMessage) -> None:
        received = Message(message.mid, message.qos, message.topic, bytes(message.payload),
                           time.time_ns() // 1000)
        self._messages.put(received)

    def _on_disconnect(self, _client: paho.Client, _userdata: Any, _flags: Any,
                       reason: Any, _properties: Any) -> None:
        # Unacknowledged messages belong to the session; failing the query lets the
        # resumed pipeline receive them again rather than guess what a reconnect kept.
        self._lost = (f"mqtt source '{self.table}' lost its connection to the MQTT broker "
                      f"{self.broker.shown} ({reason}); the pipeline resumes from its last "
                      "committed epoch")


class _BatchDecoder:
    """Decodes one batch's payloads (one record each) into Arrow batches, on an executor."""

    def __init__(self, settings: dict[str, Any], schema: T.StructType) -> None:
        self.table: str = settings["table"]
        self.spec = FormatSpec(**settings["format"])
        self.arrow_schema = arrow_schema(schema)
        self.metadata: dict[str, str] = settings.get("metadata") or {}
        decoded = decoded_schema(self.arrow_schema, self.metadata)
        self.decoder = source_decoder(decoded, self.spec, settings["not_null"])
        self.bad = BadRecords(self.spec, self.arrow_schema, 0, f"mqtt source '{self.table}'",
                              "in {position}", "Fix the publisher")

    def decode(self, payloads: list[bytes], topics: list[str], arrivals: list[int],
               number: int = 1) -> Iterator[pa.RecordBatch]:
        """Rows of ``payloads``, the messages numbered ``number`` on (their count in the
        source's offsets)."""
        raw = payloads
        if not self.spec.opaque:
            payloads = [p.translate(_LINE_BREAKS) for p in payloads]
        lengths = np.array([len(p) for p in payloads], dtype=np.int64)
        starts = np.zeros(len(payloads), dtype=np.int64)
        np.cumsum(lengths[:-1] + 1, out=starts[1:])
        buf = np.frombuffer(b"\n".join(payloads) + b"\n", dtype=np.uint8)
        decoded = self.decoder.decode(buf, starts, lengths)
        dead = self.bad.handle([(raw[i], problem, f"message {number + i} on topic '{topics[i]}'")
                                for i, problem in decoded.bad])
        if dead is not None:
            yield dead
        if decoded.num_rows:
            stamps = _event_times(decoded.lines, arrivals, decoded.num_rows)
            columns = decoded.columns
            if self.metadata:  # 'topic'
                rows_at = decoded.lines if decoded.lines is not None else np.array(
                    sorted(set(range(len(payloads))) - {i for i, _ in decoded.bad}), np.int64)
                of_rows = pa.array(topics, pa.string()).take(pa.array(rows_at, pa.int64()))
                columns = merge_physical(self.arrow_schema, columns,
                                         dict.fromkeys(self.metadata, of_rows))
            yield data_batch(self.arrow_schema, columns, 0, stamps)
        dropped = self.bad.finish()
        if dropped is not None:
            yield dropped


def _event_times(lines: np.ndarray | None, arrivals: list[int], rows: int) -> pa.Array:
    """Each row's arrival time (µs) where it is known which message made the row (the
    decoder says, or every message made one row); otherwise the batch's latest arrival."""
    times = np.asarray(arrivals, dtype=np.int64)
    if lines is not None and len(lines) == rows:
        return pa.array(times[lines], pa.int64())
    if lines is None and len(times) == rows:
        return pa.array(times, pa.int64())
    return pa.array(np.full(rows, times.max(), dtype=np.int64), pa.int64())
