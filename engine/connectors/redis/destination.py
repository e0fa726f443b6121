"""Where a tenant's Redis connection goes: its address read once, and a client built
from what was read, connected to the address the egress policy checked.

redis-py's ``from_url`` takes much of a connection from the URL's query string
(``?host=``, ``?port=``, ``?unix_socket_path=``, ``?ssl_cert_reqs=none``), so a
URL checked by its host and port could connect elsewhere. Under an egress
policy the address is therefore parsed here, strictly — scheme, host, port,
database number, credentials and only ``?db=`` after them — the policy checks
that host, port and database, and the client is built from those parts alone:

- it connects to the address the policy resolved (so a name cannot point
  elsewhere between the check and the connect), and a ``rediss://``
  connection still verifies the server's certificate against the name the
  tenant wrote (:class:`PinnedSSLConnection`);
- it speaks RESP2, so the server cannot push a "node moved" notification that
  sends it to another host (redis-py follows those on RESP3);
- every failure while connecting — refused, unknown user, wrong password, a
  database number the server does not have — is a :class:`RedisConnectError`,
  which the lookup reports in one sentence whatever the cause.
"""

from __future__ import annotations

import re
import socket
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import redis
from redis.connection import AbstractConnection

from spate.engine.connectors import core
from spate.engine.connectors.core.errors import ConnectorError

#: The roles of redis tables: lookup tables, stream sources and sinks.
ALL_ROLES = frozenset({core.LOOKUP, core.SOURCE, core.SINK})
# The options every redis table connects with, declared here where the address is
# checked (:mod:`.client` reads them).
ADDRESS = core.option("address", ALL_ROLES, "`redis://[user:password@]host[:port][/db]`, "
                      "`rediss://…` (TLS) or `unix:///path.sock`; in the Spate service a network "
                      "host "
                      "under the tenant's egress policy, and only `?db=` after `?`", required=True)
USERNAME = core.LOOKUP_USERNAME.described("the user to log in as, kept out of the address",
                                          roles=ALL_ROLES, default_text="from `address`")
PASSWORD = core.LOOKUP_PASSWORD.described("its password, kept out of the address",
                                          roles=ALL_ROLES, default_text="from `address`")
CONNECTION_TYPE = core.option("connection_type", ALL_ROLES, "one standalone server; `cluster` is "
                              "not supported yet", choices=("standalone", "cluster"),
                              default="standalone")

DEFAULT_PORT = 6379
#: Query options that would move the connection, or set its socket, elsewhere.
_DESTINATION_OPTIONS = frozenset({"host", "port", "path", "unix_socket_path", "socket_type"})
_DATABASE = re.compile(r"[0-9]+")


class RedisConnectError(redis.ConnectionError):
    """Connecting to a confined Redis failed (whatever the server answered)."""


@dataclass(frozen=True)
class RedisDestination:
    """The parts of a Redis address a confined client is built from."""

    host: str
    port: int
    db: int
    tls: bool
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def confined_destination(address: str) -> RedisDestination:
    """The destination of a Redis URL a tenant's job may connect to; raises
    :class:`ConnectorError` (naming the option ``address``, never repeating it) for
    local sockets and for query options that would change where it connects or how
    it checks the server."""
    parts = urlsplit(address)
    scheme = parts.scheme.lower()
    if scheme not in ("redis", "rediss") or not parts.hostname:
        raise _refused("must name a network host ('redis://host:6379/0'); local sockets "
                       "cannot be used here")
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise _refused("has a port that is not a number from 1 to 65535") from None
    path = unquote(parts.path).strip("/")
    if path and not _DATABASE.fullmatch(path):
        raise _refused("must end with a database number, e.g. 'redis://host:6379/0'")
    db = _query_database(parts.query, int(path) if path else None)
    return RedisDestination(
        host=unquote(parts.hostname), port=port, db=0 if db is None else db,
        tls=scheme == "rediss",
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None)


def _query_database(query: str, path_db: int | None) -> int | None:
    """The database number after ``?db=`` (the only query option allowed)."""
    seen: set[str] = set()
    db = path_db
    for key, value in parse_qsl(query, keep_blank_values=True):
        if key in seen:
            raise _refused(f"gives the URL option '{key}' twice; give it once")
        seen.add(key)
        if key != "db":
            raise _refused(_why_not(key))
        if not _DATABASE.fullmatch(value) or (path_db is not None and int(value) != path_db):
            raise _refused("gives the database twice or not as a number: write it once, "
                           "as the path ('redis://host:6379/2')")
        db = int(value)
    return db


def _why_not(key: str) -> str:
    if key in _DESTINATION_OPTIONS:
        return (f"has the URL option '{key}', which would connect elsewhere than the "
                "address names: write the host and port in the address itself "
                "('redis://host:6380/0')")
    if key.startswith("ssl"):
        return (f"has the URL option '{key}', which cannot be used here: a rediss:// "
                "connection always verifies the server's certificate and host name "
                "against the public certificate authorities")
    if key in ("username", "password"):
        return (f"has the URL option '{key}': give credentials in the address "
                f"('redis://user:password@host:6379/0') or as the options '{USERNAME.name}' "
                f"and '{PASSWORD.name}'")
    return (f"has the URL option '{key}', which cannot be used here; only the database "
            "may follow '?' ('?db=2')")


def _refused(why: str) -> ConnectorError:
    return ConnectorError(f"option '{ADDRESS.name}' {why}", option=ADDRESS.name)


def confined_client(destination: RedisDestination, address: str, timeout_s: float,
                    credentials: dict[str, str]) -> redis.Redis:
    """A client of ``destination`` that connects to ``address`` (one the egress policy
    resolved it to and checked), with ``credentials`` given as options."""
    kwargs: dict[str, Any] = {
        "host": address, "port": destination.port, "db": destination.db,
        "username": destination.username or credentials.get("username"),
        "password": destination.password or credentials.get("password"),
        "socket_timeout": timeout_s, "socket_connect_timeout": timeout_s,
        "protocol": 2, "redis_connect_func": _handshake,
    }
    if destination.tls:
        pool = redis.ConnectionPool(connection_class=PinnedSSLConnection,
                                    server_hostname=destination.host, **kwargs)
    else:
        pool = redis.ConnectionPool(connection_class=redis.Connection, **kwargs)
    return redis.Redis(connection_pool=pool)


def _handshake(connection: AbstractConnection) -> None:
    """redis-py's own handshake (HELLO, AUTH, SELECT…), every failure a connect error:
    an unknown database number must read like a refused port."""
    try:
        connection.on_connect()  # type: ignore[no-untyped-call]
    except redis.RedisError:
        raise RedisConnectError("could not connect") from None


class PinnedSSLConnection(redis.SSLConnection):
    """A TLS connection to an address already resolved and checked (``host``), that
    verifies the server's certificate against the name the tenant wrote.

    redis-py connects to and verifies one ``host``; here the socket goes to the
    checked address and only the handshake sees the name.
    """

    def __init__(self, *, server_hostname: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.server_hostname = server_hostname

    def _wrap_socket_with_ssl(self, sock: socket.socket) -> ssl.SSLSocket:
        address = self.host
        self.host = self.server_hostname
        try:
            wrapped: ssl.SSLSocket = super()._wrap_socket_with_ssl(sock)  # type: ignore[no-untyped-call]
        finally:
            self.host = address
        return wrapped
