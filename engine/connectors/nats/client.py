"""Connecting to NATS for the ``nats`` connector: servers, credentials, the egress policy.

nats-py is asyncio; Spate's callers are not. :func:`run_sync` runs one
coroutine to completion on a private event loop (in a helper thread when the
calling thread already runs a loop, as the API's does), and every operation
opens its own short-lived connection. Connections never reconnect: a server
that goes away fails the operation, and Spark retries the batch, so the
client never wanders to a server the tenant's egress policy did not check
(NATS servers announce their cluster peers).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

import nats
from nats.aio.client import Client as NatsClient

from spate.engine.connectors import core
from spate.engine.connectors.core.egress import EgressPolicy, unreachable
from spate.engine.connectors.core.errors import ConnectorError

DEFAULT_PORT = 4222
#: Seconds to wait for a server to accept a connection or answer a request.
TIMEOUT_S = 10.0

# The options naming what a table connects to, declared here where the connection's
# (and JetStream's) errors name them; :mod:`.connector` reads them.
SERVERS = core.option("servers", core.BOTH, f"`nats://host:port` (or `host[:port]`, port "
                      f"{DEFAULT_PORT}), several separated by commas; no credentials inside (use "
                      f"`auth.*`); `tls://` is not supported yet", required=True)
AUTH_TYPE = core.option("auth.type", core.BOTH, "`none` or `credentials`; `jwt` is not supported "
                                                "yet",
                        choices=("none", "credentials"), default="none")
AUTH_USERNAME = core.option("auth.username", core.BOTH, "the user", required_when= "with "
                                                                                  "`credentials`")
AUTH_PASSWORD = core.option("auth.password", core.BOTH, "the user's password",
                            required_when="with `credentials`")
NATS_STREAM = core.option("nats.stream", core.BOTH, "the JetStream stream to read (a source), or "
                          "to publish into through JetStream (a sink, with `nats.subject`)",
                          required_when="a source: this or `nats.subject`")
NATS_SUBJECT = core.option("nats.subject", core.BOTH, "the core subject to subscribe to (a source, "
                           "wildcards allowed) or to publish to (a sink)",
                           required_when="a sink; a source: this or `nats.stream`")

T = TypeVar("T")


@dataclass(frozen=True)
class Server:
    """One entry of the ``servers`` option."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True)
class ConnectSettings:
    """Where and as whom to connect; a plain value shipped to Spark's workers."""

    servers: tuple[Server, ...]
    username: str | None = None
    password: str | None = None
    #: the tenant's boundary (:meth:`Boundary.to_dict`); None: unconfined
    boundary: dict[str, Any] | None = None
    #: the live egress policy where it is at hand (the driver): not shipped
    egress: EgressPolicy | None = field(default=None, compare=False, repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {"servers": [asdict(server) for server in self.servers],
                "username": self.username, "password": self.password,
                "boundary": self.boundary}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ConnectSettings:
        servers = tuple(Server(s["host"], int(s["port"])) for s in data["servers"])
        return cls(servers, data.get("username"), data.get("password"), data.get("boundary"))

    @property
    def shown(self) -> str:
        """The servers as an error message may name them (never a credential)."""
        return ", ".join(str(server) for server in self.servers)


def parse_servers(text: str) -> tuple[Server, ...]:
    """``nats://host:port`` or ``host[:port]`` entries, comma-separated; raises
    :class:`ConnectorError` naming ``servers`` (without echoing what may be a secret)."""
    servers = []
    for entry in (part.strip() for part in text.split(",")):
        if not entry:
            raise ConnectorError(f"option '{SERVERS.name}' has an empty entry; give "
                                 "'nats://host:port' entries separated by commas",
                                 option=SERVERS.name)
        servers.append(_parse_server(entry))
    return tuple(servers)


def _parse_server(entry: str) -> Server:
    scheme, found, rest = entry.partition("://")
    if not found:
        scheme, rest = "nats", entry
    if scheme.lower() != "nats":
        raise ConnectorError(f"option '{SERVERS.name}': scheme '{scheme}://' is not "
                             "supported yet; use nats://host:port (TLS is not supported yet)",
                             option=SERVERS.name)
    if "@" in rest:
        raise ConnectorError(f"option '{SERVERS.name}' must not hold credentials: use "
                             f"'{AUTH_TYPE.name}' = 'credentials' with '{AUTH_USERNAME.name}' "
                             f"and '{AUTH_PASSWORD.name}'", option=SERVERS.name)
    host, port_text = _split_host_port(rest.rstrip("/"))
    try:
        port = int(port_text) if port_text else DEFAULT_PORT
    except ValueError:
        port = 0
    if not host or not 0 < port < 65536 or "/" in host:
        raise ConnectorError(f"option '{SERVERS.name}': '{entry}' is not nats://host:port",
                             option=SERVERS.name)
    return Server(host, port)


def _split_host_port(text: str) -> tuple[str, str]:
    if text.startswith("["):  # [v6]:port
        host, _, rest = text[1:].partition("]")
        return host, rest.removeprefix(":")
    if text.count(":") > 1:  # a bare IPv6 address
        return text, ""
    host, _, port = text.partition(":")
    return host, port


def server_urls(settings: ConnectSettings) -> list[str]:
    """The URLs to connect to: under an egress policy, the checked addresses."""
    egress = settings.egress or core.Boundary.from_dict(settings.boundary).egress
    urls = []
    for server in settings.servers:
        host = server.host
        if egress is not None:
            host = egress.resolve(server.host, server.port, option=SERVERS.name)[0]
        urls.append(f"nats://{Server(host, server.port)}")
    return urls


async def connect(settings: ConnectSettings, what: str) -> NatsClient:
    """A connected client (no reconnects); ``what`` names the table in errors."""
    urls = server_urls(settings)

    async def quiet(error: Exception) -> None:
        del error  # the failing call reports it; the default callback would log it again

    try:
        return await nats.connect(
            servers=urls, user=settings.username, password=settings.password,
            # max_reconnect_attempts=0 would retry the first connect forever: one try each
            allow_reconnect=False, connect_timeout=TIMEOUT_S, max_reconnect_attempts=1,
            reconnect_time_wait=0.1, error_cb=quiet, name="spate")
    except (OSError, TimeoutError, nats.errors.Error) as error:
        raise connect_error(settings, what, error) from None


def connect_error(settings: ConnectSettings, what: str, error: BaseException) -> ConnectorError:
    """A failed connection: under an egress policy every failure reads the same."""
    first = settings.servers[0]
    if settings.boundary and settings.boundary.get("egress") is not None:
        return unreachable(what, first.host, first.port)
    return ConnectorError(f"{what}: could not connect to NATS at {settings.shown} "
                          f"({type(error).__name__}: {_reason(error)}); check "
                          f"'{SERVERS.name}' and the credentials", option=SERVERS.name)


def _reason(error: BaseException) -> str:
    text = str(error).strip() or "no answer"
    return text.splitlines()[0][:200]


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion from synchronous code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()
