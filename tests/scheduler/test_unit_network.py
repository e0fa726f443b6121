"""A compute unit's network, tried from inside a real unit: the host's rules decide
what a process in it reaches, whatever it connects with.

Listeners the test owns on the host's loopback play servers: one the policy
allows (the control: it must be reached), others it does not. Needs a host that
can sandbox (root, bubblewrap, cgroups, nftables), as CI is.
"""

from __future__ import annotations

import ipaddress
import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from spate.engine.connectors.core.egress import EgressPolicy, Endpoint
from spate.scheduler.sandbox.cgroups import Limits, find_cgroups
from spate.scheduler.sandbox.network import (
    NETNS_DIR,
    UNIT_PORTS_FROM,
    NetworkRules,
    UnitLink,
    UnitNetwork,
    host_ruleset,
    sweep_idle_links,
)
from spate.scheduler.sandbox.unit import (
    ComputeUnit,
    TenantUser,
    UnitFolders,
    release,
    sandbox_problem,
)
from tests.security.canary import Listener

PROBLEM = sandbox_problem()
pytestmark = [pytest.mark.e2e,
              pytest.mark.skipif(PROBLEM is not None, reason=f"cannot sandbox here: {PROBLEM}")]

#: Connects to each (host, port) and says what happened; run inside the unit.
PROBE = r"""
import json, socket, sys
results = {}
for host, port in json.loads(sys.argv[1]):
    try:
        with socket.create_connection((host, port), timeout=3) as sock:
            sock.sendall(b"hello")
            results[f"{host}:{port}"] = "connected"
    except OSError as error:
        results[f"{host}:{port}"] = type(error).__name__
print(json.dumps(results))
"""


@pytest.fixture
def listeners() -> Iterator[dict[str, Listener]]:
    made = {name: Listener() for name in ("allowed", "refused", "control_plane")}
    yield made
    for each in made.values():
        each.close()


def _unit(tmp_path: Path, network: UnitNetwork, name: str) -> ComputeUnit:
    folders = UnitFolders(tmp_path / name / "job", (), tmp_path / name / "identity")
    unit = ComputeUnit(f"test-{name}-{tmp_path.name}", TenantUser(2_900_001, "spate-t1"),
                       folders, Limits(cpu_cores=1, memory_bytes=256 * 1024 * 1024),
                       find_cgroups(), network)
    unit.prepare()
    return unit


def _probe(unit: ComputeUnit, targets: list[tuple[str, int]]) -> dict[str, str]:
    argv, env = unit.command([sys.executable, "-c", PROBE, json.dumps(targets)], {})
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    answer: dict[str, str] = json.loads(done.stdout)
    return answer


def test_the_network_admits_what_the_policy_allows_and_nothing_else(
        tmp_path: Path, listeners: dict[str, Listener]) -> None:
    allowed, refused, control = (listeners[n] for n in ("allowed", "refused", "control_plane"))
    policy = EgressPolicy.from_config(
        [f"127.0.0.1:{allowed.port}", f"127.0.0.1:{control.port}"],
        [Endpoint("127.0.0.1", control.port, None)])
    unit = _unit(tmp_path, UnitNetwork(NetworkRules.from_policy(policy)), "policy")
    try:
        assert unit.link is not None and (NETNS_DIR / unit.link.netns).exists()
        spellings = ["127.0.0.1", "127.1", "127.0.0.2", "localhost", "0x7f000001",
                     "2130706433", "0.0.0.0"]
        found = _probe(unit, [("127.0.0.1", allowed.port)]
                       + [(host, refused.port) for host in spellings]
                       + [("127.0.0.1", control.port), (str(unit.link.host_address), 22),
                          ("::1", refused.port), ("::ffff:127.0.0.1", refused.port)])
    finally:
        unit.remove()
    assert found.pop(f"127.0.0.1:{allowed.port}") == "connected"
    assert allowed.accepted == 1, "the control: an allowed port is reached"
    assert all(result != "connected" for result in found.values()), found
    assert refused.accepted == 0 and control.accepted == 0
    assert unit.link is not None and not (NETNS_DIR / unit.link.netns).exists()


def test_units_do_not_reach_each_other_and_their_own_loopback_is_theirs(
        tmp_path: Path) -> None:
    network = UnitNetwork(NetworkRules.from_policy(EgressPolicy.from_config(["127.0.0.1"], [])))
    first, second = _unit(tmp_path, network, "first"), _unit(tmp_path, network, "second")
    try:
        assert first.link is not None and second.link is not None
        assert first.link.subnet != second.link.subnet
        # A server in the first unit, on the unit's own loopback range.
        port = UNIT_PORTS_FROM + 7
        argv, env = first.command([sys.executable, "-c", (
            f"import socket; s=socket.create_server(('0.0.0.0', {port})); "
            "print('up', flush=True); c,_=s.accept(); c.sendall(b'own'); c.close()")], {})
        server = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
        try:
            assert server.stdout is not None and server.stdout.readline().strip() == "up"
            from_second = _probe(second, [(str(first.link.unit_address), port)])
            own = _probe(first, [("127.0.0.1", port)])
        finally:
            server.kill()
            server.wait()
    finally:
        first.remove()
        second.remove()
    assert from_second == {f"{first.link.unit_address}:{port}": "ConnectionRefusedError"}
    assert own == {f"127.0.0.1:{port}": "connected"}


