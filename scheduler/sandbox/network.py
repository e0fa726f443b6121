"""A compute unit's network: a namespace of its own whose one way out is a link
the host filters, packet by packet.

Every sandboxed unit (a job's process, a tenant's warm application, a
connection check) runs in its own network namespace. The namespace holds
loopback and one end of a veth pair (``eth0``, a /30 out of
:data:`UNIT_SUBNET`); the other end (``spx…``) is the host's. The host's
nftables table for the unit (``inet spate_spx…``) enforces the egress policy
on that link — the same policy the connectors check when planning: public
addresses, plus what the operator allow-lists (``SPATE_EGRESS_ALLOW``), never
loopback, link-local, private or reserved ranges otherwise, never a
control-plane server. Whatever library opens the socket, whatever a server
redirects to or advertises, the packet goes through those rules: the address
checked is the address connected.

Inside the unit:

- ``127.0.0.1`` is the unit's own loopback for ports from
  :data:`UNIT_PORTS_FROM` up (its processes' own sockets: the kernel hands out
  ephemeral ports only there). A connection to a lower loopback port is sent to
  the host's loopback, where the host's rules admit it only if the policy
  allow-lists that loopback address and port (a test's broker, a developer's
  database); anything else is refused at once.
- DNS goes to the link's host end, which forwards it to the host's resolver
  and nowhere else; the answers do not matter to the policy, which is applied
  to the addresses connected to.
- IPv6 has loopback only.

Units never reach one another, nor any address of the host but the loopback
ports the policy allows. ``docs/security.md`` says what an operator must allow.
"""

from __future__ import annotations

import fcntl
import hashlib
import ipaddress
import logging
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from spate.engine.connectors.core.egress import EgressPolicy, Endpoint
from spate.scheduler.errors import SchedulerError

log = logging.getLogger(__name__)

IP = "ip"
NFT = "nft"
NSENTER = "nsenter"
#: Where the links' addresses come from: a /30 per unit (16,383 units).
UNIT_SUBNET = ipaddress.IPv4Network("100.127.0.0/16")
#: The unit's own loopback ports start here; below, loopback is the host's.
UNIT_PORTS_FROM = 61000
#: Host-side interface names: this prefix and 8 hex digits of the unit's name.
LINK_PREFIX = "spx"
#: Named namespaces live here (``ip netns``'s own convention).
NETNS_DIR = Path("/run/netns")
#: Serialises address allocation among the processes that build units on one host.
LOCK_FILE = Path("/run/spate-unit-network.lock")

#: IPv4 ranges no unit reaches unless allow-listed: IANA's special-purpose ranges
#: (this network, private, shared, loopback, link-local, documentation, benchmarking,
#: multicast, reserved, broadcast).
BLOCKED_V4 = tuple(ipaddress.IPv4Network(net) for net in (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16",
    "172.16.0.0/12", "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16",
    "198.18.0.0/15", "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4"))
_COMMAND_TIMEOUT_S = 30


class UnitNetworkError(SchedulerError):
    """The host could not build a unit's network (a problem of the server's)."""


