"""Faults of the control plane: ``kill -9`` of the API/scheduler process, a restart of
its PostgreSQL database and a restart of Redis, the scheduler's Celery broker.

What must hold each time: the tenants' pipelines are never interrupted (rows
produced while the control plane is down reach the sinks meanwhile), the API
answers 503 in the error shape while its database is down and never 500, the
control plane picks up where it was once back (the same jobs run on; a change
made while the broker was down is carried out), outputs are exactly once and
nothing runs that the control plane does not know of.
"""

from __future__ import annotations

import time

import psutil
import pytest

from tests.faults.api_watch import assert_unavailable, watching
from tests.faults.deployment import Spate, eventually
from tests.faults.figures import record
from tests.faults.processes import alive, application_tree
from tests.faults.servers import Servers

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.xdist_group("faults")]

#: A pipeline that needs nothing but its application: what a tenant creates while the
#: broker is down.
PROBE_SQL = """
CREATE TABLE ticks WITH (connector = 'impulse', event_rate = '1');
CREATE TABLE nowhere WITH (connector = 'blackhole');
INSERT INTO nowhere SELECT counter FROM ticks;
"""
#: How long a dependency stays down (the state store's 30 s is another module's).
OUTAGE_S = 5.0


def test_kill_9_of_the_api_and_scheduler_process(spate: Spate) -> None:
    tenants = list(spate.tenants.values())
    jobs = {tenant.label: spate.running_job(tenant)["id"] for tenant in tenants}
    assert spate.serve is not None
    applications = {member.pid for tenant in tenants
                    for member in application_tree(spate.data_dir, tenant.id)}
    helpers = [child for child in psutil.Process(spate.serve.process.pid).children(True)
               if child.pid not in applications]
    assert helpers, "the server runs no helper process (its planning workers)?"

    spate.kill_serve()
    since = spate.produced()
    try:
        for tenant in tenants:  # the data plane does not need its control plane
            spate.fresh_output(tenant, since, "rows while the server is dead", timeout_s=60,
                               ask_api=False)
        eventually("the dead server's helper processes to exit",
                   lambda: not [child for child in helpers if alive(child)], timeout_s=30)
    finally:
        for child in helpers:
            if alive(child):
                child.kill()
        restarted_at = time.monotonic()
        spate.start_serve()
    answered = spate.call(spate.tenants["b"], "GET", "/pipelines")
    assert answered.status_code == 200, answered.text
    record("kill -9 of the API/scheduler", "API answering, from the restart",
           time.monotonic() - restarted_at)

    for tenant in tenants:  # the same jobs run on: nothing was restarted or lost
        assert spate.running_job(tenant)["id"] == jobs[tenant.label]
        spate.assert_exactly_once(tenant)
    spate.assert_no_orphans()


def test_restart_of_the_control_plane_postgresql(spate: Spate, servers: Servers) -> None:
    a, b = spate.tenants["a"], spate.tenants["b"]
    jobs = {tenant.label: spate.running_job(tenant)["id"] for tenant in (a, b)}
    with watching(spate, b) as watch:
        eventually("the API to answer", lambda: watch.statuses()[200])
        servers.control.stop("fast")
        since = spate.produced()
        try:
            eventually("503s while the database is down", lambda: watch.statuses()[503] >= 3)
            write = spate.call(a, "POST", "/pipelines", json={"name": "during-outage",
                                                              "sql": spate.copy_sql(a)})
            assert write.status_code == 503, write.text
            assert_unavailable(write.json(), write.headers.get("retry-after"))
            for tenant in (a, b):  # running pipelines go on without the control plane
                spate.fresh_output(tenant, since, "rows while the control plane's database "
                                   "is down", timeout_s=OUTAGE_S * 6, ask_api=False)
        finally:
            servers.control.start()
        back_at = time.monotonic()
        eventually("the API to answer again", lambda: watch.first_ok_after(back_at))
    watch.assert_unavailable_never_internal()
    print(f"[faults] control-plane PostgreSQL restart: the API's answers to a poll every "
          f"{watch.interval_s:g} s: {dict(watch.statuses())}")
    first_ok = watch.first_ok_after(back_at)
    assert first_ok is not None
    record("control-plane PostgreSQL restart", "API answering after the database is back",
           first_ok - back_at)

    for tenant in (a, b):
        assert spate.running_job(tenant)["id"] == jobs[tenant.label]
        spate.assert_exactly_once(tenant)
    assert spate.call(a, "GET", "/pipelines/during-outage").status_code == 404
    spate.assert_no_orphans()


def test_restart_of_redis_the_scheduler_broker(spate: Spate, servers: Servers) -> None:
    a, b = spate.tenants["a"], spate.tenants["b"]
    jobs = {tenant.label: spate.running_job(tenant)["id"] for tenant in (a, b)}
    servers.broker.stop()
    down_at, since = time.monotonic(), spate.produced()
    try:
        # The API needs Redis for nothing it must answer: scheduling pokes are dropped
        # (the periodic reconcile catches up) and rate limits let requests through.
        listed = spate.call(b, "GET", "/pipelines")
        assert listed.status_code == 200, listed.text
        spate.create_pipeline(b, "probe", PROBE_SQL)
        for tenant in (a, b):
            spate.fresh_output(tenant, since, "rows while Redis is down", timeout_s=30)
        time.sleep(max(0.0, down_at + OUTAGE_S - time.monotonic()))
        assert spate.job(b, "probe") is None, "scheduled without a broker?"
    finally:
        servers.broker.start()
    back_at = time.monotonic()
    spate.running_job(b, "probe", timeout_s=90)
    record("Redis (Celery broker) restart", "a pipeline created meanwhile running, after "
           "Redis is back", time.monotonic() - back_at)

    spate.delete_pipeline(b, "probe")
    spate.assert_no_orphans()
    for tenant in (a, b):
        assert spate.running_job(tenant)["id"] == jobs[tenant.label]
        spate.assert_exactly_once(tenant)

