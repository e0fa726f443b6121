"""How every ``redis`` table (lookup, stream source, sink) connects to its server.

The options ``address``, ``username``, ``password`` and ``connection_type`` are
read here once for all roles. Under a tenant's egress policy the address is
checked at planning time and resolved again when a client opens, and the client
connects to the checked address (:mod:`.destination`); without a policy
(``spate run``) redis-py takes the URL as it is. Failures become
:class:`ConnectorError` messages that name ``host:port`` and never the address
itself (it may hold a password).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import redis

from spate.engine.connectors import core
from spate.engine.connectors.core.egress import EgressPolicy, unreachable
from spate.engine.connectors.redis.destination import (
    ADDRESS,
    CONNECTION_TYPE,
    DEFAULT_PORT,
    PASSWORD,
    USERNAME,
    confined_client,
    confined_destination,
)

_SCHEMES = ("redis", "rediss", "unix")
#: Seconds to wait for Redis to accept a connection or answer a command.
TIMEOUT_S = 30.0


@dataclass(frozen=True)
class RedisConnection:
    """Where a table's Redis is and how to log in; plain values, shipped to executors."""

    address: str = field(repr=False)
    #: ``username`` / ``password`` given as options (the address holds none)
    credentials: dict[str, str] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"address": self.address, "credentials": dict(self.credentials)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RedisConnection:
        return cls(address=data["address"], credentials=dict(data["credentials"]))

    def shown(self) -> tuple[str, int]:
        """``(host, port)`` as the address names them, for messages (no credentials)."""
        parts = urlsplit(self.address)
        if parts.scheme.lower() == "unix":
            return parts.path, 0
        return parts.hostname or "", parts.port or DEFAULT_PORT


def read_connection(options: core.OptionReader, egress: EgressPolicy | None) -> RedisConnection:
    """The connection options of any redis table; raises :class:`ConnectorError`."""
    connection_type = options.choice(CONNECTION_TYPE)
    if connection_type == "cluster":
        raise core.ConnectorError(f"option '{CONNECTION_TYPE.name}' = 'cluster' is not supported "
                                  "yet: Spate connects to one standalone Redis server",
                                  option=CONNECTION_TYPE.name)
    address = options.required(ADDRESS).strip()
    connection = RedisConnection(address, credentials_of(options, address))
    if egress is not None:
        destination = confined_destination(address)
        egress.check_literal(destination.host, destination.port, str(destination.db),
                             option=ADDRESS.name)
    return connection


def credentials_of(options: core.OptionReader, address: str) -> dict[str, str]:
    """The ``username`` and ``password`` options, checked against the address."""
    try:
        parts = urlsplit(address)
        if parts.scheme.lower() not in _SCHEMES or not (parts.hostname or parts.path):
            raise ValueError("not a Redis URL")
        in_address = {USERNAME: parts.username, PASSWORD: parts.password}
        parts.port  # noqa: B018 (reading the port checks it)
    except ValueError:
        # The address may hold a password: never repeat it.
        raise core.ConnectorError(f"option '{ADDRESS.name}' must be a redis://, rediss:// or "
                                  "unix:// URL, e.g. 'redis://localhost:6379/0'",
                                  option=ADDRESS.name) from None
    credentials: dict[str, str] = {}
    for spec in (USERNAME, PASSWORD):
        value = options.string(spec)
        if value is None:
            continue
        if in_address[spec]:
            raise core.ConnectorError(f"the {spec.name} is given twice: in '{ADDRESS.name}' and in "
                                      f"option '{spec.name}'; keep one", option=spec.name)
        # redis-py's parameters are named as the options
        credentials[spec.name] = value
    return credentials


class RedisClient:
    """An open client of one table's Redis, and the words its errors use."""

    def __init__(self, connection: RedisConnection, egress: EgressPolicy | None,
                 what: str) -> None:
        #: who is talking, e.g. "redis sink 'out'" (starts every message)
        self.what = what
        self.host, self.port = connection.shown()
        if egress is None:  # `spate run`: one trusted user, any URL redis-py takes
            self.client = redis.Redis.from_url(
                connection.address, socket_timeout=TIMEOUT_S,
                socket_connect_timeout=TIMEOUT_S, **connection.credentials)
            return
        # Under an egress policy the name is resolved and checked now, and the client,
        # built from the checked parts alone, connects to the checked address.
        destination = confined_destination(connection.address)
        addresses = egress.resolve(destination.host, destination.port, str(destination.db),
                                   option=ADDRESS.name)
        self.client = confined_client(destination, addresses[0], TIMEOUT_S,
                                      connection.credentials)

    def failure(self, error: redis.RedisError) -> core.ConnectorError:
        """The message of a failed command: a connection failure reads the same whatever
        the cause (no probing through it); a command error says what Redis answered."""
        if isinstance(error, redis.ConnectionError | redis.TimeoutError):
            return unreachable(self.what, self.host, self.port)
        return core.ConnectorError(f"{self.what}: Redis failed: {type(error).__name__}: {error}")

    def server(self) -> str:
        """What :meth:`Connector.reach` reports: the server's version and where it is."""
        try:
            self.client.ping()
            info: dict[str, Any] = self.client.info("server")
        except redis.RedisError as error:
            raise self.failure(error) from None
        return f"Redis {info.get('redis_version', '?')} at {self.host}:{self.port}"

    def close(self) -> None:
        self.client.close()
