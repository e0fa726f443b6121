"""The egress canary suite: no tenant connection reaches a port the policy refuses,
whatever its client library does.

A listener on a refused loopback port (the canary) counts every connection.
Tenants point ``/test`` calls and previews at it by every spelling of
loopback, and through allowed servers that try to send them there: an HTTP
decoy that redirects every request to it, a Kafka broker that advertises it
as its own address, a schema-registry list that names it second. After each,
the canary must have counted nothing. The control — a listener on an allowed
port, reached the same way — must count, or the suite proves nothing.
"""

from __future__ import annotations

import secrets
from typing import Any

import httpx
import pytest

from tests.security.conftest import Canaries, Hosted, Tenant

pytestmark = pytest.mark.e2e

AWS = {"aws_region": "us-east-1", "aws_access_key_id": "AKIACANARY"}
AWS_SECRET = {"aws_secret_access_key": "canary-secret"}
#: Every spelling of this machine's loopback a tenant might try (IPv4 and IPv6).
SPELLINGS = ["127.0.0.1", "127.1", "0x7f000001", "2130706433", "017700000001", "localhost",
             "0.0.0.0", "[::1]", "[::ffff:127.0.0.1]", "127.0.0.2"]


def _check(hosted: Hosted, tenant: Tenant, connector: str, config: dict[str, str],
           secret: dict[str, str] | None = None) -> dict[str, Any]:
    """Create a profile and ``/test`` it; the answer (or the refusal at creation)."""
    name = f"canary-{secrets.token_hex(4)}"
    with hosted.http() as http:
        created = http.post("/connection-profiles", headers=tenant.auth("developer"), json={
            "name": name, "connector": connector, "config": config, "secrets": secret or {}})
        if created.status_code == 400:
            return {"ok": False, "refused_at_creation": created.json()["error"]["message"]}
        assert created.status_code == 201, created.text
        checked = http.post(f"/connection-profiles/{name}/test",
                            headers=tenant.auth("developer"))
        assert checked.status_code == 200, checked.text
        answer: dict[str, Any] = checked.json()
        http.delete(f"/connection-profiles/{name}", headers=tenant.auth("developer"))
        return answer


def _untouched(canaries: Canaries, before: int, what: str) -> None:
    # A connection made is counted by the listener's thread a moment later: give it that.
    assert canaries.canary.counted(before + 1, timeout_s=0.5) == before, \
        f"{what} reached the refused port"


def test_the_control_is_reached_from_the_tenants_unit(hosted: Hosted,
                                                      canaries: Canaries) -> None:
    before = canaries.control.accepted
    _check(hosted, hosted.b, "polling_http",
           {"endpoint": f"http://127.0.0.1:{canaries.control.port}/", "format": "json",
            "type": "source"})
    assert canaries.control.counted(before + 1) > before, "an allowed port was not reached: the " \
        "canary's silence would prove nothing"


@pytest.mark.parametrize("host", SPELLINGS)
def test_every_spelling_of_loopback_is_refused(hosted: Hosted, canaries: Canaries,
                                               host: str) -> None:
    before = canaries.canary.accepted
    answer = _check(hosted, hosted.b, "polling_http",
                    {"endpoint": f"http://{host}:{canaries.canary.port}/", "format": "json",
                     "type": "source"})
    assert answer["ok"] is False
    _untouched(canaries, before, f"/test of http://{host}")


#: Connectors with a host option, pointed straight at the canary (by a spelling the
#: planning check does not know as loopback where one exists).
DIRECT = {
    "mqtt": lambda port: {"url": f"tcp://127.1:{port}", "topic": "t", "format": "json",
                          "type": "source"},
    "nats": lambda port: {"servers": f"nats://0x7f000001:{port}", "subject": "s",
                          "format": "json", "type": "source"},
    "rabbitmq": lambda port: {"host": "2130706433", "port": str(port), "mode": "queue",
                              "queue": "q", "format": "json", "type": "source"},
    "redis": lambda port: {"address": f"redis://127.0.0.2:{port}/0", "stream": "s",
                           "format": "json", "type": "source"},
    "kafka": lambda port: {"bootstrap_servers": f"[::ffff:127.0.0.1]:{port}", "topic": "t",
                           "format": "json", "type": "source"},
    "iceberg": lambda port: {"catalog.uri": f"postgresql+psycopg://u@127.1:{port}/db",
                             "catalog.warehouse": "wh", "table_name": "t"},
}


@pytest.mark.parametrize("connector", sorted(DIRECT))
def test_a_host_option_naming_a_refused_port_goes_nowhere(hosted: Hosted, canaries: Canaries,
                                                          connector: str) -> None:
    before = canaries.canary.accepted
    answer = _check(hosted, hosted.b, connector, DIRECT[connector](canaries.canary.port))
    assert answer["ok"] is False
    _untouched(canaries, before, f"/test of {connector}")


