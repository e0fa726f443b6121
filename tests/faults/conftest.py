"""Fixtures of the fault suite: private PostgreSQL clusters (control plane, state) and a
private Redis (the Celery broker) that scenarios may stop, a small volume holding
tenant ``a``'s storage, and one ``spate serve`` on them with two tenants whose
pipelines run for the whole suite (:mod:`tests.faults.deployment`).

The server, its dependencies and the tenants' warm applications are started once
for the suite. A scenario starts when every pipeline runs and nothing is
orphaned; one whose fault is not survived (a pipeline left failed) is followed
by the operator's remedy, a restart with state, so that the next one starts
healthy; each scenario ends checking every entry so far in every sink, exactly once.

The suite needs root: the sandbox, the ``postgres`` OS user for PostgreSQL and a
tmpfs mount. Without the sandbox ``spate serve`` has a single tenant and no
memory or storage limits, so the suite is skipped as a whole, with the reason.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import time
from collections.abc import Generator, Iterator
from pathlib import Path

import httpx
import pytest

from spate.scheduler.backends import process
from spate.scheduler.sandbox.cgroups import CgroupError, find_cgroups
from spate.scheduler.sandbox.unit import sandbox_problem
from tests.faults.deployment import (
    APPLICATION_MEMORY_MB,
    COPY,
    PLATFORM_KEY,
    Feed,
    Spate,
    Tenant,
)
from tests.faults.figures import figures_table
from tests.faults.servers import (
    PrivatePostgres,
    PrivateRedis,
    Servers,
    SmallVolume,
    initialise_all,
)
from tests.ports import free_port

PROBLEM = sandbox_problem()
#: Entries a second into every tenant's stream.
FEED_RATE_PER_S = 20.0
#: Size of tenant ``a``'s storage volume.
VOLUME_MB = 32


#: The suite's servers and deployment, closed once its last test is over (see
#: :func:`pytest_runtest_teardown`): this folder is no package, so a "package" fixture
#: would live to the end of the session, its pipelines running beside every later test.
_SUITE = contextlib.ExitStack()
_FOLDER = Path(__file__).resolve().parent


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None
                            ) -> Generator[None, None, None]:
    """After the last test of the suite has torn down its own fixtures, close the suite."""
    del item
    try:
        yield
    finally:
        if nextitem is None or _FOLDER not in nextitem.path.parents:
            _SUITE.close()


def pytest_sessionfinish(session: pytest.Session) -> None:
    del session
    _SUITE.close()


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Servers:
    if PROBLEM is not None:
        pytest.skip(f"the fault suite runs sandboxed tenants, which this host cannot: "
                    f"{PROBLEM}")
    return _SUITE.enter_context(_servers(tmp_path_factory))


@pytest.fixture(scope="session")
def spate(tmp_path_factory: pytest.TempPathFactory, servers: Servers, redis_url: str,
          redis_prefix: str) -> Spate:
    """The server with tenants ``a`` and ``b``, each running :data:`COPY` over a stream
    fed for the whole suite; tenant ``a``'s storage is the small volume."""
    return _SUITE.enter_context(_deployment(tmp_path_factory, servers, redis_url,
                                            redis_prefix))


@contextlib.contextmanager
def _servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    folder = tmp_path_factory.mktemp("faults-servers")
    control = PrivatePostgres("control", free_port())
    state = PrivatePostgres("state", free_port())
    broker = PrivateRedis(free_port(), folder)
    try:
        initialise_all([control, state])
        broker.start()
        yield Servers(control, state, broker)
    finally:
        broker.stop()
        for cluster in (control, state):
            cluster.remove()


@contextlib.contextmanager
def _deployment(tmp_path_factory: pytest.TempPathFactory, servers: Servers, redis_url: str,
                redis_prefix: str) -> Iterator[Spate]:
    base = tmp_path_factory.mktemp("faults")
    deployment = Spate(base, _settings(base, servers, redis_url), redis_url)
    try:
        serve = deployment.start_serve()
        a_id = serve.http.get("/me").json()["tenant_id"]
        b_created = httpx.post(f"{deployment.url}/tenants", json={"name": "neighbour"},
                               headers={"Authorization": f"Bearer {PLATFORM_KEY}"}, timeout=30)
        assert b_created.status_code == 201, b_created.text
        storage = base / "storage"
        a = Tenant("a", a_id, serve.admin_key, f"{redis_prefix}faults-a", storage / a_id)
        b_id = b_created.json()["tenant"]["id"]
        b = Tenant("b", b_id, b_created.json()["admin_key"]["key"], f"{redis_prefix}faults-b",
                   storage / b_id)
        deployment.volume = SmallVolume(a.storage, VOLUME_MB)
        deployment.volume.mount()
        deployment.tenants = {"a": a, "b": b}
        deployment.feed = Feed(redis_url, [a.stream, b.stream], FEED_RATE_PER_S)
        deployment.feed.start()
        for tenant in (a, b):
            deployment.create_pipeline(tenant, COPY, deployment.copy_sql(tenant))
        for tenant in (a, b):
            deployment.running_job(tenant, timeout_s=180)
            deployment.fresh_output(tenant, 0, "the first rows", timeout_s=120)
        # Every scenario ends checking each tenant's output exactly once, from entry 0.
        yield deployment
    finally:
        if deployment.feed is not None:
            deployment.feed.stop()
        print("\n[faults] recovery figures\n" + figures_table())
        try:
            _stop(deployment)
        finally:
            if deployment.volume is not None:
                deployment.volume.unmount()


