"""The egress policy: which destinations a tenant's connectors may reach."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from spate.engine.connectors.core.egress import (
    AllowRule,
    EgressDeniedError,
    EgressPolicy,
    Endpoint,
    literal_address,
)

PUBLIC = "93.184.216.34"


def resolver(table: dict[str, list[str]]):
    def resolve(host: str, port: int) -> list:
        if host in table:
            return [ipaddress.ip_address(a) for a in table[host]]
        address = literal_address(host)
        if address is None:
            raise socket.gaierror("no such name")
        return [address]
    return resolve


@pytest.mark.parametrize("host", [
    "127.0.0.1", "127.1", "0x7f000001", "2130706433", "017700000001", "127.255.255.254",
    "::1", "[::1]", "::ffff:127.0.0.1", "::ffff:7f00:1", "::127.0.0.1", "0.0.0.0", "::",
    "169.254.169.254", "fe80::1", "10.0.0.5", "172.16.3.4", "192.168.1.1", "100.64.0.1",
    "fd00::1", "2002:7f00:1::", "64:ff9b::a9fe:a9fe", "224.0.0.1", "240.0.0.1",
    "255.255.255.255",
])
def test_non_public_addresses_are_refused_in_every_spelling(host: str) -> None:
    policy = EgressPolicy(resolver=resolver({}))
    with pytest.raises(EgressDeniedError):
        policy.resolve(host, 5432)
    with pytest.raises(EgressDeniedError):
        policy.check_literal(host, 5432)


@pytest.mark.parametrize("name", ["localhost", "LOCALHOST.", "ip6-localhost"])
def test_local_names_are_refused_at_planning(name: str) -> None:
    with pytest.raises(EgressDeniedError):
        EgressPolicy().check_literal(name, 6379)


def test_a_public_address_passes_and_is_what_the_connector_connects_to() -> None:
    policy = EgressPolicy(resolver=resolver({"db.example.com": [PUBLIC]}))
    assert policy.resolve("db.example.com", 5432) == [PUBLIC]
    policy.check_literal("db.example.com", 5432)  # names wait for the connect-time check


def test_a_name_resolving_to_loopback_is_refused_when_connecting() -> None:
    policy = EgressPolicy(resolver=resolver({"sneaky.example.com": ["127.0.0.1"]}))
    policy.check_literal("sneaky.example.com", 5432)  # not an address: passes planning
    with pytest.raises(EgressDeniedError):
        policy.resolve("sneaky.example.com", 5432)


def test_one_private_address_among_public_ones_refuses_the_name() -> None:
    policy = EgressPolicy(resolver=resolver({"mixed.example.com": [PUBLIC, "10.1.1.1"]}))
    with pytest.raises(EgressDeniedError):
        policy.resolve("mixed.example.com", 5432)


def test_refusals_and_unknown_names_read_the_same() -> None:
    policy = EgressPolicy(resolver=resolver({"private.example.com": ["10.0.0.1"]}))
    messages = []
    for host in ("private.example.com", "missing.example.com"):
        with pytest.raises(EgressDeniedError) as caught:
            policy.resolve(host, 5432)
        messages.append(str(caught.value).replace(host, "HOST"))
    assert messages[0] == messages[1]


def test_the_operator_allow_list_admits_networks_and_ports() -> None:
    policy = EgressPolicy.from_config(["10.0.0.0/8", "127.0.0.1:6379"], ())
    policy = EgressPolicy(policy.allow, resolver=resolver({}))
    assert policy.resolve("10.2.3.4", 9092) == ["10.2.3.4"]
    assert policy.resolve("127.0.0.1", 6379) == ["127.0.0.1"]
    with pytest.raises(EgressDeniedError):
        policy.resolve("127.0.0.1", 5432)  # another port of an allowed host
    with pytest.raises(EgressDeniedError):
        policy.resolve("192.168.0.1", 6379)


def test_an_allowed_host_name_admits_what_it_resolves_to() -> None:
    allow = EgressPolicy.from_config(["db.internal:5432"], ()).allow
    policy = EgressPolicy(allow, resolver=resolver({"db.internal": ["10.9.9.9"]}))
    assert policy.resolve("db.internal", 5432) == ["10.9.9.9"]
    with pytest.raises(EgressDeniedError):
        policy.resolve("10.9.9.9", 5432)  # the address itself is not allow-listed


def test_the_control_plane_is_refused_even_when_allow_listed() -> None:
    control = (Endpoint("127.0.0.1", 5432, "spate"), Endpoint("127.0.0.1", 6379, "0"))
    policy = EgressPolicy(EgressPolicy.from_config(["127.0.0.0/8"], ()).allow, control,
                          resolver=resolver({"localhost": ["127.0.0.1", "::1"]}))
    for host in ("127.0.0.1", "127.0.0.2", "localhost"):
        with pytest.raises(EgressDeniedError):
            policy.resolve(host, 5432, "spate")
        with pytest.raises(EgressDeniedError):
            policy.resolve(host, 6379, "0")
        with pytest.raises(EgressDeniedError):
            policy.resolve(host, 5432, None)  # a database we cannot tell: refused
    # Another database on the same allowed server is the tenant's own.
    assert policy.resolve("127.0.0.1", 5432, "tenant_db") == ["127.0.0.1"]
    assert policy.resolve("127.0.0.1", 6379, "3") == ["127.0.0.1"]


def test_policies_travel_as_plain_values() -> None:
    policy = EgressPolicy.from_config(["10.0.0.0/8", "db.internal:5432", "[fd00::1]:6379"],
                                      [Endpoint("db", 5432, "spate")])
    assert EgressPolicy.from_dict(policy.to_dict()) == policy


@pytest.mark.parametrize("entry", ["", "not a host!", "10.0.0.1:99999", "a/b/c"])
def test_bad_allow_list_entries_are_refused(entry: str) -> None:
    with pytest.raises(ValueError):
        AllowRule.parse(entry)
