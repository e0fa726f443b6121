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

import paho.mqtt.client as paho
import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from spate.engine.connectors import core
from spate.engine.connectors.core.push import PushDecoder, PushReader, Receiver
from spate.engine.connectors.mqtt.client import (
    URL,
    BrokerSettings,
    close,
    connect,
    subscribe,
)

log = logging.getLogger(__name__)

SOURCE_NAME = "spate_mqtt"


@dataclass(frozen=True)
class Message:
    """One received message: what acknowledging and decoding it need."""

    mid: int
    qos: int
    topic: str
    payload: bytes
    arrival_us: int


class MqttDataSource(core.SpateDataSource):
    """Registered as ``spate_mqtt``; see :mod:`spate.engine.connectors.mqtt.connector`."""

    source_name = SOURCE_NAME

    def streamReader(self, schema: T.StructType) -> DataSourceStreamReader:
        return MqttStreamReader(self.settings(), schema, self.start_offset())


class MqttStreamReader(PushReader[Message]):
    """One subscription; batches are runs of the messages it received, in order."""

    def open_receiver(self, start: dict[str, Any]) -> Receiver[Message]:
        return _Subscription(self.settings)

    def partition_of(self, messages: list[Message], number: int) -> InputPartition:
        return InputPartition(([m.payload for m in messages], [m.topic for m in messages],
                               [m.arrival_us for m in messages], number))

    def decode(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        payloads, topics, arrivals, number = partition.value
        decoder = PushDecoder(self.settings, self.schema,
                              f"mqtt source '{self.settings['table']}'", "Fix the publisher")
        yield from decoder.decode(
            payloads, arrivals, lambda i: f"message {number + i} on topic '{topics[i]}'",
            {"topic": topics})


class _Subscription(Receiver[Message]):
    """The MQTT client of a source, and the messages it received but did not acknowledge:
    the broker sends them again to the session after a restart."""

    redelivers = True

    def __init__(self, settings: dict[str, Any]) -> None:
        super().__init__()
        self.table: str = settings["table"]
        self.broker = BrokerSettings(**settings["broker"])
        what = f"mqtt source '{self.table}'"
        self._client = connect(self.broker, settings["client_id"], what=what, persistent=True,
                               manual_ack=True, on_message=self._on_message)
        self._client.on_disconnect = self._on_disconnect
        try:
            subscribe(self._client, self.broker, settings["topic"], settings["qos"], what)
        except core.ConnectorError:
            close(self._client)
            raise
        log.info("mqtt source subscribed", extra={"table": self.table,
                                                  "broker": self.broker.shown})

    def released(self, messages: list[Message]) -> None:
        """Acknowledge the messages whose epochs committed."""
        for message in messages:
            if message.qos > 0:
                self._client.ack(message.mid, message.qos)

    def close(self) -> None:
        close(self._client)

    def _on_message(self, _client: paho.Client, _userdata: Any,
                    message: paho.MQTTMessage) -> None:
        self.receive(Message(message.mid, message.qos, message.topic, bytes(message.payload),
                             time.time_ns() // 1000))

    def _on_disconnect(self, _client: paho.Client, _userdata: Any, _flags: Any,
                       reason: Any, _properties: Any) -> None:
        # Unacknowledged messages belong to the session; failing the query lets the
        # resumed pipeline receive them again rather than guess what a reconnect kept.
        self.failure = core.ConnectorError(
            f"mqtt source '{self.table}' lost its connection to the MQTT broker "
            f"{self.broker.shown} ({reason}); the pipeline resumes from its last committed "
            "epoch", option=URL.name)