#: Connectors with a URL option, pointed at the decoy (which redirects to the canary).
REDIRECTED = {
    "polling_http": lambda c: ({"endpoint": c.decoy.url(c.canary.port), "format": "json",
                                "type": "source"}, {}),
    "sse": lambda c: ({"endpoint": c.decoy.url(c.canary.port), "format": "json",
                       "type": "source"}, {}),
    "websocket": lambda c: ({"endpoint": c.decoy.url(c.canary.port, "ws"), "format": "json",
                             "type": "source"}, {}),
    "webhook": lambda c: ({"endpoint": c.decoy.url(c.canary.port), "format": "json",
                           "type": "sink"}, {}),
    "delta": lambda c: ({"path": "s3://bucket/table", "endpoint_url": c.decoy.url().rstrip("/"),
                         **AWS}, AWS_SECRET),
    "filesystem": lambda c: ({"path": "s3://bucket/prefix", "format": "json", "type": "source",
                              "endpoint_url": c.decoy.url().rstrip("/"), **AWS}, AWS_SECRET),
    "kinesis": lambda c: ({"stream_name": "canary", "format": "json", "type": "source",
                           "endpoint_url": c.decoy.url().rstrip("/"), **AWS}, AWS_SECRET),
}


@pytest.mark.parametrize("connector", sorted(REDIRECTED))
def test_a_redirect_to_a_refused_port_goes_nowhere(hosted: Hosted, canaries: Canaries,
                                                   connector: str) -> None:
    config, secret = REDIRECTED[connector](canaries)
    before = canaries.canary.accepted
    _check(hosted, hosted.b, connector, config, secret)
    _untouched(canaries, before, f"/test of {connector} through the redirecting decoy")


def test_a_broker_advertising_a_refused_port_is_not_followed_there(
        hosted: Hosted, canaries: Canaries) -> None:
    before = canaries.canary.accepted
    _check(hosted, hosted.b, "kafka",
           {"bootstrap_servers": f"127.0.0.1:{canaries.broker_port}", "topic": "canary",
            "format": "json", "type": "source"})
    _untouched(canaries, before, "/test of kafka against a broker advertising it")
    sql = (f"CREATE TABLE k (v TEXT) WITH (connector = 'kafka', bootstrap_servers = "
           f"'127.0.0.1:{canaries.broker_port}', topic = 'canary', format = 'json', "
           "type = 'source', 'source.offset' = 'earliest');\nSELECT v FROM k;")
    _preview(hosted, hosted.b, sql)
    _untouched(canaries, before, "a preview reading a broker advertising it")


def test_every_url_of_a_schema_registry_list_is_checked(hosted: Hosted,
                                                        canaries: Canaries) -> None:
    before = canaries.canary.accepted
    registries = (f"http://127.0.0.1:{canaries.decoy.port},"
                  f"http://127.0.0.1:{canaries.canary.port}")
    answer = _check(hosted, hosted.b, "kafka", {
        "bootstrap_servers": f"127.0.0.1:{canaries.broker_port}", "topic": "canary",
        "format": "avro", "type": "sink", "avro.confluent_schema_registry": "true",
        "schema_registry.endpoint": registries})
    refusal = answer.get("refused_at_creation") or answer["message"]
    assert answer["ok"] is False and "egress policy" in refusal
    assert str(canaries.canary.port) in refusal, "the second URL is the one refused"
    _untouched(canaries, before, "a registry list naming it second")


def test_a_preview_through_the_decoy_goes_nowhere(hosted: Hosted, canaries: Canaries) -> None:
    before = canaries.canary.accepted
    endpoint = canaries.decoy.url().rstrip("/")
    sql = ("CREATE TABLE files (v TEXT) WITH (connector = 'filesystem', path = "
           "'s3://bucket/prefix', format = 'json', type = 'source', aws_region = 'us-east-1', "
           f"aws_access_key_id = 'AKIACANARY', aws_secret_access_key = 'canary-secret', "
           f"endpoint_url = '{endpoint}');\nSELECT v FROM files;")
    _preview(hosted, hosted.b, sql)
    _untouched(canaries, before, "a preview reading S3 through the decoy")


def _preview(hosted: Hosted, tenant: Tenant, sql: str) -> None:
    """Run a preview to its end (rows or an error: what matters is where it connected)."""
    with httpx.Client(base_url=hosted.serve.url + "/api/v1", timeout=300) as http, \
            http.stream("POST", "/pipelines/preview", headers=tenant.auth("developer"),
                        json={"sql": sql, "limit": 1, "timeout_s": 30}) as response:
        if response.status_code == 400:  # refused at planning: it never connected
            return
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("event: end"):
                break
