"""A sandboxed job's folder is its tenant user's: links, hard links and FIFOs the job
plants there must never make the scheduler (root) read, write or give away a server
file. Each test plants what a hostile job would, then runs the scheduler's real code.

Needs root (to own files as a tenant's user), as the sandbox itself does.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

import pytest

from spate.engine.job.channel import ChannelError, FileJobChannel
from spate.engine.job.nofollow import UnsafeFileError
from spate.engine.job.spec import JobSpec
from spate.scheduler.backends.local import LocalBackend
from spate.scheduler.backends.process import launch, log_tail
from spate.scheduler.config import SchedulerConfig
from spate.scheduler.errors import SubmitError
from spate.scheduler.sandbox.cgroups import CgroupError, CgroupHost, Limits, find_cgroups
from spate.scheduler.sandbox.unit import ComputeUnit, TenantUser, UnitFolders
from spate.scheduler.workspace import Workspace
from tests.scheduler.factories import job

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root, as the sandbox does")

TENANT_UID = 2_100_077
SECRET = "server secret: do not leak"
#: A line a job's event reader would take for an event, were the secret file read.
SECRET_EVENT = '{"type": "error", "message": "' + SECRET + '"}\n'


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file of the server's: root's, owner-only, outside every tenant folder."""
    path = tmp_path / "server" / "secret.key"
    path.parent.mkdir(mode=0o700)
    path.write_text(SECRET_EVENT)
    path.chmod(0o600)
    return path


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    config = SchedulerConfig(data_dir=tmp_path / "data",
                             state_url=f"sqlite:///{tmp_path / 'state.db'}").resolved()
    return Workspace(config, LocalBackend(config))


def tenant_unit(workspace: Workspace, job_id: str) -> ComputeUnit:
    """The unit of ``job_id`` as the scheduler makes it, its job folder the tenant's
    (its control groups are not needed here, so none are made)."""
    folder = workspace.files(job_id).directory
    folder.mkdir(parents=True, mode=0o700)
    os.chown(folder, TENANT_UID, TENANT_UID)
    return ComputeUnit(f"{job_id}-a0", TenantUser(TENANT_UID, "spate-t77"),
                       UnitFolders(folder, (), workspace.identity_dir(job_id)),
                       Limits(cpu_cores=1, memory_bytes=256 * 1024 * 1024), CgroupHost(1, {}))


def spec_of(workspace: Workspace, job_id: str) -> JobSpec:
    return workspace.spec(job(job_id))


def assert_untouched(secret: Path) -> None:
    info = secret.stat()
    assert (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode)) == (0, 0, 0o600)
    assert secret.read_text() == SECRET_EVENT


# -- the spec and the log, written by the scheduler ----------------------------------


def test_a_link_planted_as_the_spec_is_replaced_not_written_through(
        workspace: Workspace, secret: Path) -> None:
    unit = tenant_unit(workspace, "j-spec")
    files = workspace.files("j-spec")
    files.spec.symlink_to(secret)
    workspace.write_spec(job("j-spec"), spec_of(workspace, "j-spec"), unit)
    assert_untouched(secret)
    assert not files.spec.is_symlink()
    info = files.spec.lstat()
    assert (info.st_uid, stat.S_IMODE(info.st_mode)) == (TENANT_UID, 0o600)
    assert JobSpec.from_json(files.spec.read_text()).job_id == "j-spec"


def test_a_link_planted_as_the_log_is_neither_given_away_nor_written(
        workspace: Workspace, secret: Path) -> None:
    unit = tenant_unit(workspace, "j-log")
    files = workspace.files("j-log")
    files.log.symlink_to(secret)
    with pytest.raises(UnsafeFileError):
        workspace.write_spec(job("j-log"), spec_of(workspace, "j-log"), unit)
    assert_untouched(secret)  # not chowned to the tenant, not truncated
    with pytest.raises(SubmitError, match="job.log"):
        launch([sys.executable, "-c", "print('job output')"], {}, files.directory, files.log,
               TENANT_UID)
    assert_untouched(secret)  # the job's output was not appended to it