def network_problem() -> str | None:
    """Why this host cannot give units their own network, or None when it can."""
    for tool, package in ((IP, "iproute2"), (NFT, "nftables"), (NSENTER, "util-linux")):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (Debian's {package} package)"
    try:
        forwarding = Path("/proc/sys/net/ipv4/ip_forward").read_text().strip()
    except OSError as error:
        return f"cannot read whether the host forwards IPv4: {error}"
    if forwarding != "1":
        try:
            Path("/proc/sys/net/ipv4/ip_forward").write_text("1")
        except OSError:
            return ("the host does not forward IPv4 (net.ipv4.ip_forward=0) and it cannot be "
                    "turned on: units could reach nothing outside")
    return None


@dataclass(frozen=True)
class Destination:
    """Where a unit may connect: an IPv4 network, and a TCP port (None: every port)."""

    network: ipaddress.IPv4Network
    port: int | None = None

    @property
    def loopback(self) -> bool:
        return self.network.subnet_of(ipaddress.IPv4Network("127.0.0.0/8"))


@dataclass(frozen=True)
class NetworkRules:
    """What the host lets a unit reach, as addresses: computed once per unit from the
    egress policy (host names resolved when the unit is built)."""

    allow: tuple[Destination, ...]
    #: Control-plane servers (every database on them) refused even when allow-listed.
    refuse: tuple[Destination, ...]
    #: The resolver the unit's DNS queries are forwarded to (None: no DNS).
    resolver: ipaddress.IPv4Address | None

    @classmethod
    def from_policy(cls, policy: EgressPolicy,
                    platform: Iterable[tuple[str, int]] = ()) -> NetworkRules:
        """The rules for ``policy``; ``platform`` adds the host and port of servers
        the unit's engine itself needs (a PostgreSQL state store)."""
        allow: list[Destination] = []
        for rule in policy.allow:
            if rule.network is not None:
                if rule.network.version == 4:
                    allow.append(Destination(ipaddress.IPv4Network(rule.network), rule.port))
                else:
                    mapped = _mapped_v4(rule.network)
                    if mapped is not None:
                        allow.append(Destination(mapped, rule.port))
            elif rule.host_name is not None:
                allow.extend(Destination(ipaddress.IPv4Network(address), rule.port)
                             for address in _resolve_v4(rule.host_name))
        for host, port in platform:
            allow.extend(Destination(ipaddress.IPv4Network(address), port)
                         for address in _resolve_v4(host))
        refuse = tuple(Destination(ipaddress.IPv4Network(address), endpoint.port)
                       for endpoint in policy.control_plane if _whole_server(endpoint)
                       for address in _resolve_v4(endpoint.host))
        return cls(tuple(dict.fromkeys(allow)), refuse, host_resolver())


def _whole_server(endpoint: Endpoint) -> bool:
    """A control-plane endpoint that no tenant shares a server with: the network can
    refuse it (where a database name or number tells the control plane's apart, the
    connectors' checks and the server's own authentication do)."""
    return endpoint.database is None


def _mapped_v4(network: ipaddress.IPv6Network | ipaddress.IPv4Network
               ) -> ipaddress.IPv4Network | None:
    """The IPv4 network an allow-listed ``::ffff:a.b.c.d/n`` names; units have no IPv6."""
    if isinstance(network, ipaddress.IPv6Network) and network.prefixlen >= 96:
        mapped = network.network_address.ipv4_mapped
        if mapped is not None:
            return ipaddress.IPv4Network(f"{mapped}/{network.prefixlen - 96}", strict=False)
    return None


def _resolve_v4(host: str) -> list[str]:
    """The IPv4 addresses of ``host`` (loopback names give 127.0.0.1); [] when it does
    not resolve now (the rule then admits nothing until the unit is built again)."""
    try:
        found = socket.getaddrinfo(host, None, socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        log.warning("an egress allow-list name does not resolve: %s", host)
        return []
    return list(dict.fromkeys(str(item[4][0]) for item in found))


def host_resolver() -> ipaddress.IPv4Address | None:
    """The first IPv4 name server of the host's ``/etc/resolv.conf``."""
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "nameserver":
            try:
                address = ipaddress.ip_address(parts[1])
            except ValueError:
                continue
            if isinstance(address, ipaddress.IPv4Address):
                return address
    return None


@dataclass(frozen=True)
class UnitLink:
    """One unit's namespace and link: names and addresses."""

    name: str
    subnet: ipaddress.IPv4Network

    @classmethod
    def for_unit(cls, unit_name: str, subnet: ipaddress.IPv4Network) -> UnitLink:
        digest = hashlib.sha256(unit_name.encode()).hexdigest()[:8]
        return cls(f"{LINK_PREFIX}{digest}", subnet)

    @property
    def netns(self) -> str:
        return f"spate-{self.name}"

    @property
    def netns_path(self) -> Path:
        return NETNS_DIR / self.netns

    @property
    def host_address(self) -> ipaddress.IPv4Address:
        return self.subnet.network_address + 1

    @property
    def unit_address(self) -> ipaddress.IPv4Address:
        return self.subnet.network_address + 2

    @property
    def table(self) -> str:
        return f"spate_{self.name}"


class UnitNetwork:
    """Builds and removes units' namespaces, links and host rules."""

    def __init__(self, rules: NetworkRules, subnet: ipaddress.IPv4Network = UNIT_SUBNET
                 ) -> None:
        self.rules = rules
        self.subnet = subnet

    def create(self, unit_name: str) -> UnitLink:
        """Build the unit's namespace, link and rules; raises :class:`UnitNetworkError`."""
        with _host_lock():
            link = UnitLink(UnitLink.for_unit(unit_name, self.subnet).name,
                            self._free_subnet())
            remove_link(link.name)  # a leftover of a unit of the same name
            try:
                self._build(link)
            except BaseException:
                remove_link(link.name)
                raise
        return link

    def _free_subnet(self) -> ipaddress.IPv4Network:
        used = _used_addresses()
        for candidate in self.subnet.subnets(new_prefix=30):
            if candidate.network_address + 1 not in used:
                return candidate
        raise UnitNetworkError(f"no free link addresses left in {self.subnet}")

    def _build(self, link: UnitLink) -> None:
        ns = link.netns
        _run(IP, "netns", "add", ns)
        _run(IP, "link", "add", link.name, "type", "veth", "peer", "name", "eth0",
             "netns", ns)
        _sysctl_host(f"net/ipv6/conf/{link.name}/disable_ipv6", "1")
        _sysctl_host(f"net/ipv4/conf/{link.name}/route_localnet", "1")
        _run(IP, "addr", "add", f"{link.host_address}/30", "dev", link.name)
        _run(IP, "link", "set", link.name, "up")
        inside = (IP, "-n", ns)
        _run(*inside, "link", "set", "lo", "up")
        _run(*inside, "addr", "add", f"{link.unit_address}/30", "dev", "eth0")
        _run(*inside, "link", "set", "eth0", "up")
        _run(*inside, "route", "add", "default", "via", str(link.host_address))
        in_ns = (IP, "netns", "exec", ns)
        _run(*in_ns, "sysctl", "-q", "-w", "net.ipv4.conf.all.rp_filter=0",
             "net.ipv4.conf.all.route_localnet=1", "net.ipv6.conf.eth0.disable_ipv6=1",
             f"net.ipv4.ip_local_port_range={UNIT_PORTS_FROM} 65535")
        _run(*in_ns, NFT, "-f", "-", stdin=unit_ruleset(link))
        _run(NFT, "-f", "-", stdin=host_ruleset(link, self.rules))


def host_ruleset(link: UnitLink, rules: NetworkRules) -> str:
    """The host's nftables table for one unit's link: its whole egress policy."""
    me = f'iifname "{link.name}"'
    pre: list[str] = []
    forward = [f"{me} ct state established,related accept",
               f"{me} meta nfproto ipv6 reject"]
    if rules.resolver is not None:
        target = f"{rules.resolver}:53"
        for proto in ("udp", "tcp"):
            pre.append(f"{me} ip daddr {link.host_address} {proto} dport 53 "
                       f"dnat ip to {target}")
        forward.append(f"{me} ct status dnat ip daddr {rules.resolver} "
                       "meta l4proto { tcp, udp } th dport 53 accept")
    for dest in rules.refuse:
        port = f" tcp dport {dest.port}" if dest.port is not None else ""
        forward.append(f"{me} ip daddr {dest.network}{port} reject")
    loopback_refused = [d for d in rules.refuse if d.loopback]
    for dest in rules.allow:
        if dest.loopback:
            if any(r.port in (None, dest.port) for r in loopback_refused):
                continue  # a control-plane server the allow-list names: still refused
            # The unit sends loopback below UNIT_PORTS_FROM to its link's host end.
            address = dest.network.network_address if dest.network.prefixlen == 32 else \
                ipaddress.IPv4Address("127.0.0.1")
            ports = str(dest.port) if dest.port is not None else f"1-{UNIT_PORTS_FROM - 1}"
            pre.append(f"{me} ip daddr {link.host_address} tcp dport {ports} "
                       f"dnat ip to {address}")
        else:
            port = f" tcp dport {dest.port}" if dest.port is not None else ""
            forward.append(f"{me} ip daddr {dest.network}{port} accept")
    blocked = ", ".join(str(net) for net in BLOCKED_V4)
    forward += [f"{me} ip daddr {{ {blocked} }} reject",
                f'{me} oifname "{LINK_PREFIX}*" reject',
                f"{me} accept"]
    # To the host itself: only what a prerouting rule turned into an allowed loopback
    # destination (or DNS at a resolver on loopback).
    input_rules = [f"{me} ct state established,related accept",
                   f"{me} ct status dnat accept",
                   f"{me} reject"]
    return _table(link.table, [
        ("prerouting", "type nat hook prerouting priority -100; policy accept;", pre),
        ("input_filter", "type filter hook input priority 0; policy accept;",
         input_rules),
        ("forward", "type filter hook forward priority 0; policy accept;", forward),
        # Loopback servers see the unit as 127.0.0.1 (as a local client), and traffic
        # leaving the host carries the host's address.
        ("input_nat", "type nat hook input priority 100; policy accept;",
         [f"{me} ip daddr 127.0.0.0/8 snat ip to 127.0.0.1"]),
        ("postrouting", "type nat hook postrouting priority 100; policy accept;",
         [f'ip saddr {link.unit_address} oifname != "{link.name}" masquerade']),
    ])


def unit_ruleset(link: UnitLink) -> str:
    """The unit's own table: loopback below :data:`UNIT_PORTS_FROM` is the host's."""
    return _table("spate_unit", [
        ("output", "type nat hook output priority -100; policy accept;",
         [f"ip daddr 127.0.0.0/8 tcp dport 1-{UNIT_PORTS_FROM - 1} "
          f"dnat to {link.host_address}"]),
        ("postrouting", "type nat hook postrouting priority 100; policy accept;",
         ['oifname "eth0" masquerade']),
    ], family="ip")


def _table(name: str, chains: Sequence[tuple[str, str, Sequence[str]]],
           family: str = "inet") -> str:
    lines = [f"table {family} {name} {{"]
    for chain, head, body in chains:
        lines.append(f"  chain {chain} {{")
        lines.append(f"    {head}")
        lines.extend(f"    {rule}" for rule in body)
        lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def remove_link(name: str) -> None:
    """Remove a unit's namespace, link and host table (what exists of them)."""
    table = f"spate_{name}"
    subprocess.run([NFT, "delete", "table", "inet", table], capture_output=True,
                   timeout=_COMMAND_TIMEOUT_S, check=False)
    subprocess.run([IP, "link", "del", name], capture_output=True,
                   timeout=_COMMAND_TIMEOUT_S, check=False)
    subprocess.run([IP, "netns", "del", f"spate-{name}"], capture_output=True,
                   timeout=_COMMAND_TIMEOUT_S, check=False)


def resolv_conf(link: UnitLink) -> str:
    """The unit's ``/etc/resolv.conf``: its link's host end answers DNS."""
    return f"nameserver {link.host_address}\noptions edns0\n"


def sweep_idle_links(min_age_s: float = 120.0) -> list[str]:
    """Remove units' networks that no process uses any more and that are older than
    ``min_age_s`` (a unit being built has none yet): what a killed server left."""
    removed: list[str] = []
    try:
        entries = list(NETNS_DIR.glob(f"spate-{LINK_PREFIX}*"))
    except OSError:
        return removed
    now = time.time()
    for entry in entries:
        try:
            if now - entry.stat().st_mtime < min_age_s:
                continue
            pids = subprocess.run([IP, "netns", "pids", entry.name], capture_output=True,
                                  text=True, timeout=_COMMAND_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if pids.returncode == 0 and not pids.stdout.strip():
            name = entry.name.removeprefix("spate-")
            remove_link(name)
            removed.append(name)
    return removed


def enter_command(link: UnitLink) -> list[str]:
    """A command prefix that runs the rest of the line in the unit's namespace."""
    return [NSENTER, f"--net={link.netns_path}", "--"]


def _used_addresses() -> set[ipaddress.IPv4Address]:
    done = _run(IP, "-4", "-o", "addr", "show")
    used: set[ipaddress.IPv4Address] = set()
    for line in done.splitlines():
        parts = line.split()
        if "inet" in parts:
            used.add(ipaddress.IPv4Interface(parts[parts.index("inet") + 1]).ip)
    return used


def _sysctl_host(key: str, value: str) -> None:
    try:
        Path("/proc/sys", key).write_text(value)
    except OSError as error:
        raise UnitNetworkError(f"cannot set {key.replace('/', '.')}: {error}") from error


def _run(*argv: str, stdin: str | None = None) -> str:
    try:
        done = subprocess.run(list(argv), input=stdin, capture_output=True, text=True,
                              timeout=_COMMAND_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise UnitNetworkError(f"{argv[0]} failed: {error}") from error
    if done.returncode != 0:
        detail = " ".join((done.stderr or done.stdout).split()) or str(done.returncode)
        raise UnitNetworkError(f"{' '.join(argv[:4])}: {detail}")
    return done.stdout


@contextmanager
def _host_lock() -> Iterator[None]:
    LOCK_FILE.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)
