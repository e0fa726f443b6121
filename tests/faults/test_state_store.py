"""The state store unreachable for 30 s while epochs run: its PostgreSQL server quits at
once (sessions cut mid-transaction, as in a crash) and comes back 30 s later.

Every tenant's job uses the store, so both tenants' pipelines wait; neither may
fail. Each job reports the outage and runs again from its last committed epoch
(waits of 1, 2, 4 … at most 15 s) until the store answers, then resumes by
itself with every entry exactly once. The control plane does not need the
state store: the API answers 200 throughout.
"""

from __future__ import annotations

import time
from functools import partial

import pytest

from tests.faults.api_watch import watching
from tests.faults.deployment import Spate, Tenant, eventually
from tests.faults.figures import record
from tests.faults.servers import Servers

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.xdist_group("faults")]

OUTAGE_S = 30.0


def test_state_store_unreachable_for_30_seconds_mid_epoch(spate: Spate,
                                                          servers: Servers) -> None:
    tenants = list(spate.tenants.values())
    jobs = {tenant.label: spate.running_job(tenant)["id"] for tenant in tenants}
    reported = {tenant.label: len(spate.errors(tenant, jobs[tenant.label]))
                for tenant in tenants}
    with watching(spate, spate.tenants["b"]) as watch:
        servers.state.stop("immediate")
        down_at = time.monotonic()
        try:
            for tenant in tenants:
                job_id, skip = jobs[tenant.label], reported[tenant.label]
                eventually(f"tenant {tenant.label}'s job to report the unreachable store",
                           partial(_retries, spate, tenant, job_id, skip), timeout_s=OUTAGE_S)
            time.sleep(max(0.0, down_at + OUTAGE_S - time.monotonic()))
            for tenant in tenants:  # waiting, not failed, and not replaced
                job = spate.job(tenant)
                assert job is not None and (job["id"], job["state"]) == (
                    jobs[tenant.label], "running"), job
        finally:
            servers.state.start()
        back_at, since = time.monotonic(), spate.produced()
        resumed = [spate.fresh_output(tenant, since, "rows after the state store is back",
                                      timeout_s=90) for tenant in tenants]
    assert set(watch.statuses()) == {200}, f"the API answered {watch.statuses()}"
    record("state store unreachable 30 s", "pipelines writing new rows, after the store is "
           "back", max(resumed) - back_at)

    for tenant in tenants:
        assert spate.running_job(tenant)["id"] == jobs[tenant.label]
        spate.assert_exactly_once(tenant)
    spate.assert_no_orphans()


def _retries(spate: Spate, tenant: Tenant, job_id: str, skip: int) -> list[str]:
    """The job's reports, after its first ``skip`` ones, of running again for want of the
    state store."""
    return [error for error in spate.errors(tenant, job_id)[skip:]
            if "state" in error and "running again" in error]