def test_the_log_is_the_tenant_users_own_and_takes_the_jobs_output(
        workspace: Workspace) -> None:
    unit = tenant_unit(workspace, "j-ok")
    files = workspace.files("j-ok")
    workspace.write_spec(job("j-ok"), spec_of(workspace, "j-ok"), unit)
    assert files.log.lstat().st_uid == TENANT_UID
    handle = launch([sys.executable, "-c", "print('job output')"], {}, files.directory,
                    files.log, TENANT_UID)
    deadline = time.monotonic() + 30
    while "job output" not in files.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log_tail(handle) == "job output"


# -- the log's tail, read by the scheduler and shown to the tenant ----------------------


@pytest.mark.parametrize("plant", ["symlink", "hard link", "fifo", "other owner"])
def test_the_log_tail_shown_to_a_tenant_never_reads_a_planted_file(
        workspace: Workspace, secret: Path, plant: str) -> None:
    tenant_unit(workspace, "j-tail")
    log = workspace.files("j-tail").log
    if plant == "symlink":
        log.symlink_to(secret)
    elif plant == "hard link":  # the kernel stops a tenant doing this; the tail does too
        os.link(secret, log)
    elif plant == "fifo":  # opening it for reading would wait for a writer forever
        os.mkfifo(log)
    else:  # a regular file, but root's: the tenant moved a root-written file here
        log.write_text(SECRET_EVENT)
    tail = log_tail({"log": str(log), "log_owner": TENANT_UID})
    assert SECRET not in tail and tail == ""
    assert_untouched(secret)


# -- the channel: events read, stop requests written -------------------------------------


def test_events_planted_as_a_link_are_not_read(workspace: Workspace, secret: Path) -> None:
    tenant_unit(workspace, "j-events")
    channel = FileJobChannel(workspace.files("j-events").directory)
    channel.events_path.symlink_to(secret)
    with pytest.raises(ChannelError) as caught:
        channel.read(None)
    assert SECRET not in str(caught.value)
    assert_untouched(secret)


@pytest.mark.parametrize("name", ["stop", "stop.tmp"])
def test_a_stop_request_never_writes_through_a_planted_link(
        workspace: Workspace, secret: Path, name: str) -> None:
    tenant_unit(workspace, "j-stop")
    channel = FileJobChannel(workspace.files("j-stop").directory)
    (channel.directory / name).symlink_to(secret)
    channel.request_stop("graceful")
    assert_untouched(secret)  # not truncated, not made readable to all
    assert not channel.stop_path.is_symlink()
    assert channel.stop_requested() == "graceful"


# -- the sandbox's /etc files -------------------------------------------------------------


def test_the_sandbox_identity_files_are_written_out_of_the_tenants_reach(
        workspace: Workspace, tmp_path: Path) -> None:
    try:
        cgroups = find_cgroups()
    except (CgroupError, OSError) as error:
        pytest.skip(f"no usable cgroups: {error}")
    target = tmp_path / "etc"  # stands for the host's /etc
    target.mkdir()
    (target / "passwd").write_text("root:x:0:0:root:/root:/bin/sh\n")
    folder = workspace.files("j-identity").directory
    folder.mkdir(parents=True)
    (folder / ".sandbox").symlink_to(target)  # where identity files used to go
    unit = ComputeUnit(f"test-identity-{os.getpid()}", TenantUser(TENANT_UID, "spate-t77"),
                       UnitFolders(folder, (), workspace.identity_dir("j-identity")),
                       Limits(cpu_cores=1, memory_bytes=256 * 1024 * 1024), cgroups)
    try:
        unit.prepare()
    finally:
        unit.remove()
    assert (target / "passwd").read_text() == "root:x:0:0:root:/root:/bin/sh\n"
    assert not (target / "group").exists()
    identity = workspace.identity_dir("j-identity")
    assert "spate-t77" in (identity / "passwd").read_text()
    assert identity.stat().st_uid == 0 and not identity.is_relative_to(folder)
    workspace.scrub(job("j-identity"))
    assert not identity.exists()
