"""How the scheduler tells whether a job hosted in a tenant's application lives, from
the application's process and its status file (no Spark: a stand-in process)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from spate.engine.host.folder import ENDED, RUNNING, HostConfig, HostFolder, HostStatus
from spate.engine.job.spec import JobSpec
from spate.scheduler.backends import process
from spate.scheduler.backends.applications import APPLICATION, STATUS_STALE_S, Applications


@pytest.fixture
def applications(tmp_path: Path) -> Applications:
    return Applications(tmp_path / "applications")


@pytest.fixture
def stand_in(applications: Applications) -> Iterator[tuple[HostFolder, dict[str, Any]]]:
    """The tenant's folder and a running process standing in for its application."""
    folder = applications.prepare("t1", None)

    handle = applications.ensure("t1", HostConfig("t1", "local[1]"), _start_stand_in)
    yield folder, handle
    process.kill(handle)


#: An application's stand-in: it runs until its folder's stop file appears (or 60 s).
STAND_IN = """
import os, sys, time
deadline = time.monotonic() + 60
while not os.path.exists(sys.argv[1]) and time.monotonic() < deadline:
    time.sleep(0.05)
"""


def _start_stand_in(folder: HostFolder) -> dict[str, Any]:
    return process.launch([sys.executable, "-c", STAND_IN, str(folder.stop)],
                          dict(os.environ), folder.run, folder.log)


def _job(handle: dict[str, Any], job_id: str = "j1", attempt: int = 0) -> dict[str, Any]:
    return {APPLICATION: "t1", "job": job_id, "attempt": attempt, "process": handle}


def _status(folder: HostFolder, launch_id: str, jobs: dict[str, str],
            age_s: float = 0) -> None:
    written = int((time.time() - age_s) * 1000)
    folder.write_status(HostStatus(launch_id, written, jobs))


def _spec(job_id: str, attempt: int = 0) -> JobSpec:
    return JobSpec(job_id=job_id, tenant_id="t1", pipeline_id="p", sql="SELECT 1",
                   state_url="sqlite:///x.db", checkpoint_dir="c", channel_url="file:///tmp/x",
                   attempt=attempt)


def test_a_placed_job_lives_until_its_application_says_it_ended(
        applications: Applications, stand_in: tuple[HostFolder, dict[str, Any]]) -> None:
    folder, handle = stand_in
    applications.place("t1", _spec("j1"), None)
    assert oct(os.stat(folder.ticket("j1.0")).st_mode & 0o777) == "0o600"
    assert applications.is_alive(_job(handle)) is True, "a ticket not yet taken is alive"
    _status(folder, handle["launch_id"], {"j1.0": RUNNING})
    assert applications.is_alive(_job(handle)) is True
    assert not folder.ticket("j1.0").exists(), "a taken ticket (the job's secrets) stays"
    _status(folder, handle["launch_id"], {"j1.0": ENDED})
    assert applications.is_alive(_job(handle)) is False
    assert applications.is_alive(_job(handle, "never-placed")) is False


def test_a_quiet_application_cannot_vouch_for_its_jobs(
        applications: Applications, stand_in: tuple[HostFolder, dict[str, Any]]) -> None:
    folder, handle = stand_in
    _status(folder, handle["launch_id"], {"j1.0": RUNNING}, age_s=STATUS_STALE_S + 5)
    assert applications.is_alive(_job(handle)) is None
    _status(folder, "another", {"j1.0": RUNNING})  # another start's status
    assert applications.is_alive(_job(handle)) is None


def test_a_dead_application_takes_its_jobs_with_it(
        applications: Applications, stand_in: tuple[HostFolder, dict[str, Any]]) -> None:
    folder, handle = stand_in
    _status(folder, handle["launch_id"], {"j1.0": RUNNING})
    process.kill(handle)
    deadline = time.monotonic() + 10
    while process.is_alive(handle) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert applications.is_alive(_job(handle)) is False


def test_one_application_per_tenant_until_it_stops(
        applications: Applications, stand_in: tuple[HostFolder, dict[str, Any]]) -> None:
    folder, handle = stand_in
    started: list[int] = []

    def start(folder: HostFolder) -> dict[str, Any]:
        started.append(1)
        return _start_stand_in(folder)

    assert applications.ensure("t1", HostConfig("t1", "local[1]"), start) == handle
    assert started == []
    applications.stop_all()
    assert folder.stop.exists()
    replacement = applications.ensure("t1", HostConfig("t1", "local[1]"), start)
    try:
        assert started == [1] and replacement["pid"] != handle["pid"]
        assert not folder.stop.exists(), "the new application would stop at once"
    finally:
        process.kill(replacement)


def test_a_kill_mark_names_the_job_and_release_forgets_it(
        applications: Applications, stand_in: tuple[HostFolder, dict[str, Any]]) -> None:
    folder, handle = stand_in
    applications.place("t1", _spec("j2"), None)
    applications.kill(_job(handle, "j2"))
    assert (folder.kills / "j2.0").exists() and not folder.ticket("j2.0").exists()
    applications.kill(_job(handle, "j2"))  # twice is harmless
    applications.release(_job(handle, "j2"))
    assert not (folder.kills / "j2.0").exists()


