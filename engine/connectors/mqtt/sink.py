"""The ``mqtt`` sink: publishes each row as one message; at-least-once.

An epoch's records are encoded by Spark (``formats.encode_records``), collected
to the driver and published to the table's topic with its ``qos`` and
``retain``; ``write_epoch`` returns only once the broker acknowledged every one
of them (PUBACK for QoS 1, PUBCOMP for QoS 2; QoS 0: once written to the
socket).  MQTT cannot take messages back, so an epoch replayed after a crash
publishes its messages again: at-least-once.  The marker is None.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from typing import Any

import paho.mqtt.client as paho
from pyspark.sql import DataFrame

from spate.engine.connectors import core
from spate.engine.connectors.formats.records import FormatSpec, encode_records, record_bytes
from spate.engine.connectors.mqtt.client import (
    MAX_PACKET_SIZE,
    URL,
    BrokerSettings,
    close,
    connect,
)

log = logging.getLogger(__name__)

#: Seconds to wait for the acknowledgement of an epoch's last message.
ACK_TIMEOUT_S = 60.0


@dataclass(eq=False)
class MqttSink(core.Sink):
    """Publishes to one topic over one clean MQTT 5 session."""

    table: str
    broker: BrokerSettings
    topic: str
    qos: int
    retain: bool
    spec: FormatSpec
    client_prefix: str
    _client: paho.Client | None = field(default=None, init=False, repr=False)

    def open(self, marker: Any | None) -> None:
        del marker  # published messages cannot be taken back: nothing to restore
        client_id = f"{self.client_prefix}-{self.table}-sink-{secrets.token_hex(4)}"
        self._client = connect(self.broker, client_id, what=f"mqtt sink '{self.table}'",
                               persistent=False)

    def write_epoch(self, epoch: int, df: DataFrame) -> None:
        if self._client is None:
            raise core.ConnectorError(f"mqtt sink '{self.table}' written before open()")
        records = encode_records(df, self.spec).toArrow().column(0).to_pylist()
        payloads = [record_bytes(r) for r in records]
        self._check_sizes(payloads)
        sent = [self._client.publish(self.topic, p, qos=self.qos, retain=self.retain)
                for p in payloads]
        for info in sent:
            self._wait(info)
        self.epoch_bytes = sum(len(p) for p in payloads)
        log.debug("epoch published", extra={"table": self.table, "epoch": epoch,
                                             "messages": len(payloads)})

    def close(self) -> None:
        if self._client is not None:
            close(self._client)
            self._client = None

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