@pytest.fixture(autouse=True)
def healthy(spate: Spate) -> Iterator[Spate]:
    """A scenario starts with every tenant's pipeline running and nothing orphaned; one
    that leaves a pipeline failed (a fault not survived) has it repaired afterwards, so
    the next scenario starts healthy."""
    for tenant in spate.tenants.values():
        spate.running_job(tenant)
    spate.assert_no_orphans()
    yield spate
    started = time.monotonic()
    repaired = spate.restore()
    for what in repaired:
        print(f"[faults] repaired after the scenario (a restart with state, running again "
              f"{time.monotonic() - started:.1f} s later): {what}")


def _settings(base: Path, servers: Servers, redis_url: str) -> dict[str, str]:
    tenant_redis = redis_url.split("://", 1)[1].split("/", 1)[0]
    return {
        "SPATE_DATABASE_URL": servers.control.create_database("spate"),
        "SPATE_STATE_URL": servers.state.create_database("state"),
        "SPATE_BROKER_URL": servers.broker.url,
        "SPATE_REDIS_URL": servers.broker.url,
        "SPATE_DATA_DIR": str(base / "data"),
        "SPATE_TENANT_STORAGE": str(base / "storage"),
        "SPATE_PLATFORM_ADMIN_KEY": PLATFORM_KEY,
        # Tenants' OS users of their own: other tests' servers on this machine number
        # their tenants from 1 too.
        "SPATE_SANDBOX_UID_BASE": str(3_000_000 + secrets.randbelow(1000) * 1000),
        # The tenants' streams are on the machine's Redis, which plays their own server.
        "SPATE_EGRESS_ALLOW": tenant_redis,
        "SPATE_RECONCILE_INTERVAL_S": "1",
        "SPATE_RESTART_BUDGET": "10",
        "SPATE_RESTART_BACKOFF_S": "1",
        "SPATE_RESTART_BACKOFF_MAX_S": "4",
        # The default: a tenant's application started cold on a loaded machine took 37 s
        # to run its first job, and a job placed in it is silent until then.
        "SPATE_HEARTBEAT_TIMEOUT_S": "60",
        "SPATE_STOP_TIMEOUT_S": "20",
        "SPATE_IDLE_STOP_S": "0",
        "SPATE_EPOCH_MAX_DELAY_MS": "1000",
        "SPATE_APPLICATION_MEMORY_MB": str(APPLICATION_MEMORY_MB),
        # Limits stay on (the limiter uses Redis), high enough for the scenarios' polling.
        "SPATE_RATE_LIMIT_PER_MINUTE": "100000",
        "SPATE_RATE_LIMIT_BURST": "10000",
    }


def _stop(deployment: Spate) -> None:
    """Stop the server; every tenant application must go with it (also those a killed
    server started), and whatever outlived it is killed."""
    status = None
    leftovers: list[str] = []
    if deployment.serve is not None and deployment.serve.process.poll() is None:
        status = deployment.serve.stop()
        leftovers = deployment.serve.leftovers
    root = deployment.data_dir / "applications"
    for path in root.glob("*.json") if root.is_dir() else []:
        try:
            application = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if process.is_alive(application):
            leftovers.append(f"the application of tenant {path.stem}")
            process.kill(application)
        _remove_groups(application)
    assert status in (0, None), deployment.log()
    assert leftovers == [], f"stopping spate serve left processes running: {leftovers}"


def _remove_groups(application: dict[str, object]) -> None:
    """Remove the control groups of a stopped application: the meter removes them only
    when it reads the dead unit, which a stopping server no longer does."""
    unit = application.get("unit")
    if isinstance(unit, dict) and unit.get("name"):
        with contextlib.suppress(CgroupError, OSError):
            find_cgroups().job(str(unit["name"])).remove()
