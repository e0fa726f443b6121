"""A real ``spate serve`` on its default configuration (sandboxed local jobs), with two
tenants, for the hostile-tenant suite.

The control plane runs on PostgreSQL (a throwaway database on the local
server), so the attacks that aim at it have something to hit. The operator
allows a few destinations besides public addresses: the local Redis, which
plays a tenant's own Redis, and the egress canary suite's decoy, control
listener and Kafka broker (:mod:`tests.security.canary`); its canary listener
is on a port nobody allows.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from spate.scheduler.sandbox.unit import sandbox_problem
from tests.api.serving import ServeProcess
from tests.conftest import ThrowawayPostgres
from tests.security.canary import Decoy, Listener, advertising_broker

PLATFORM_KEY = "pk-" + secrets.token_urlsafe(32)
#: The one destination the operator allow-lists: a tenant's "own" Redis.
ALLOWED_REDIS = "127.0.0.1:6379"

PROBLEM = sandbox_problem()


@dataclass
class Tenant:
    """A tenant of the server, with a key per role."""

    id: str
    keys: dict[str, str] = field(default_factory=dict)

    def auth(self, role: str = "admin") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[role]}"}


@dataclass
class Canaries:
    """The canary suite's servers: ``canary`` on a refused port, the rest allowed."""

    canary: Listener
    control: Listener
    decoy: Decoy
    #: a Kafka broker on an allowed port advertising the canary's port as its own
    broker_port: int

    def allowed(self) -> list[str]:
        return [f"127.0.0.1:{port}" for port in
                (self.control.port, self.decoy.port, self.broker_port)]


@pytest.fixture(scope="package")
def canaries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Canaries]:
    canary, control = Listener(), Listener()
    decoy = Decoy(default_port=canary.port)
    try:
        with advertising_broker(canary.port, tmp_path_factory.mktemp("broker")) as broker:
            yield Canaries(canary, control, decoy, broker)
    finally:
        for server in (canary, control, decoy):
            server.close()


@dataclass
class Hosted:
    """The server, its data folder, and tenants ``a`` (the first one) and ``b``."""

    serve: ServeProcess
    data_dir: Path
    a: Tenant
    b: Tenant

    def http(self) -> httpx.Client:
        return httpx.Client(base_url=self.serve.url + "/api/v1", timeout=60)

    def storage_root(self, tenant: Tenant) -> Path:
        root = self.data_dir / "tenants" / tenant.id
        root.mkdir(parents=True, exist_ok=True)
        return root


@pytest.fixture(scope="package")
def hosted(tmp_path_factory: pytest.TempPathFactory,
           throwaway_postgres: ThrowawayPostgres, canaries: Canaries) -> Iterator[Hosted]:
    if PROBLEM is not None:
        pytest.skip(f"this host cannot sandbox jobs: {PROBLEM}")
    workdir = tmp_path_factory.mktemp("serve")
    serve = ServeProcess(workdir, {
        "SPATE_DATABASE_URL": throwaway_postgres.create(),
        "SPATE_DATA_DIR": str(workdir / "data"),
        "SPATE_PLATFORM_ADMIN_KEY": PLATFORM_KEY,
        "SPATE_EGRESS_ALLOW": ",".join([ALLOWED_REDIS, *canaries.allowed()]),
        "SPATE_PLAN_TIMEOUT_S": "2",
        "SPATE_RECONCILE_INTERVAL_S": "1",
    })
    try:
        with httpx.Client(base_url=serve.url + "/api/v1", timeout=60) as http:
            a = Tenant(id=http.get("/me", headers={
                "Authorization": f"Bearer {serve.admin_key}"}).json()["tenant_id"],
                keys={"admin": serve.admin_key})
            created = http.post("/tenants", json={"name": "tenant-b"},
                                headers={"Authorization": f"Bearer {PLATFORM_KEY}"})
            assert created.status_code == 201, created.text
            b = Tenant(id=created.json()["tenant"]["id"],
                       keys={"admin": created.json()["admin_key"]["key"]})
            for tenant in (a, b):
                for role in ("developer", "viewer"):
                    key = http.post("/api-keys", headers=tenant.auth(),
                                    json={"name": role, "role": role})
                    assert key.status_code == 201, key.text
                    tenant.keys[role] = key.json()["key"]
        yield Hosted(serve=serve, data_dir=workdir / "data", a=a, b=b)
    finally:
        status = serve.stop()
        assert status == 0, serve.log()
