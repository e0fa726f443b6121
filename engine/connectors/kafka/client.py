"""Kafka client settings shared by the ``kafka`` source, sink and ``/test`` check.

:func:`client_config` turns checked options into a librdkafka configuration.
Under a tenant's egress policy every bootstrap server is resolved and checked
by the policy, and the client is given the checked addresses; the brokers the
cluster then advertises are checked too (:func:`check_brokers`) before any
topic is read or written. librdkafka itself opens the broker connections, so
an advertised broker is connected to for the metadata request that names it:
the check refuses the table before a record moves, not before that connection.
That connection is what the compute unit's network refuses (every tenant
connection leaves through it: docs/security.md, "The network").
"""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._metadata import ClusterMetadata

from spate.engine.connectors import core
from spate.engine.connectors.core.egress import unreachable

# The options a table's clients are configured from (the source's consumer group and
# isolation level among them); the kafka connector declares them with the rest.
BOOTSTRAP_SERVERS = core.option("bootstrap_servers", core.BOTH, "`host:port[,host:port…]` of the "
                                                                "cluster",
                                required=True)
TOPIC = core.option("topic", core.BOTH, "one topic (a pattern, `^…`, is not supported yet); it "
                                        "must exist",
                    required=True)
AUTH_TYPE = core.option("auth.type", core.BOTH, "`none` or `sasl` (`aws_msk_iam` is not supported "
                                                "yet)",
                        choices=("none", "sasl", "aws_msk_iam"), default="none")
SASL_MECHANISM = core.option("auth.sasl.mechanism", core.BOTH, "`plain`, `scram-sha-256` or "
                             "`scram-sha-512`; SASL over plaintext unless `client_configs` adds "
                             "`security.protocol=SASL_SSL`",
                             choices=("plain", "scram-sha-256", "scram-sha-512"), default="plain")
SASL_USERNAME = core.option("auth.sasl.username", core.BOTH, "the SASL credentials' user",
                            required_when="with `sasl`")
SASL_PASSWORD = core.option("auth.sasl.password", core.BOTH, "the SASL credentials' password",
                            required_when="with `sasl`")
CLIENT_CONFIGS = core.option(
    "client_configs", core.BOTH, "librdkafka settings passed through, `key=value;key=value` (e.g. "
    "`security.protocol=SSL;client.id=me`; without a `client.id` a table's clients are named "
    "`spate-source-<table>` or `spate-sink-<table>`); the settings Spate makes itself "
    "(bootstrap servers, group, isolation, transactions, passwords) are refused. In the Spate "
    "service only settings that name no host, file or credential are accepted")
READ_MODE = core.option("source.read_mode", core.SOURCES, "`read_committed` (records of open or "
                        "aborted transactions are not read) or `read_uncommitted`",
                        choices=("read_committed", "read_uncommitted"), default="read_committed")
GROUP_ID = core.option("group_id", core.SOURCES, "a consumer group the offsets of each committed "
                       "epoch are committed to, for monitoring tools; needed by `source.offset = "
                       "'group'`")
#: Arroyo's name of ``group_id``.
ARROYO_GROUP_ID = core.option("source.group_id", core.SOURCES, "`group_id` by Arroyo's name (give "
                              "one of the two)")

#: Seconds to wait for the cluster's metadata before calling it unreachable.
CONNECT_TIMEOUT_S = 10.0

#: librdkafka settings Spate sets itself: ``client_configs`` may not override them.
RESERVED_CONFIGS = frozenset({
    "bootstrap.servers", "metadata.broker.list", "group.id", "isolation.level",
    "enable.auto.commit", "enable.auto.offset.store", "auto.offset.reset",
    "transactional.id", "enable.idempotence", "enable.partition.eof",
    "sasl.password",
})
#: Settings of consumers or producers only, which an admin client warns about.
_CLIENT_ROLE_CONFIGS = frozenset({
    "group.id", "isolation.level", "enable.auto.commit", "enable.auto.offset.store",
    "auto.offset.reset", "transactional.id", "enable.idempotence", "enable.partition.eof",
})
#: ``client_configs`` keys a tenant may set under an egress policy: none of them names a
#: host, a local file or a credential.
CONFINED_CONFIGS = frozenset({
    "client.id", "compression.type", "compression.codec", "linger.ms", "queue.buffering.max.ms",
    "batch.num.messages", "batch.size", "message.max.bytes", "fetch.max.bytes",
    "fetch.min.bytes", "fetch.wait.max.ms", "max.partition.fetch.bytes", "request.timeout.ms",
    "socket.timeout.ms", "message.timeout.ms", "transaction.timeout.ms", "acks",
    "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username",
})
#: librdkafka settings the ``auth.*`` options set.
AUTH_CONFIGS = frozenset({"security.protocol", "sasl.mechanism", "sasl.mechanisms",
                          "sasl.username"})


@dataclass(frozen=True)
class KafkaEndpoint:
    """Where a table's cluster is and how to log in: what every client of it shares."""

    #: ``host:port`` as the options give them (for messages)
    servers: tuple[tuple[str, int], ...]
    #: librdkafka settings from ``auth.*`` (may hold the SASL password: never log them)
    auth: dict[str, str] = field(default_factory=dict)
    #: passed-through ``client_configs``
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def shown(self) -> str:
        """The first bootstrap server, as messages name the cluster."""
        host, port = self.servers[0]
        return f"{host}:{port}"

    def to_dict(self) -> dict[str, Any]:
        return {"servers": [list(s) for s in self.servers], "auth": self.auth,
                "extra": self.extra}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KafkaEndpoint:
        return cls(tuple((str(h), int(p)) for h, p in data["servers"]), dict(data["auth"]),
                   dict(data["extra"]))


