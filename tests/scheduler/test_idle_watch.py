"""Scale to zero for a source only its system can answer for, end to end: a pipeline
reading a Redis stream goes idle when the stream is quiet, its tenant's warm
application exits, a watch job (no Spark, outside the application) looks at the
stream, and the pipeline resumes by itself when entries arrive, exactly once.  The
same for a continuous filesystem source, whose watcher lists its folder and wakes
the pipeline when a file is dropped in."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from spate.scheduler.sandbox.unit import sandbox_problem
from tests.scheduler.conftest import running_scheduler
from tests.scheduler.harness import Harness, written_lines

pytestmark = [pytest.mark.e2e, pytest.mark.spark]


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory, redis_url: str, redis_prefix: str,
            control_url: str) -> Iterator[Harness]:
    # The stream's Redis plays the tenant's own server: the policy allow-lists it, as an
    # operator would with SPATE_EGRESS_ALLOW.
    with running_scheduler(tmp_path_factory.mktemp("spate-watch"), redis_url, redis_prefix,
                           control_url, sandbox=sandbox_problem() is None, applications=True,
                           application_idle_exit_s=3.0, idle_stop_s=3.0,
                           egress_allow=("127.0.0.1",)) as running:
        yield running


def _sql(redis_url: str, stream: str) -> str:
    return f"""
CREATE TABLE events (n BIGINT) WITH (connector = 'redis', type = 'source',
    address = '{redis_url}', stream = '{stream}', format = 'json',
    'source.offset' = 'earliest');
CREATE TABLE out WITH (connector = 'single_file', path = 'watched.jsonl', format = 'json',
    type = 'sink');
INSERT INTO out SELECT n FROM events;
"""


def test_an_idle_pipeline_on_a_stream_resumes_by_itself_when_entries_arrive(
        watched: Harness, redis_url: str, redis_prefix: str) -> None:
    client = redis.Redis.from_url(redis_url)
    stream = f"{redis_prefix}watched"
    for n in range(3):
        client.xadd(stream, {"value": json.dumps({"n": n})})
    pipeline = watched.add_pipeline(_sql(redis_url, stream))

    def seen() -> list[int]:
        out = watched.output(pipeline, "watched.jsonl")
        lines = written_lines(out)
        return [json.loads(line)["n"] for line in lines]

    watched.wait_for("the first entries", lambda: len(seen()) == 3)
    watch = watched.wait_for("the quiet pipeline to go idle with a watcher", lambda: next(
        (job for job in watched.jobs(pipeline) if job.watch and job.state == "running"), None))
    runs = [job for job in watched.jobs(pipeline) if not job.watch]
    assert [job.state for job in runs] == ["idle"] and runs[0].next_attempt_at is None
    assert watch.handle is not None and "application" not in watch.handle, \
        "a watcher runs outside the tenant's application"
    assert watch.shown_state == "idle", "the API shows the watched pipeline as idle"
    applications = watched.scheduler.backend.applications
    assert applications is not None
    tenant = watched.tenant_of(pipeline)
    watched.wait_for("the tenant's application to exit, hosting nothing", lambda: (
        (applications.describe(tenant) or {}).get("state") == "exited"), timeout_s=60)

    for n in range(3, 5):
        client.xadd(stream, {"value": json.dumps({"n": n})})
    watched.wait_for("the pipeline to resume and read the new entries",
                     lambda: len(seen()) == 5, timeout_s=120)
    ended = watched.job(watch.id)
    assert ended.state == "idle" and ended.next_attempt_at is not None, \
        "the watcher ends idle, due at once"
    watched.change_pipeline(pipeline, desired_state="stopped", stop_mode="checkpoint")
    watched.wait_for("no job of the pipeline to run", lambda: all(
        job.state in ("idle", "stopped") for job in watched.jobs(pipeline)))
    assert seen() == list(range(5)), "entries lost or repeated across the idle period"
    client.close()


def _files_sql() -> str:
    return """
CREATE TABLE events (n BIGINT) WITH (connector = 'filesystem', type = 'source',
    path = 'incoming', format = 'json', 'source.mode' = 'continuous',
    'source.poll_interval' = '1s');
CREATE TABLE out WITH (connector = 'single_file', path = 'files.jsonl', format = 'json',
    type = 'sink');
INSERT INTO out SELECT n FROM events;
"""


def _drop(folder: Path, name: str, numbers: range) -> None:
    """A file appearing whole, as the source wants them: written aside, renamed in."""
    folder.mkdir(parents=True, exist_ok=True)
    aside = folder / f".{name}.tmp"
    aside.write_text("".join(json.dumps({"n": n}) + "\n" for n in numbers))
    os.replace(aside, folder / name)


def test_an_idle_pipeline_on_a_folder_resumes_by_itself_when_a_file_arrives(
        watched: Harness) -> None:
    pipeline = watched.add_pipeline(_files_sql(), desired_state="stopped")
    incoming = watched.output(pipeline, "incoming")
    _drop(incoming, "1.json", range(3))
    watched.change_pipeline(pipeline, desired_state="running")

    def seen() -> list[int]:
        out = watched.output(pipeline, "files.jsonl")
        lines = written_lines(out)
        return [json.loads(line)["n"] for line in lines]

    watched.wait_for("the first file's rows", lambda: len(seen()) == 3)
    watch = watched.wait_for("the quiet pipeline to go idle with a watcher", lambda: next(
        (job for job in watched.jobs(pipeline) if job.watch and job.state == "running"), None))
    runs = [job for job in watched.jobs(pipeline) if not job.watch]
    assert [job.state for job in runs] == ["idle"] and runs[0].next_attempt_at is None
    assert watch.shown_state == "idle", "the API shows the watched pipeline as idle"

    _drop(incoming, "2.json", range(3, 5))
    watched.wait_for("the pipeline to resume and read the new file",
                     lambda: len(seen()) == 5, timeout_s=120)
    ended = watched.job(watch.id)
    assert ended.state == "idle" and ended.next_attempt_at is not None, \
        "the watcher ends idle, due at once"
    watched.change_pipeline(pipeline, desired_state="stopped", stop_mode="checkpoint")
    watched.wait_for("no job of the pipeline to run", lambda: all(
        job.state in ("idle", "stopped") for job in watched.jobs(pipeline)))
    assert seen() == list(range(5)), "rows lost or repeated across the idle period"
