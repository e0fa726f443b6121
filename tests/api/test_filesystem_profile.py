"""A filesystem (S3) connection profile through the API, tested against moto's S3 server.

The tenant saves the bucket's keys in a profile (the secret write-only), presses
*Test*, and the answer lists the prefix with those keys, or names the address it
could not reach, never the secret.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import FastAPI

from tests.api.support import TenantKeys, TestClient, new_tenant
from tests.engine.connectors.filesystem.s3_support import S3Server, serve_s3

pytestmark = pytest.mark.e2e

PROFILES = "/api/v1/connection-profiles"


@pytest.fixture(scope="module")
def s3_server() -> Iterator[S3Server]:
    yield from serve_s3()


@pytest.fixture
def client(make_app: Callable[..., FastAPI]) -> Iterator[TestClient]:
    app = make_app("sqlite", egress_allow="127.0.0.1")
    with TestClient(app, raise_server_exceptions=False) as test_client:
        yield test_client


def _profile_test(client: TestClient, tenant: TenantKeys, config: dict[str, str],
                  secret: dict[str, str]) -> dict[str, Any]:
    name = f"files-{secrets.token_hex(3)}"
    created = client.post(PROFILES, headers=tenant.auth("developer"), json={
        "name": name, "connector": "filesystem", "config": config, "secrets": secret})
    assert created.status_code == 201, created.text
    checked = client.post(f"{PROFILES}/{name}/test", headers=tenant.auth("developer"))
    assert checked.status_code == 200, checked.text
    for value in secret.values():
        assert value not in created.text and value not in checked.text
    return dict(checked.json())


def test_an_s3_profile_lists_its_prefix_and_an_unreachable_one_is_named(
        client: TestClient, s3_server: S3Server) -> None:
    tenant = new_tenant(client)
    bucket = s3_server.create_bucket()
    s3_server.client().put_object(Bucket=bucket, Key="in/a.json", Body=b"{}\n")
    config = s3_server.options(f"s3://{bucket}/in")
    secret = {"aws_secret_access_key": config.pop("aws_secret_access_key")}
    answer = _profile_test(client, tenant, config, secret)
    assert answer["ok"] is True, answer
    assert f"s3://{bucket}/in" in answer["message"] and "1 object" in answer["message"]

    unreachable = dict(config, endpoint_url="http://127.0.0.1:1")
    answer = _profile_test(client, tenant, unreachable, secret)
    assert answer["ok"] is False
    assert "127.0.0.1:1" in answer["message"], answer