def test_dns_goes_to_the_hosts_resolver_only(tmp_path: Path) -> None:
    """The unit's resolv.conf names its link's host end, which forwards port 53 to the
    resolver (here one of the test's, on loopback) and to nothing else."""
    resolver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        resolver.bind(("127.0.0.1", 53))
    except OSError as error:
        resolver.close()
        pytest.fail(f"port 53 on loopback is taken ({error}): the test needs it free")
    resolver.settimeout(20)
    rules = NetworkRules(allow=(), refuse=(), resolver=ipaddress.IPv4Address("127.0.0.1"))
    unit = _unit(tmp_path, UnitNetwork(rules), "dns")
    try:
        resolv = (unit.folders.identity_dir / "resolv.conf").read_text()
        assert unit.link is not None and f"nameserver {unit.link.host_address}" in resolv
        code = ("import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
                "s.settimeout(10); s.sendto(b'query', (open('/etc/resolv.conf').read()"
                ".split()[1], 53)); print(s.recvfrom(100)[0].decode())")
        argv, env = unit.command([sys.executable, "-c", code], {})
        child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, text=True)
        query, sender = resolver.recvfrom(100)
        resolver.sendto(b"answer", sender)
        out, _ = child.communicate(timeout=30)
    finally:
        resolver.close()
        unit.remove()
    assert query == b"query" and out.strip() == "answer"


def test_release_by_handle_removes_the_network(tmp_path: Path) -> None:
    unit = _unit(tmp_path, UnitNetwork(NetworkRules(allow=(), refuse=(), resolver=None)),
                 "release")
    handle = unit.handle()
    assert handle["link"] and (NETNS_DIR / f"spate-{handle['link']}").exists()
    release(handle)
    assert not (NETNS_DIR / f"spate-{handle['link']}").exists()
    tables = subprocess.run(["nft", "list", "tables"], capture_output=True, text=True,
                            check=True).stdout
    assert handle["link"] not in tables


def test_rules_from_the_policy() -> None:
    policy = EgressPolicy.from_config(
        ["10.1.0.0/16", "127.0.0.1:5432", "[::ffff:10.9.9.9]:80", "localhost:4222"],
        [Endpoint("127.0.0.1", 6379, "0"), Endpoint("10.2.2.2", 5432, None)])
    rules = NetworkRules.from_policy(policy, platform=[("127.0.0.1", 5433)])
    shown = {(str(d.network), d.port) for d in rules.allow}
    assert shown == {("10.1.0.0/16", None), ("127.0.0.1/32", 5432), ("10.9.9.9/32", 80),
                     ("127.0.0.1/32", 4222), ("127.0.0.1/32", 5433)}
    # Only a control-plane server no tenant shares (no database named) is refused outright.
    assert [(str(d.network), d.port) for d in rules.refuse] == [("10.2.2.2/32", 5432)]
    link = UnitLink("spxrender", ipaddress.IPv4Network("100.127.255.0/30"))
    text = host_ruleset(link, rules)
    assert "ip daddr 10.2.2.2/32 tcp dport 5432 reject" in text
    assert text.index("10.2.2.2/32 tcp dport 5432 reject") < text.index("10.1.0.0/16 accept")
    checked = subprocess.run(["nft", "-c", "-f", "-"], input=text, capture_output=True,
                             text=True, check=False)
    assert checked.returncode == 0, checked.stderr



def test_the_sweep_removes_only_networks_nothing_runs_in(tmp_path: Path) -> None:
    network = UnitNetwork(NetworkRules(allow=(), refuse=(), resolver=None))
    idle, busy = _unit(tmp_path, network, "idle"), _unit(tmp_path, network, "busy")
    assert idle.link is not None and busy.link is not None
    argv, env = busy.command([sys.executable, "-c", "import time; time.sleep(60)"], {})
    sleeper = subprocess.Popen(argv, env=env)
    try:
        time.sleep(1)  # the sleeper is in the namespace
        assert idle.link.name not in sweep_idle_links(min_age_s=3600), "too young to sweep"
        removed = sweep_idle_links(min_age_s=0)
        assert idle.link.name in removed and busy.link.name not in removed
        assert not (NETNS_DIR / idle.link.netns).exists()
        assert (NETNS_DIR / busy.link.netns).exists()
    finally:
        sleeper.kill()
        sleeper.wait()
        idle.remove()
        busy.remove()
