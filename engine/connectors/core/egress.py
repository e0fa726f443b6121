"""Where a tenant's network connectors may connect: the egress policy.

A connector that opens a network connection for a tenant's table asks the
table's :class:`EgressPolicy` first, with the host and port the tenant wrote.
The policy resolves the host (every address it resolves to must pass) and
returns the addresses the connector must connect to, so a name that resolves
to a public address when checked cannot point at loopback when connected.

By default only public unicast addresses pass. Refused unless the operator
allow-lists them: loopback, link-local (``169.254.169.254``, the cloud
metadata service, included), private and shared ranges, unspecified,
multicast and reserved addresses — in every spelling (``127.1``,
``0x7f000001``, ``::ffff:127.0.0.1``, 6to4 and NAT64 forms of an IPv4
address). The control plane's own endpoints (its database, broker and state
store) are refused even when allow-listed; where a tenant's server shares a
host and port with one of them, the database name (PostgreSQL) or number
(Redis) tells them apart.

Every refusal, and every failure to resolve, reads the same, so a tenant
cannot tell a private name from a missing one.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import psutil

from spate.engine.connectors.core.errors import ConnectorError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

#: IPv4 ranges that are neither private nor loopback by Python's reckoning but
#: still reach inside a deployment: shared address space (carrier NAT).
_EXTRA_BLOCKED = (ipaddress.ip_network("100.64.0.0/10"),)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")


class EgressDeniedError(ConnectorError):
    """A destination the tenant's job may not connect to (or cannot resolve)."""


def denied(host: str, port: int, option: str | None = None) -> EgressDeniedError:
    """The one message for a refused or unresolvable destination."""
    return EgressDeniedError(
        f"cannot connect to {host}:{port}: the destination is unreachable or not allowed by "
        "this deployment's egress policy (loopback, private, link-local and control-plane "
        "addresses are refused unless the operator allows them)", option=option)


def unreachable(what: str, host: str, port: int) -> ConnectorError:
    """The one message for a connection the policy allowed but that failed: a refused
    port, an unknown user and an unknown database must read alike to a tenant."""
    return ConnectorError(f"{what}: could not connect to {host}:{port} (the server is "
                          "unreachable, or refused the connection, the credentials or the "
                          "database); check the connection settings")


@dataclass(frozen=True)
class AllowRule:
    """One allow-list entry: a network or a host name, with an optional port."""

    network: IPNetwork | None = None
    host_name: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, text: str) -> AllowRule:
        """``10.0.0.0/8``, ``10.1.2.3``, ``10.1.2.3:5432``, ``[fd00::1]:6379``,
        ``db.internal:5432`` or ``db.internal``; raises ValueError."""
        entry = text.strip()
        if not entry:
            raise ValueError("an empty egress allow-list entry")
        host, port = _split_port(entry)
        try:
            return cls(network=ipaddress.ip_network(host, strict=False), port=port)
        except ValueError:
            pass
        if "/" in host or not host.replace("-", "").replace(".", "").isalnum():
            raise ValueError(f"egress allow-list entry {entry!r} is neither a CIDR, an "
                             "address nor a host name (with an optional :port)")
        return cls(host_name=host.lower().rstrip("."), port=port)

    def admits_name(self, host: str, port: int) -> bool:
        return (self.host_name is not None and self.host_name == host.lower().rstrip(".")
                and self.port in (None, port))

    def admits_address(self, address: IPAddress, port: int) -> bool:
        return (self.network is not None and address.version == self.network.version
                and address in self.network and self.port in (None, port))

    def __str__(self) -> str:
        base = str(self.network) if self.network is not None else str(self.host_name)
        if self.port is None:
            return base
        return f"[{base}]:{self.port}" if ":" in base else f"{base}:{self.port}"


@dataclass(frozen=True)
class Endpoint:
    """A control-plane endpoint no tenant may reach: host, port, and which database."""

    host: str
    port: int
    #: the PostgreSQL database name or Redis database number; None: every one
    database: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"host": self.host, "port": self.port, "database": self.database}


