"""Connecting to an MQTT broker for the ``mqtt`` connector, through the egress policy.

The connection's WITH options are declared here, where the errors of a connection
name them; :mod:`.connector` reads them.  One :class:`BrokerSettings` (a plain,
JSON-serialisable value shipped to the reader's process) says where the broker is
and how to log in; :func:`connect`
resolves the host through the tenant's egress policy when there is one, connects
to the checked address, and waits for the broker's CONNACK.  Every client speaks
MQTT 5.  Errors name ``host:port`` as the table wrote it, never the password;
under an egress policy every failure reads alike (no probing through it).
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.reasoncodes import ReasonCode

from spate.engine.connectors import core
from spate.engine.connectors.core.egress import EgressPolicy, unreachable
from spate.engine.connectors.core.errors import ConnectorError

#: The port of a ``url`` that names none.
DEFAULT_PORT = 1883
URL = core.option("url", core.BOTH, "`tcp://host[:port]` or `mqtt://host[:port]` "
                  f"(port {DEFAULT_PORT}). TLS (`ssl://`, `mqtts://`) is not supported yet. "
                  "Credentials go in `username` / `password`, not in the URL; the URL is never "
                  "echoed in errors", required=True)
TOPIC = core.option("topic", core.BOTH, "source: a topic filter, `+` and `#` allowed "
                    "(`sensors/+/temp`, `logs/#`); sink: one topic, no wildcard", required=True)
USERNAME = core.option("username", core.BOTH, "login: the user")
PASSWORD = core.option("password", core.BOTH, "login: the user's password")
MAX_PACKET_SIZE = core.option("max_packet_size", core.BOTH,
                              "bytes: the largest packet the broker may send a source (MQTT 5 "
                              "Maximum Packet Size; the broker drops bigger messages for it); a "
                              "sink fails on a bigger record", kind=core.INTEGER,
                              default_text="none")

#: Seconds to wait for the TCP connection and the broker's CONNACK / SUBACK.
CONNECT_TIMEOUT_S = 10.0
#: Seconds between keep-alive pings.
KEEPALIVE_S = 30
#: How long the broker keeps a source's session (subscription and unacknowledged
#: messages) while its pipeline is stopped: 7 days.
SESSION_EXPIRY_S = 7 * 24 * 3600


@dataclass(frozen=True)
class BrokerSettings:
    """Where the broker is and how to log in."""

    host: str
    port: int
    username: str | None = None
    password: str | None = None
    #: the largest packet this client accepts (MQTT 5 Maximum Packet Size); None: no limit
    max_packet_size: int | None = None
    #: the tenant's egress policy (``EgressPolicy.to_dict``); None: any destination
    egress: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def shown(self) -> str:
        """The broker as the table's ``url`` names it (for messages)."""
        return f"{self.host}:{self.port}"


def connect(broker: BrokerSettings, client_id: str, *, what: str, persistent: bool,
            manual_ack: bool = False, on_message: Any = None) -> paho.Client:
    """A client connected (CONNACK received) with its network loop running.

    ``persistent``: resume or create the session of ``client_id`` and keep it
    :data:`SESSION_EXPIRY_S` after disconnecting (sources); otherwise a clean
    session that ends with the connection.  ``on_message`` is set before connecting:
    a resumed session's messages arrive right after the CONNACK.  ``what`` starts
    error messages.
    """
    address = _checked_address(broker)
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                         protocol=paho.MQTTv5, manual_ack=manual_ack)
    if broker.username is not None or broker.password is not None:
        client.username_pw_set(broker.username or "", broker.password)
    connected = threading.Event()
    answer: list[ReasonCode] = []

    def on_connect(_c: paho.Client, _u: Any, _f: Any, reason: ReasonCode, _p: Any) -> None:
        answer.append(reason)
        connected.set()

    client.on_connect = on_connect
    client.on_message = on_message
    try:
        client.connect(address, broker.port, keepalive=KEEPALIVE_S, clean_start=not persistent,
                       properties=_connect_properties(broker, persistent))
    except (OSError, ValueError):
        raise _failed(broker, what, "the connection was refused or timed out") from None
    client.loop_start()
    if not connected.wait(CONNECT_TIMEOUT_S) or answer[0].is_failure:
        reason = str(answer[0]) if answer else "no answer to CONNECT"
        client.loop_stop()
        client.disconnect()
        raise _failed(broker, what, f"the broker said: {reason}")
    client.on_connect = None
    return client


def subscribe(client: paho.Client, broker: BrokerSettings, topic: str, qos: int,
              what: str) -> None:
    """Subscribe ``topic`` at ``qos`` and wait for the broker to grant it."""
    granted = threading.Event()
    answer: list[list[ReasonCode]] = []

    def on_subscribe(_c: paho.Client, _u: Any, _m: int, reasons: list[ReasonCode],
                     _p: Any) -> None:
        answer.append(reasons)
        granted.set()

    client.on_subscribe = on_subscribe
    client.subscribe(topic, qos=qos)
    if not granted.wait(CONNECT_TIMEOUT_S) or answer[0][0].is_failure:
        reason = str(answer[0][0]) if answer else "no answer to SUBSCRIBE"
        raise ConnectorError(f"{what}: the MQTT broker {broker.shown} refused the "
                             f"subscription to '{topic}': {reason}", option=TOPIC.name)


def close(client: paho.Client) -> None:
    """Disconnect cleanly (a persistent session stays on the broker), once every packet
    queued before (acknowledgements) is written."""
    written = threading.Event()
    client.on_disconnect = lambda *_args: written.set()
    if client.disconnect() == paho.MQTT_ERR_SUCCESS:
        written.wait(CONNECT_TIMEOUT_S)
    client.loop_stop()


def _checked_address(broker: BrokerSettings) -> str:
    """The address to connect to: the host itself, or under an egress policy the
    address it resolved to when checked (so it cannot change in between)."""
    if broker.egress is None:
        return broker.host
    policy = EgressPolicy.from_dict(broker.egress)
    return policy.resolve(broker.host, broker.port, option=URL.name)[0]


def _connect_properties(broker: BrokerSettings, persistent: bool) -> Properties:
    properties = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    properties.ReceiveMaximum = 65535
    if persistent:
        properties.SessionExpiryInterval = SESSION_EXPIRY_S
    if broker.max_packet_size is not None:
        properties.MaximumPacketSize = broker.max_packet_size
    return properties


def _failed(broker: BrokerSettings, what: str, reason: str) -> ConnectorError:
    if broker.egress is not None:  # a tenant learns nothing about what is behind the policy
        return unreachable(what, broker.host, broker.port)
    return ConnectorError(f"{what}: could not connect to the MQTT broker {broker.shown}: "
                          f"{reason}; check {URL.name}, {USERNAME.name} and "
                          f"{PASSWORD.name}", option=URL.name)