def parse_servers(text: str) -> tuple[tuple[str, int], ...]:
    """``host:port[,host:port...]``; raises :class:`ConnectorError` naming the option."""
    servers = []
    for entry in (part.strip() for part in text.split(",")):
        host, _, port = entry.rpartition(":")
        host = host.strip("[]")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise core.ConnectorError(f"option '{BOOTSTRAP_SERVERS.name}' must be host:port pairs "
                                      f"separated by commas, e.g. 'broker-1:9092,broker-2:9092', "
                                      f"not '{entry}'", option=BOOTSTRAP_SERVERS.name)
        servers.append((host, int(port)))
    return tuple(servers)


def parse_client_configs(text: str, confined: bool) -> dict[str, str]:
    """``client_configs`` = ``key=value;key=value``, checked against what Spate sets itself."""
    configs: dict[str, str] = {}
    for entry in (part.strip() for part in text.split(";")):
        if not entry:
            continue
        key, equals, value = entry.partition("=")
        key = key.strip().lower()
        if not equals or not key:
            raise core.ConnectorError(f"option '{CLIENT_CONFIGS.name}' must be key=value pairs "
                                      f"separated by ';', not '{entry}'",
                                      option=CLIENT_CONFIGS.name)
        if key in RESERVED_CONFIGS or "password" in key or "secret" in key:
            raise core.ConnectorError(f"option '{CLIENT_CONFIGS.name}' may not set '{key}': Spate "
                                      "sets it from the table's own options "
                                      f"({BOOTSTRAP_SERVERS.name}, auth.*, {READ_MODE.name}, "
                                      f"{GROUP_ID.name})", option=CLIENT_CONFIGS.name)
        if confined and key not in CONFINED_CONFIGS:
            raise core.ConnectorError(f"option '{CLIENT_CONFIGS.name}' may not set '{key}' in this "
                                      "deployment; allowed: " + ", ".join(sorted(CONFINED_CONFIGS)),
                                      option=CLIENT_CONFIGS.name)
        configs[key] = value.strip()
    return configs


def client_config(endpoint: KafkaEndpoint, boundary: core.Boundary, what: str,
                  **settings: Any) -> dict[str, Any]:
    """librdkafka settings to reach ``endpoint`` through ``boundary``'s egress policy."""
    config: dict[str, Any] = dict(endpoint.extra)
    config.update(endpoint.auth)
    config.update(settings)
    config["bootstrap.servers"] = ",".join(_bootstrap(endpoint, boundary))
    config["socket.connection.setup.timeout.ms"] = int(CONNECT_TIMEOUT_S * 1000)
    config["client.id"] = config.get("client.id", f"spate-{what}")
    return config


def _bootstrap(endpoint: KafkaEndpoint, boundary: core.Boundary) -> list[str]:
    if boundary.egress is None:
        return [f"{_bracketed(host)}:{port}" for host, port in endpoint.servers]
    addresses = []
    for host, port in endpoint.servers:
        resolved = boundary.egress.resolve(host, port, option=BOOTSTRAP_SERVERS.name)
        addresses.append(f"{_bracketed(resolved[0])}:{port}")
    return addresses


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def cluster_metadata(config: dict[str, Any], endpoint: KafkaEndpoint, boundary: core.Boundary,
                     what: str, topic: str | None = None) -> ClusterMetadata:
    """The cluster's metadata (of ``topic`` only, if given), its brokers checked against the
    egress policy; raises :class:`ConnectorError` naming the first bootstrap server."""
    host, port = endpoint.servers[0]
    if not any(_accepts(server) for server in config["bootstrap.servers"].split(",")):
        raise unreachable(what, host, port)  # at once, rather than after librdkafka's retries
    admin = AdminClient({key: value for key, value in config.items()
                         if key not in _CLIENT_ROLE_CONFIGS})
    try:
        metadata = admin.list_topics(topic=topic, timeout=CONNECT_TIMEOUT_S)
    except KafkaException:
        raise unreachable(what, host, port) from None
    check_brokers(metadata, boundary)
    return metadata


def _accepts(server: str) -> bool:
    """Whether ``host:port`` (an address the policy checked) accepts a TCP connection."""
    host, _, port = server.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S):
            return True
    except OSError:
        return False


def check_brokers(metadata: ClusterMetadata, boundary: core.Boundary) -> None:
    """Every broker the cluster advertises must pass the egress policy."""
    if boundary.egress is None:
        return
    for broker in metadata.brokers.values():
        boundary.egress.resolve(str(broker.host), int(broker.port),
                                option=BOOTSTRAP_SERVERS.name)


def topic_partitions(metadata: ClusterMetadata, topic: str, endpoint: KafkaEndpoint) -> list[int]:
    """The partition ids of ``topic``; raises when the cluster does not have it."""
    described = metadata.topics.get(topic)
    if described is None or described.error is not None or not described.partitions:
        raise core.ConnectorError(f"topic '{topic}' does not exist on the Kafka cluster at "
                                  f"{endpoint.shown}; create it first", option=TOPIC.name)
    return sorted(described.partitions)
