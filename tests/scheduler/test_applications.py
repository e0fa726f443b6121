"""Tenants' warm applications, end to end on the local backend: a tenant's jobs run as
queries of one Spark application of that tenant (never another tenant's), a query that
fails or is stopped leaves its neighbours running, an application with no job left
exits by itself, the next job starting a new one, a pipeline without input goes
idle and resumes by itself when its input is due, exactly once, and a drained or
resized application hands its pipelines to a new one, exactly once."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

import psutil
import pytest
from sqlalchemy import update

from spate.api.models import Job, Pipeline
from spate.engine.host.folder import run_name
from spate.scheduler.backends.applications import Applications
from spate.scheduler.sandbox.unit import sandbox_problem
from tests.scheduler.conftest import running_scheduler
from tests.scheduler.harness import (
    Harness,
    expected_bids,
    impulse_sql,
    windowed_bids_sql,
    written_lines,
)

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

#: Short, so the idle test sees an application leave within the test.
IDLE_EXIT_S = 4.0
#: A pipeline with no input for this long stops until its input is due.
IDLE_STOP_S = 3.0

#: A source whose second line is not JSON: with bad_data = 'fail' its first epoch fails.
BROKEN_SQL = """
CREATE TABLE lines (n BIGINT) WITH (connector = 'single_file', path = 'broken.jsonl',
    format = 'json', type = 'source');
CREATE TABLE out WITH (connector = 'single_file', path = 'never.jsonl', format = 'json',
    type = 'sink');
INSERT INTO out SELECT n FROM lines;
"""


@pytest.fixture(scope="module")
def hosted(tmp_path_factory: pytest.TempPathFactory, redis_url: str, redis_prefix: str,
           control_url: str) -> Iterator[Harness]:
    with running_scheduler(tmp_path_factory.mktemp("spate-apps"), redis_url, redis_prefix,
                           control_url, sandbox=sandbox_problem() is None, applications=True,
                           application_idle_exit_s=IDLE_EXIT_S,
                           idle_stop_s=IDLE_STOP_S) as running:
        yield running


def _exited(pid: int) -> bool:
    """Whether the process is gone or a zombie (it may be reaped while we look)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _application_pid(harness: Harness, pipeline_id: str) -> int:
    job = harness.wait_for_job(pipeline_id, ("running",))
    assert job.handle is not None and job.handle.get("application") == job.tenant_id, \
        f"the job was not placed in its tenant's application: {job.handle}"
    return int(job.handle["process"]["pid"])


def test_a_tenants_jobs_share_its_application_and_fail_alone(hosted: Harness) -> None:
    ticker = hosted.add_pipeline(impulse_sql("ticks.jsonl", event_rate=20))
    tenant = hosted.tenant_of(ticker)
    storage = hosted.output(ticker, "")
    storage.mkdir(parents=True, exist_ok=True)
    (storage / "broken.jsonl").write_text('{"n": 1}\nnot json\n')
    bounded = hosted.add_pipeline(windowed_bids_sql("bids.jsonl", 400, 4, 400),
                                  tenant_id=tenant)
    broken = hosted.add_pipeline(BROKEN_SQL, tenant_id=tenant)
    other = hosted.add_pipeline(impulse_sql("other.jsonl", event_rate=20))

    application = _application_pid(hosted, ticker)
    assert _application_pid(hosted, bounded) == application
    assert _application_pid(hosted, other) != application, "two tenants shared an application"
    assert psutil.Process(application).is_running()

    failed = hosted.wait_for_job(broken, ("failed",))
    assert "broken.jsonl" in (failed.failure_message or ""), failed.failure_message
    hosted.wait_for_job(bounded, ("finished",))
    rows = [json.loads(line) for line in
            hosted.output(bounded, "bids.jsonl").read_text().splitlines()]
    assert sum(row["n"] for row in rows) == expected_bids(400, 4)

    # The failure and the finish left the ticker running in the same application.
    before = len(written_lines(hosted.output(ticker, "ticks.jsonl")))
    hosted.wait_for("the ticker to write more rows", lambda: len(
        written_lines(hosted.output(ticker, "ticks.jsonl"))) > before + 20)
    assert hosted.jobs(ticker)[-1].state == "running"
    assert _application_pid(hosted, ticker) == application

    hosted.change_pipeline(ticker, desired_state="stopped", stop_mode="checkpoint")
    hosted.wait_for_job(ticker, ("stopped",))
    assert hosted.jobs(other)[-1].state == "running", "a stop reached another tenant's job"
    # A forced stop is over only when the query is: no row comes after it.
    hosted.change_pipeline(other, desired_state="stopped", stop_mode="force")
    killed = hosted.wait_for_job(other, ("stopped",))
    assert [state for state, _ in hosted.history(killed.id)][-2:] == ["stopping", "stopped"]
    _assert_no_more_rows(hosted, other, "other.jsonl")