@dataclass(frozen=True)
class EgressPolicy:
    """Which destinations a tenant's connectors may reach."""

    allow: tuple[AllowRule, ...] = ()
    control_plane: tuple[Endpoint, ...] = ()
    #: Resolves a host and port to addresses; replaceable in tests.
    resolver: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def from_config(cls, allow: Iterable[str], control_plane: Iterable[Endpoint]) -> EgressPolicy:
        return cls(allow=tuple(AllowRule.parse(entry) for entry in allow),
                   control_plane=tuple(control_plane))

    def to_dict(self) -> dict[str, Any]:
        return {"allow": [str(rule) for rule in self.allow],
                "control_plane": [endpoint.to_dict() for endpoint in self.control_plane]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EgressPolicy:
        endpoints = (Endpoint(str(e["host"]), int(e["port"]),
                              None if e.get("database") is None else str(e["database"]))
                     for e in data.get("control_plane", ()))
        return cls.from_config(data.get("allow", ()), endpoints)

    # -- checks -----------------------------------------------------------------

    def check_literal(self, host: str, port: int, database: str | None = None,
                      option: str | None = None) -> None:
        """At planning: refuse a host that is an address (any spelling) or a local name
        the policy refuses; other names are checked when the job connects."""
        address = literal_address(host)
        if address is None and host.lower().rstrip(".") not in _LOCAL_NAMES:
            return
        if any(rule.admits_name(host, port) for rule in self.allow):
            self._refuse_control_plane(host, port, database, option)
            return
        addresses = [address] if address is not None else [
            ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
        for candidate in addresses:
            self._check_address(candidate, host, port, database, option)

    def resolve(self, host: str, port: int, database: str | None = None,
                option: str | None = None) -> list[str]:
        """The addresses to connect to for ``host:port``; raises :class:`EgressDeniedError`
        unless every address the host resolves to is allowed."""
        try:
            resolved = (self.resolver or _resolve)(host, port)
        except (OSError, UnicodeError, ValueError):
            raise denied(host, port, option) from None
        if not resolved:
            raise denied(host, port, option)
        by_name = any(rule.admits_name(host, port) for rule in self.allow)
        for address in resolved:
            if by_name:
                self._refuse_control_plane(str(address), port, database, option, host)
            else:
                self._check_address(address, host, port, database, option)
        return [str(address) for address in dict.fromkeys(resolved)]

    def _check_address(self, address: IPAddress, host: str, port: int,
                       database: str | None, option: str | None) -> None:
        self._refuse_control_plane(str(address), port, database, option, host)
        for candidate in embedded_addresses(address):
            if is_public(candidate):
                continue
            if not any(rule.admits_address(candidate, port) for rule in self.allow):
                raise denied(host, port, option)

    def _refuse_control_plane(self, address_or_host: str, port: int, database: str | None,
                              option: str | None, shown: str | None = None) -> None:
        address = literal_address(address_or_host)
        for endpoint in self.control_plane:
            if endpoint.port != port:
                continue
            if endpoint.database is not None and database is not None \
                    and endpoint.database != database:
                continue
            if address is None:
                if address_or_host.lower() == endpoint.host.lower():
                    raise denied(shown or address_or_host, port, option)
                continue
            if _same_host(address, self._endpoint_addresses(endpoint)):
                raise denied(shown or address_or_host, port, option)

    def _endpoint_addresses(self, endpoint: Endpoint) -> list[IPAddress]:
        try:
            return (self.resolver or _resolve)(endpoint.host, endpoint.port)
        except (OSError, UnicodeError, ValueError):
            return []


def literal_address(host: str) -> IPAddress | None:
    """``host`` as an address when it is one in any spelling the resolver accepts."""
    text = host.strip().strip("[]")
    if "%" in text:  # a zone index: fe80::1%eth0
        text = text.split("%", 1)[0]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    try:  # the classic inet_aton forms: 127.1, 0x7f000001, 017700000001
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except (OSError, ValueError):
        return None


def embedded_addresses(address: IPAddress) -> list[IPAddress]:
    """The address and every IPv4 address it carries (mapped, compatible, 6to4, NAT64)."""
    found: list[IPAddress] = [address]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            found.append(address.ipv4_mapped)
        if address.sixtofour is not None:
            found.append(address.sixtofour)
        if address in _NAT64:
            found.append(ipaddress.IPv4Address(int(address) & 0xFFFFFFFF))
        packed = address.packed
        if packed[:12] == bytes(12) and int(address) > 1:  # deprecated ::a.b.c.d
            found.append(ipaddress.IPv4Address(packed[12:]))
    return found


def is_public(address: IPAddress) -> bool:
    """A globally routable unicast address outside the shared and reserved ranges."""
    if any(address.version == net.version and address in net for net in _EXTRA_BLOCKED):
        return False
    return bool(address.is_global) and not (address.is_multicast or address.is_reserved
                                             or address.is_unspecified)


def _same_host(address: IPAddress, endpoint_addresses: list[IPAddress]) -> bool:
    """Whether ``address`` reaches the machine an endpoint address names.

    An endpoint on loopback or the unspecified address is this machine: any
    address of this machine's (all of loopback, every local interface) reaches it.
    """
    address = embedded_addresses(address)[-1]
    for endpoint in endpoint_addresses:
        endpoint = embedded_addresses(endpoint)[-1]
        if endpoint == address:
            return True
        if (endpoint.is_loopback or endpoint.is_unspecified) and _is_this_machine(address):
            return True
    return False


def _is_this_machine(address: IPAddress) -> bool:
    if address.is_loopback or address.is_unspecified:
        return True
    for addresses in psutil.net_if_addrs().values():
        for entry in addresses:
            local = literal_address(str(entry.address))
            if local is not None and local == address:
                return True
    return False


def _resolve(host: str, port: int) -> list[IPAddress]:
    found: list[IPAddress] = []
    for *_, sockaddr in socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM):
        parsed = literal_address(str(sockaddr[0]))
        if parsed is not None:
            found.append(parsed)
    return found


def _split_port(entry: str) -> tuple[str, int | None]:
    if entry.startswith("["):  # [v6]:port
        host, _, rest = entry[1:].partition("]")
        return host, _port(rest.removeprefix(":")) if rest else None
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, _port(port)
    return entry, None


def _port(text: str) -> int:
    port = int(text)
    if not 0 < port < 65536:
        raise ValueError(f"port {port} is out of range")
    return port
