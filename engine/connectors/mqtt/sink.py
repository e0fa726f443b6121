"""The ``mqtt`` sink: publishes each row as one message; at-least-once.

An epoch's records are encoded by Spark (``formats.encode_records``) and
published on the executors: each Spark task connects a client of its own (a
clean MQTT 5 session) and publishes its rows to the table's topic with its
``qos`` and ``retain``, in the order the task holds them
(:func:`~.core.executor_writes.write_partitions`), so no record passes through
the driver. A task ends only once the broker acknowledged every one of its
messages (PUBACK for QoS 1, PUBCOMP for QoS 2; QoS 0: once written to the
socket), so ``write_epoch`` returns only when the whole epoch was. Tasks publish
side by side: a subscriber sees each task's messages in order, not one order
over the epoch (an updating query's changes of one key come from one task).
MQTT cannot take messages back, so an epoch replayed after a crash (or a task
Spark retried) publishes its messages again: at-least-once. The marker is None.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

import paho.mqtt.client as paho
import pyarrow as pa
from pyspark.sql import DataFrame

from spate.engine.connectors import core
from spate.engine.connectors.core.executor_writes import write_partitions
from spate.engine.connectors.formats.records import FormatSpec, encode_records, record_bytes
from spate.engine.connectors.mqtt.client import (
    MAX_PACKET_SIZE,
    URL,
    BrokerSettings,
    close,
    connect,
)

log = logging.getLogger(__name__)

#: Seconds to wait for the acknowledgement of a task's last message.
ACK_TIMEOUT_S = 60.0


@dataclass(eq=False)
class MqttSink(core.Sink):
    """Publishes to one topic, one clean MQTT 5 session per task."""

    table: str
    broker: BrokerSettings
    topic: str
    qos: int
    retain: bool
    spec: FormatSpec
    client_prefix: str
    _opened: bool = field(default=False, init=False, repr=False)

    def open(self, marker: Any | None) -> None:
        del marker  # published messages cannot be taken back: nothing to restore
        # One connection from the driver first: a wrong address or login fails the
        # start, not the first epoch.
        close(connect(self.broker, self._publisher(-1).client_id(-1),
                      what=f"mqtt sink '{self.table}'", persistent=False))
        self._opened = True

    def write_epoch(self, epoch: int, df: DataFrame) -> None:
        if not self._opened:
            raise core.ConnectorError(f"mqtt sink '{self.table}' written before open()")
        reports = write_partitions(encode_records(df, self.spec), self._publisher(epoch))
        self.epoch_bytes = sum(int(report["bytes"]) for report in reports)
        log.debug("epoch published", extra={
            "table": self.table, "epoch": epoch,
            "messages": sum(int(report["messages"]) for report in reports)})

    def close(self) -> None:
        self._opened = False

    def _publisher(self, epoch: int) -> _TaskPublisher:
        return _TaskPublisher(self.table, self.broker, self.topic, self.qos, self.retain,
                              self.client_prefix, epoch)


@dataclass(frozen=True)
class _TaskPublisher:
    """Publishes one task's records of an epoch (picklable: it runs in the tasks)."""

    table: str
    broker: BrokerSettings = field(repr=False)  # holds the password
    topic: str
    qos: int
    retain: bool
    client_prefix: str
    epoch: int

    def client_id(self, partition: int) -> str:
        """A client id of its own (a broker drops the older of two equal ids)."""
        return (f"{self.client_prefix}-{self.table}-sink-e{self.epoch}-p{partition}-"
                f"{secrets.token_hex(4)}")

    def __call__(self, partition: int, rows: pa.Table) -> list[dict[str, Any]]:
        payloads = [record_bytes(r) for r in rows.column(0).to_pylist()]
        self._check_sizes(payloads)
        client = connect(self.broker, self.client_id(partition),
                         what=f"mqtt sink '{self.table}'", persistent=False)
        try:
            sent = [client.publish(self.topic, p, qos=self.qos, retain=self.retain)
                    for p in payloads]
            for info in sent:
                self._wait(info)
        finally:
            close(client)
        return [{"bytes": sum(len(p) for p in payloads), "messages": len(payloads)}]

    def _check_sizes(self, payloads: list[bytes]) -> None:
        limit = self.broker.max_packet_size
        if limit is None:
            return
        for payload in payloads:
            if len(payload) > limit:
                raise core.ConnectorError(
                    f"mqtt sink '{self.table}': a record of {len(payload)} bytes exceeds "
                    f"{MAX_PACKET_SIZE.name} ({limit}); raise it or write smaller rows",
                    option=MAX_PACKET_SIZE.name)

    def _wait(self, info: paho.MQTTMessageInfo) -> None:
        failed = info.rc != paho.MQTT_ERR_SUCCESS
        if not failed:
            try:
                info.wait_for_publish(ACK_TIMEOUT_S)
            except (RuntimeError, ValueError):
                failed = True
        if failed or not info.is_published():
            raise core.ConnectorError(
                f"mqtt sink '{self.table}': the MQTT broker {self.broker.shown} did not "
                f"acknowledge a message within {ACK_TIMEOUT_S:.0f} s "
                f"({paho.error_string(info.rc)}); the epoch is retried when the pipeline "
                "resumes", option=URL.name)