def _assert_no_more_rows(harness: Harness, pipeline: str, name: str) -> None:
    """The pipeline's output does not grow for two seconds (at 20 rows/s it would)."""
    before = harness.output(pipeline, name).read_text()
    time.sleep(2.0)
    assert harness.output(pipeline, name).read_text() == before, "its query still runs"


def test_an_idle_application_exits_and_the_next_job_starts_another(hosted: Harness) -> None:
    first = hosted.add_pipeline(windowed_bids_sql("a.jsonl", 200, 2, 200))
    application = _application_pid(hosted, first)
    hosted.wait_for_job(first, ("finished",))
    hosted.wait_for("the idle application to exit",
                    lambda: _exited(application),
                    timeout_s=IDLE_EXIT_S + 60)
    second = hosted.add_pipeline(windowed_bids_sql("b.jsonl", 200, 2, 200),
                                 tenant_id=hosted.tenant_of(first))
    assert _application_pid(hosted, second) != application
    hosted.wait_for_job(second, ("finished",))


def test_a_tenant_writing_sql_gets_its_application_before_its_first_job(
        hosted: Harness) -> None:
    # A stopped pipeline makes the tenant; nothing of it runs.
    tenant = hosted.tenant_of(hosted.add_pipeline(impulse_sql("none.jsonl"),
                                                  desired_state="stopped"))
    applications = hosted.scheduler.backend.applications
    assert applications is not None and applications.describe(tenant) is None
    hosted.client.tenant_active(tenant)  # what the API sends when its SQL is validated
    record = hosted.wait_for("the application to start ahead of any job", lambda: (
        (applications.describe(tenant) or {}).get("state") == "running"
        and applications.describe(tenant)), timeout_s=60)
    assert record["jobs"] == []
    assert hosted.scheduler.warm(tenant) is False, "a second sign starts nothing more"
    pipeline = hosted.add_pipeline(impulse_sql("first.jsonl"), tenant_id=tenant)
    assert _application_pid(hosted, pipeline) == record["pid"], \
        "the first job went to the application started for it"
    hosted.change_pipeline(pipeline, desired_state="stopped", stop_mode="immediate")
    hosted.wait_for_job(pipeline, ("stopped",))


def test_a_job_ticket_with_secrets_is_the_tenants_alone_and_goes_once_taken(
        hosted: Harness) -> None:
    pipeline = hosted.add_pipeline(impulse_sql("t.jsonl", event_rate=5))
    _application_pid(hosted, pipeline)
    job = hosted.jobs(pipeline)[-1]
    applications = hosted.scheduler.backend.applications
    assert applications is not None
    folder = applications.folder(job.tenant_id)
    hosted.wait_for("the ticket to go", lambda: (
        hosted.scheduler.backend.is_alive(job.handle or {})
        and not folder.ticket(run_name(job.id, job.attempt)).exists()))
    for path in (folder.path, folder.inbox, folder.kills, folder.jobs):
        assert os.stat(path).st_uid == os.geteuid(), f"{path} should stay the server's"
    # The control plane holds the job as ended while its query runs (as a kill whose mark
    # went too early once left it): the next sweep kills it as an orphan.
    with hosted.database.sessions() as session, session.begin():  # at once: no sweep between
        session.execute(update(Pipeline).where(Pipeline.id == pipeline).values(
            desired_state="stopped", stop_mode="checkpoint"))
        session.execute(update(Job).where(Job.id == job.id).values(state="stopped"))
    hosted.wait_for("the orphan's query to end", lambda: (
        (status := folder.read_status()) is not None
        and status.jobs.get(run_name(job.id, job.attempt)) == "ended"))
    _assert_no_more_rows(hosted, pipeline, "t.jsonl")
    assert any("still running though the control plane holds it as ended" in message
               for message in hosted.errors(job.id)), "not reported"


def _counters(harness: Harness, pipeline: str, name: str) -> list[int]:
    out = harness.output(pipeline, name)
    return [json.loads(line)["counter"] for line in written_lines(out)]


