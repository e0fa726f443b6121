"""A connection profile per message broker, through the API, tested against the real server.

What a tenant does in the console or with ``POST /connection-profiles``: save a
profile for its system (credentials as write-only secrets), press *Test*, and
get an answer from the system itself — or a message naming the address it
could not reach, without the secret. The deployment's egress policy allows
loopback here, except the control plane's own Redis, which stays refused.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI

from tests.api.support import TenantKeys, TestClient, new_tenant
from tests.engine.connectors.kafka.kafka_broker import Broker, kafka_broker
from tests.engine.connectors.kinesis.kinesis_support import KinesisServer, serve_kinesis

pytestmark = pytest.mark.e2e

__all__ = ["kafka_broker"]  # the session's broker fixture, used here

PROFILES = "/api/v1/connection-profiles"
#: A password the servers here do not check; it must never come back.
PASSWORD = f"pw-{secrets.token_hex(6)}"


@pytest.fixture(scope="module")
def kinesis_server() -> Iterator[KinesisServer]:
    yield from serve_kinesis()


@pytest.fixture
def client(make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    app = make_app("sqlite", egress_allow="127.0.0.1")
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


@pytest.fixture
def tenant(client: TestClient) -> TenantKeys:
    return new_tenant(client)


def _profile_test(client: TestClient, tenant: TenantKeys, connector: str,
                  config: dict[str, str], secret: dict[str, str]) -> dict[str, Any]:
    """Create a profile and run its check; the check's answer."""
    name = f"{connector}-{secrets.token_hex(3)}"
    created = client.post(PROFILES, headers=tenant.auth("developer"), json={
        "name": name, "connector": connector, "config": config, "secrets": secret})
    assert created.status_code == 201, created.text
    assert PASSWORD not in created.text
    checked = client.post(f"{PROFILES}/{name}/test", headers=tenant.auth("developer"))
    assert checked.status_code == 200, checked.text
    assert PASSWORD not in checked.text
    return dict(checked.json())


def _systems(kafka: Broker, kinesis: KinesisServer) -> dict[str, tuple[dict[str, str],
                                                                      dict[str, str], str]]:
    """Per connector: a profile's options, its secrets, and what a good check says."""
    kinesis_options = kinesis.options(kinesis.create_stream(shards=1))
    kinesis_secret = {"aws_secret_access_key": kinesis_options.pop("aws_secret_access_key")}
    return {
        "kafka": ({"bootstrap_servers": kafka.address}, {}, kafka.address),
        "mqtt": ({"url": "tcp://127.0.0.1:1883", "username": "spate"},
                 {"password": PASSWORD}, "connected to the MQTT broker 127.0.0.1:1883"),
        "nats": ({"servers": "nats://127.0.0.1:4222"}, {}, "reached NATS server"),
        "rabbitmq": ({"host": "127.0.0.1", "mode": "queue", "username": "guest"},
                     {"password": "guest"}, "reached RabbitMQ at 127.0.0.1:5672"),
        "kinesis": (kinesis_options, kinesis_secret, "ACTIVE, 1 open shard"),
    }


def test_every_broker_profile_reaches_its_server(
        client: TestClient, tenant: TenantKeys, kafka_broker: Broker,
        kinesis_server: KinesisServer) -> None:
    for connector, (config, secret, expected) in _systems(kafka_broker,
                                                          kinesis_server).items():
        answer = _profile_test(client, tenant, connector, config, secret)
        assert answer["ok"] is True, (connector, answer)
        assert expected in answer["message"], (connector, answer)


@pytest.mark.parametrize(("connector", "config", "secret"), [
    ("kafka", {"bootstrap_servers": "127.0.0.1:1", "auth.type": "sasl",
               "auth.sasl.username": "me"}, {"auth.sasl.password": PASSWORD}),
    ("mqtt", {"url": "tcp://127.0.0.1:1", "username": "me"}, {"password": PASSWORD}),
    ("nats", {"servers": "nats://127.0.0.1:1", "auth.type": "credentials",
              "auth.username": "me"}, {"auth.password": PASSWORD}),
    ("rabbitmq", {"host": "127.0.0.1", "mode": "queue", "port": "1", "username": "me"},
     {"password": PASSWORD}),
])
def test_an_unreachable_server_is_named_without_the_secret(
        client: TestClient, tenant: TenantKeys, connector: str, config: dict[str, str],
        secret: dict[str, str]) -> None:
    answer = _profile_test(client, tenant, connector, config, secret)
    assert answer["ok"] is False
    assert "127.0.0.1:1" in answer["message"], answer


def test_the_control_planes_redis_is_refused_to_tenants(client: TestClient,
                                                        tenant: TenantKeys) -> None:
    answer = _profile_test(client, tenant, "redis", {"address": "redis://127.0.0.1:6379"},
                           {})
    assert answer["ok"] is False
    assert "egress" in answer["message"], answer