def test_a_job_restarted_in_the_same_application_is_not_its_killed_attempt(
        applications: Applications, stand_in: tuple[HostFolder, dict[str, Any]]) -> None:
    """Attempt 0 is killed (it went silent while the application started) and attempt 1
    placed at once: the kill mark, and attempt 0's end, are not attempt 1's."""
    folder, handle = stand_in
    applications.place("t1", _spec("j1"), None)
    applications.kill(_job(handle, attempt=0))
    applications.place("t1", _spec("j1", attempt=1), None)
    assert [path.name for path in folder.kills.iterdir()] == ["j1.0"]
    assert folder.ticket("j1.1").exists(), "the new attempt waits to be taken"
    assert applications.is_alive(_job(handle, attempt=1)) is True
    _status(folder, handle["launch_id"], {"j1.0": ENDED, "j1.1": RUNNING})
    assert applications.is_alive(_job(handle, attempt=0)) is False
    assert applications.is_alive(_job(handle, attempt=1)) is True
    assert applications.describe("t1")["jobs"] == ["j1"]  # type: ignore[index]
    applications.release(_job(handle, attempt=1))
    assert list(folder.kills.iterdir()) == [] and list(folder.inbox.iterdir()) == [], (
        "release forgets every attempt's ticket and mark")


def test_queries_the_control_plane_holds_as_ended_are_killed_as_orphans(
        applications: Applications, stand_in: tuple[HostFolder, dict[str, Any]]) -> None:
    folder, handle = stand_in
    _status(folder, handle["launch_id"],
            {"kept.0": RUNNING, "orphan.2": RUNNING, "done.0": ENDED})
    held = {"kept"}
    assert applications.orphans(lambda job_id: job_id in held) == ["orphan"]
    assert sorted(path.name for path in folder.kills.iterdir()) == ["orphan.2"]
    assert applications.orphans(lambda job_id: job_id in held) == ["orphan"], (
        "still reported while it runs; the kill mark is not made twice")
    _status(folder, handle["launch_id"], {"kept.0": RUNNING, "orphan.2": ENDED, "done.0": ENDED})
    assert applications.orphans(lambda job_id: job_id in held) == []
    assert list(folder.kills.iterdir()) == [], "the mark goes once the query ended"
    _status(folder, "another launch", {"orphan.2": RUNNING})
    assert applications.orphans(lambda job_id: False) == [], (
        "a status of another start of the application vouches for nothing")


def test_stopping_every_application_kills_one_that_does_not_exit(
        applications: Applications, stand_in: tuple[HostFolder, dict[str, Any]]) -> None:
    folder, _ = stand_in
    # One that does not look at its stop file, as a wedged application would not.
    applications.prepare("t2", None)
    deaf = applications.ensure("t2", HostConfig("t2", "local[1]"), lambda folder: process.launch(
        [sys.executable, "-c", "import time; time.sleep(60)"], dict(os.environ), folder.run,
        folder.log))
    assert applications.stop_all(kill_after_s=5) == ["t2"], "only the deaf one is killed"
    assert folder.stop.exists()
    handle = deaf
    deadline = time.monotonic() + 10
    while process.is_alive(handle) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.is_alive(handle) is False


def test_job_processes_the_control_plane_disowns_are_killed_as_orphans(tmp_path: Path) -> None:
    """A job process is found by the spec its command line names under the jobs folder."""
    jobs = tmp_path / "jobs"
    handles = {}
    for job_id in ("kept", "orphan"):
        (jobs / job_id).mkdir(parents=True)
        handles[job_id] = process.launch(
            [sys.executable, "-c", "import time; time.sleep(60)", "--consume",
             str(jobs / job_id / "spec.json")], dict(os.environ), jobs / job_id,
            jobs / job_id / "job.log")
    try:
        # A process shows its own command line once it has executed it (until then, the
        # forking one's): wait for both, as the scheduler's later sweeps would.
        deadline = time.monotonic() + 10
        while not all("--consume" in _command_line(h["pid"]) for h in handles.values()):
            assert time.monotonic() < deadline, "the job processes did not start"
            time.sleep(0.02)
        assert process.orphan_jobs(jobs, lambda job_id: job_id == "kept") == ["orphan"]
        deadline = time.monotonic() + 10
        while process.is_alive(handles["orphan"]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert process.is_alive(handles["orphan"]) is False
        assert process.is_alive(handles["kept"]) is True
        assert process.orphan_jobs(tmp_path / "elsewhere", lambda job_id: False) == [], (
            "another deployment's jobs are not this one's to kill")
    finally:
        for handle in handles.values():
            process.kill(handle)


def _command_line(pid: int) -> list[str]:
    try:
        return list(psutil.Process(pid).cmdline())
    except psutil.Error:
        return []


def test_a_process_is_told_by_its_start_since_boot_not_by_the_wall_clock(
        tmp_path: Path) -> None:
    """A handle still names its running process after the wall clock moved (its
    create_time, read again now, would differ), and never a later process of its pid."""
    handle = process.launch([sys.executable, "-c", "import time; time.sleep(60)"],
                            dict(os.environ), tmp_path, tmp_path / "log")
    try:
        assert handle["started_ticks"] == process.started_ticks(handle["pid"])
        clock_moved = {**handle, "create_time": handle["create_time"] + 1.0}
        assert process.is_alive(clock_moved) is True
        reused = {**handle, "started_ticks": handle["started_ticks"] + 1}
        assert process.is_alive(reused) is False, "another process of the same pid"
        without = {key: value for key, value in handle.items() if key != "started_ticks"}
        assert process.is_alive(without) is True, "a handle of an earlier version"
        assert process.is_alive({**without, "create_time": 1.0}) is False
    finally:
        process.kill(handle)
    deadline = time.monotonic() + 10
    while process.is_alive(handle) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.is_alive(handle) is False