def test_a_pipeline_without_input_goes_idle_and_resumes_when_input_is_due(
        hosted: Harness) -> None:
    # One row every 10 s: after each, 3 s without input (and the next row 7 s away) make
    # the job idle until the next.
    pipeline = hosted.add_pipeline(impulse_sql("slow.jsonl", event_rate=0.1))

    def counters() -> list[int]:
        return _counters(hosted, pipeline, "slow.jsonl")

    hosted.wait_for("the job to go idle", lambda: any(
        job.state == "idle" for job in hosted.jobs(pipeline)), timeout_s=120)
    rows_when_idle = len(counters())
    hosted.wait_for("a new job to write the next rows", lambda: (
        len(hosted.jobs(pipeline)) >= 2 and len(counters()) > rows_when_idle),
        timeout_s=120)
    idle = next(job for job in hosted.jobs(pipeline) if job.state == "idle")
    assert idle.next_attempt_at is not None and idle.ended_at is not None
    assert [state for state, _ in hosted.history(idle.id)][-1] == "idle"
    hosted.change_pipeline(pipeline, desired_state="stopped", stop_mode="checkpoint")
    hosted.wait_for("no job of the pipeline to run", lambda: all(
        job.state in ("idle", "stopped") for job in hosted.jobs(pipeline)))
    seen = counters()
    assert seen == list(range(len(seen))), f"rows lost or repeated across idle periods: {seen}"



def _moves_to_a_new_application(hosted: Harness, name: str,
                                drain: Callable[[Applications, str], object]) -> Applications:
    """Start a pipeline writing ``name``, drain its application with
    ``drain(applications, tenant)`` and check that the pipeline goes on, exactly once,
    in a new application; the tenants' applications."""
    pipeline = hosted.add_pipeline(impulse_sql(name, event_rate=20))
    applications = hosted.scheduler.backend.applications
    assert applications is not None
    application = _application_pid(hosted, pipeline)
    hosted.wait_for("the first rows", lambda: len(_counters(hosted, pipeline, name)) > 10)
    drain(applications, hosted.tenant_of(pipeline))
    hosted.wait_for("the drained application to exit",
                    lambda: _exited(application),
                    timeout_s=120)
    hosted.wait_for("a job in a new application", lambda: (
        hosted.jobs(pipeline)[-1].state == "running"
        and _application_pid(hosted, pipeline) != application), timeout_s=120)
    moved_at = len(_counters(hosted, pipeline, name))
    hosted.wait_for("rows from the new application",
                    lambda: len(_counters(hosted, pipeline, name)) > moved_at + 10,
                    timeout_s=120)
    assert [job.state for job in hosted.jobs(pipeline)][:-1] == ["stopped"], \
        "the drained job should have stopped after a commit, not failed"
    hosted.change_pipeline(pipeline, desired_state="stopped", stop_mode="checkpoint")
    hosted.wait_for_job(pipeline, ("stopped",))
    seen = sorted(_counters(hosted, pipeline, name))
    assert seen == list(range(len(seen))), "rows lost or repeated across the move"
    return applications


def test_a_drained_application_hands_its_pipelines_to_a_new_one_exactly_once(
        hosted: Harness) -> None:
    _moves_to_a_new_application(hosted, "drained.jsonl",
                                lambda applications, tenant: applications.drain(tenant))


def test_an_application_of_another_size_is_replaced_by_one_of_the_new_size(
        hosted: Harness) -> None:
    scheduler = hosted.scheduler
    old_config = scheduler.config
    resized = replace(old_config, application_memory_mb=old_config.application_memory_mb + 512)
    tenants: list[str] = []

    def resize(applications: Applications, tenant: str) -> None:
        # as an operator's new SPATE_APPLICATION_MEMORY_MB would
        del applications
        tenants.append(tenant)
        scheduler.config = scheduler.workspace.config = resized

    try:
        applications = _moves_to_a_new_application(hosted, "resized.jsonl", resize)
    finally:
        scheduler.config = scheduler.workspace.config = old_config
    described = applications.describe(tenants[0])
    assert described is not None and described["size"]["memory_mb"] == \
        resized.application_memory_mb


def test_admission_control_starts_pipelines_a_few_at_a_time(hosted: Harness) -> None:
    scheduler = hosted.scheduler
    old_config = scheduler.config
    scheduler.config = replace(old_config, max_starting_jobs=1)
    try:
        first = hosted.add_pipeline(impulse_sql("a1.jsonl", event_rate=5))
        tenant = hosted.tenant_of(first)
        pipelines = [first, *(hosted.add_pipeline(impulse_sql(f"a{n}.jsonl", event_rate=5),
                                                  tenant_id=tenant) for n in (2, 3))]
        most_starting = 0

        def all_running() -> bool:
            nonlocal most_starting
            most_starting = max(most_starting, hosted.store.starting_jobs())
            return all(hosted.jobs(p) and hosted.jobs(p)[-1].state == "running"
                       for p in pipelines)

        hosted.wait_for("every pipeline to run", all_running, timeout_s=180)
    finally:
        scheduler.config = old_config
    assert most_starting == 1, f"{most_starting} jobs were starting at once"
    for pipeline in pipelines:
        hosted.change_pipeline(pipeline, desired_state="stopped", stop_mode="checkpoint")
    for pipeline in pipelines:
        hosted.wait_for_job(pipeline, ("stopped",))
