"""A tenant's storage volume full: tenant ``a``'s storage root is a small volume of its
own, which fills up while its pipeline writes there.

The job must say what is wrong (no space left), must not lose or repeat an
entry, and must resume by itself once space is freed; tenant ``b``, whose
storage is elsewhere, must not notice.
"""

from __future__ import annotations

import time

import pytest

from tests.faults.deployment import Spate, Tenant, eventually
from tests.faults.figures import record

pytestmark = [pytest.mark.e2e, pytest.mark.spark, pytest.mark.xdist_group("faults")]

#: How long the volume stays full after the job said so.
FULL_S = 5.0


def test_the_tenant_storage_volume_full(spate: Spate) -> None:
    a, b = spate.tenants["a"], spate.tenants["b"]
    job_a, job_b = spate.running_job(a)["id"], spate.running_job(b)["id"]
    known = len(spate.errors(a, job_a))
    assert spate.volume is not None

    spate.volume.fill()
    since = spate.produced()
    try:
        eventually("tenant a's job to report its full storage", lambda: [
            error for error in spate.errors(a, job_a)[known:] + _failure(spate, a)
            if "No space left on device" in error], timeout_s=60)
        spate.fresh_output(b, since, "tenant b's rows while tenant a's volume is full",
                           timeout_s=30)
        time.sleep(FULL_S)
    finally:
        spate.volume.free()
    freed_at, since = time.monotonic(), spate.produced()
    resumed = spate.fresh_output(a, since, "tenant a's rows once space is freed")
    record("tenant storage volume full", "new rows in the sink, after space is freed",
           resumed - freed_at)

    assert spate.running_job(a)["id"] == job_a
    assert spate.running_job(b)["id"] == job_b
    spate.assert_exactly_once(a)
    spate.assert_exactly_once(b)
    spate.assert_no_orphans()


def _failure(spate: Spate, tenant: Tenant) -> list[str]:
    """The tenant's copy job's failure message, if it failed."""
    job = spate.job(tenant)
    return [job["failure_message"]] if job is not None and job["failure_message"] else []
