"""Helpers the API tests share: tenants made over HTTP, SQL texts, the error shape."""

from __future__ import annotations

import secrets
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # starlette's notice about httpx versus httpx2
    from fastapi.testclient import TestClient

PLATFORM_KEY = "pk-" + secrets.token_urlsafe(32)
ROLES = ("admin", "developer", "viewer")
BACKENDS = ("sqlite", "postgresql")
#: The keep-alive of the API servers tests run in a thread and poll on one connection.
#: uvicorn closes a connection idle for its default 5 s, and a loaded machine can stall
#: the test process that long between two requests: the next one would meet a closed
#: connection.
KEEP_ALIVE_S = 600
#: Rate limits high enough that functional tests never meet them (they still go to Redis).
UNLIMITED = {"rate_limit_per_minute": 1_000_000, "rate_limit_burst": 100_000,
             "auth_failures_per_minute": 100_000}

QUICKSTART_SQL = (Path(__file__).parents[2] / "examples" / "quickstart.sql").read_text()


def pipeline_sql(marker: str = "x") -> str:
    """A small valid pipeline; ``marker`` lands in a comment, to tell texts apart."""
    return (f"-- {marker}\nCREATE TABLE src WITH (connector = 'impulse', event_rate = '10', "
            "message_count = '5');\nCREATE TABLE out WITH (connector = 'blackhole');\n"
            "INSERT INTO out SELECT counter FROM src;\n")


@dataclass
class TenantKeys:
    """A tenant made through the API, with one key per role."""

    id: str
    name: str
    keys: dict[str, str] = field(default_factory=dict)
    key_ids: dict[str, str] = field(default_factory=dict)

    def auth(self, role: str = "admin") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[role]}"}


def storage_root(client: TestClient, tenant_id: str) -> Path:
    """Where the tenant's file paths resolve in the app ``client`` talks to (created)."""
    root: Path = client.app.state.spate.tenants.space(tenant_id).storage_root  # type: ignore[attr-defined]
    root.mkdir(parents=True, exist_ok=True)
    return root


def platform_auth() -> dict[str, str]:
    return {"Authorization": f"Bearer {PLATFORM_KEY}"}


def new_tenant(client: TestClient) -> TenantKeys:
    """A fresh tenant with an admin, a developer and a viewer key."""
    response = client.post("/api/v1/tenants", headers=platform_auth(),
                           json={"name": f"t-{secrets.token_hex(5)}"})
    assert response.status_code == 201, response.text
    body = response.json()
    tenant = TenantKeys(id=body["tenant"]["id"], name=body["tenant"]["name"])
    tenant.keys["admin"] = body["admin_key"]["key"]
    tenant.key_ids["admin"] = body["admin_key"]["id"]
    for role in ("developer", "viewer"):
        created = client.post("/api/v1/api-keys", headers=tenant.auth(),
                              json={"name": f"{role} key", "role": role})
        assert created.status_code == 201, created.text
        tenant.keys[role] = created.json()["key"]
        tenant.key_ids[role] = created.json()["id"]
    return tenant


def error_of(response: Any) -> dict[str, Any]:
    """The error object of a response, checking it has the one error shape."""
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "details"}, body
    assert isinstance(body["error"]["code"], str) and body["error"]["message"]
    assert isinstance(body["error"]["details"], list)
    return dict(body["error"])
