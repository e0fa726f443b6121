"""The scheduler's own steps against a real control store, state store and job process:
a restart without state, the checkpoint task, a cancelled start, a preview's clean-up."""

from __future__ import annotations

import stat
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select, update

from spate.api import migrate
from spate.api.db import create_database
from spate.api.models import Job, Pipeline
from spate.api.repositories.control import SqlControlStore
from spate.scheduler.backends import create_backend
from spate.scheduler.backends.process import is_alive
from spate.scheduler.config import SchedulerConfig
from spate.scheduler.sandbox.cgroups import CgroupError, find_cgroups
from spate.scheduler.service import Scheduler
from spate.scheduler.store import JobView
from spate.statestore import open_store
from tests.scheduler.harness import new_pipeline

pytestmark = pytest.mark.e2e

ALL_GROUPS = range(0, 128)


@pytest.fixture
def scheduler(tmp_path: Path) -> Iterator[Scheduler]:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    migrate.upgrade(url)
    database = create_database(url)
    config = SchedulerConfig(data_dir=tmp_path / "data",
                             state_url=f"sqlite:///{tmp_path / 'state.db'}").resolved()
    running = Scheduler(SqlControlStore(database), create_backend(config), config)
    try:
        yield running
    finally:
        with database.sessions() as session:
            for job in session.scalars(select(Job)):
                if job.handle:
                    running.backend.kill(job.handle)
        database.dispose()


def add_pipeline(scheduler: Scheduler, **settings: object) -> Pipeline:
    store = scheduler.store
    assert isinstance(store, SqlControlStore)
    return new_pipeline(store.database, **settings)


def set_pipeline(scheduler: Scheduler, pipeline_id: str, **values: object) -> None:
    store = scheduler.store
    assert isinstance(store, SqlControlStore)
    with store.database.sessions() as session, session.begin():
        session.execute(update(Pipeline).where(Pipeline.id == pipeline_id).values(**values))


def commit_some_state(state_url: str, tenant: str, pipeline: str) -> None:
    with open_store(state_url) as store:
        state = store.pipeline(tenant, pipeline)
        state.begin_epoch(0, [ALL_GROUPS])
        writer = state.writer(0, ALL_GROUPS)
        writer.put("window", 3, ("key",), b"value")
        writer.commit()
        state.commit_epoch(0, {"epoch": 0})


def last_epoch(state_url: str, tenant: str, pipeline: str) -> int | None:
    with open_store(state_url) as store:
        return store.pipeline(tenant, pipeline).last_committed_epoch()


def test_a_restart_without_state_drops_state_and_checkpoint_first(scheduler: Scheduler) -> None:
    pipeline = add_pipeline(scheduler, desired_state="stopped")
    earlier = scheduler.store.create_run_job(pipeline.id, "local", "an earlier run")
    assert earlier is not None
    scheduler.store.transition(earlier.id, {"created"}, "stopped", "stopped")
    url = scheduler.workspace.tenants.state_url(pipeline.tenant_id)
    commit_some_state(url, pipeline.tenant_id, pipeline.id)
    checkpoint = scheduler.config.checkpoint_dir(pipeline.tenant_id, pipeline.id)
    (checkpoint / "offsets").mkdir(parents=True)
    # The checkpoint task reports what the state store committed.
    assert scheduler.checkpoint(earlier.id) == 0
    assert scheduler.store.job(earlier.id).last_epoch == 0  # type: ignore[union-attr]

    set_pipeline(scheduler, pipeline.id, desired_state="running", restart_generation=1,
                 restart_with_state=False)
    scheduler.reconcile_pipeline(pipeline.id)
    newest = scheduler.store.pipeline_jobs(pipeline.id)[0]
    assert newest.id != earlier.id and newest.restart_generation == 1
    assert newest.state == "starting" and newest.handle is not None
    assert last_epoch(url, pipeline.tenant_id, pipeline.id) is None
    assert not checkpoint.exists()
    spec_path = scheduler.workspace.files(newest.id).spec
    if spec_path.exists():  # the job removes it once read: it names the state store
        assert stat.S_IMODE(spec_path.stat().st_mode) == 0o600

    # A forced stop kills the process at once.
    stopped = _force_stop(scheduler, newest.id)
    assert stopped is not None and stopped.state == "stopped"
    assert is_alive(newest.handle) is False


def test_a_restart_with_state_keeps_it(scheduler: Scheduler) -> None:
    pipeline = add_pipeline(scheduler, desired_state="stopped")
    earlier = scheduler.store.create_run_job(pipeline.id, "local", "an earlier run")
    assert earlier is not None
    scheduler.store.transition(earlier.id, {"created"}, "finished", "finished")
    commit_some_state(scheduler.workspace.tenants.state_url(pipeline.tenant_id),
                      pipeline.tenant_id, pipeline.id)
    set_pipeline(scheduler, pipeline.id, desired_state="running", restart_generation=1)
    scheduler.reconcile_pipeline(pipeline.id)
    newest = scheduler.store.pipeline_jobs(pipeline.id)[0]
    assert newest.id != earlier.id and newest.state == "starting"
    assert last_epoch(scheduler.workspace.tenants.state_url(pipeline.tenant_id),
                      pipeline.tenant_id, pipeline.id) == 0
    _force_stop(scheduler, newest.id)


def test_a_job_stopped_before_it_starts_never_launches(scheduler: Scheduler) -> None:
    pipeline = add_pipeline(scheduler, desired_state="stopped")
    job = scheduler.store.create_run_job(pipeline.id, "local", "created")
    assert job is not None
    after = scheduler.stop(job.id, "graceful")
    assert after is not None and after.state == "stopped" and after.handle is None
    assert not scheduler.workspace.files(job.id).spec.exists()


def test_a_preview_that_ends_leaves_no_state(scheduler: Scheduler) -> None:
    pipeline = add_pipeline(scheduler)
    store = scheduler.store
    assert isinstance(store, SqlControlStore)
    with store.database.sessions() as session, session.begin():
        preview = Job(tenant_id=pipeline.tenant_id, kind="preview", sql="SELECT 1",
                      parallelism=1, backend="local", state="created")
        session.add(preview)
        session.flush()
        preview_id = preview.id
    scope = (pipeline.tenant_id, f"preview-{preview_id}")
    launched = scheduler.reconcile_job(preview_id)
    assert launched is not None and launched.state == "starting"
    spec = scheduler.workspace.spec(launched)
    assert spec.kind == "preview" and spec.pipeline_id == scope[1]
    commit_some_state(scheduler.workspace.tenants.state_url(scope[0]), *scope)
    stopped = _force_stop(scheduler, preview_id)
    assert stopped is not None and stopped.state == "stopped"
    assert last_epoch(scheduler.workspace.tenants.state_url(scope[0]), *scope) is None


def _stale_memory_group(name: str) -> Path | None:
    """Where a stale v1 memory group named ``name`` can be planted (None: not on a host
    with v1 memory and swap accounting, writable)."""
    try:
        host = find_cgroups()
    except (CgroupError, OSError):
        return None
    memory = host.mounts.get("memory")
    if host.version != 1 or memory is None or not (memory / "memory.memsw.limit_in_bytes").exists():
        return None
    return memory / "spate" / name


def test_a_cgroup_failure_fails_the_start_and_says_what_to_do(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'control.db'}"
    migrate.upgrade(url)
    database = create_database(url)
    config = SchedulerConfig(data_dir=tmp_path / "data", sandbox=True,
                             state_url=f"sqlite:///{tmp_path / 'state.db'}").resolved()
    scheduler = Scheduler(SqlControlStore(database), create_backend(config), config)
    try:
        pipeline = add_pipeline(scheduler, desired_state="stopped")
        job = scheduler.store.create_run_job(pipeline.id, "local", "a run")
        assert job is not None
        stale = _stale_memory_group(f"{job.id}-a0")
        if stale is None:
            pytest.skip("needs writable v1 memory cgroups with swap accounting")
        # A group left over under the unit's name, its memory+swap limit below the job's
        # memory: the kernel refuses the job's memory limit (EINVAL), a real cgroup failure.
        stale.mkdir(parents=True)
        try:
            for limit in ("memory.limit_in_bytes", "memory.memsw.limit_in_bytes"):
                (stale / limit).write_text(str(64 * 1024 * 1024))
            after = scheduler.reconcile_job(job.id)
        finally:
            if stale.exists():
                stale.rmdir()
        assert after is not None and after.state == "failed" and after.handle is None
        with database.sessions() as session:
            message = session.scalar(select(Job.failure_message).where(Job.id == job.id))
        assert message is not None and message == after.last_error
        assert "CPU and memory limits could not be set" in message
        assert "ask the operator to check the host's cpu and memory cgroups" in message
        assert not any(path.exists() for path in
                       find_cgroups().job(f"{job.id}-a0").paths)  # nothing left behind
    finally:
        database.dispose()


def test_an_ended_jobs_spec_and_identity_files_are_scrubbed(scheduler: Scheduler) -> None:
    pipeline = add_pipeline(scheduler, desired_state="stopped")
    job = scheduler.store.create_run_job(pipeline.id, "local", "a run")
    assert job is not None
    workspace = scheduler.workspace
    files = workspace.write_spec(job, workspace.spec(job))
    identity = workspace.identity_dir(job.id)
    identity.mkdir(parents=True)
    (identity / "passwd").write_text("x")
    assert files.spec.exists()
    # The job never started: stopping it ends it, and ending it scrubs its folder.
    stopped = _force_stop(scheduler, job.id)
    assert stopped is not None and stopped.state == "stopped"
    assert not files.spec.exists() and not identity.exists()


def _force_stop(scheduler: Scheduler, job_id: str) -> JobView | None:
    """Stop a job by force: killed at once, ``stopped`` once its process is seen gone."""
    job = scheduler.stop(job_id, "force")
    deadline = time.monotonic() + 30
    while job is not None and job.state != "stopped" and time.monotonic() < deadline:
        time.sleep(0.1)
        job = scheduler.reconcile_job(job_id)
    return job
