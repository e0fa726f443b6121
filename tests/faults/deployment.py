"""The deployment the fault scenarios hit: one ``spate serve`` (PostgreSQL control plane,
PostgreSQL state, Redis broker, sandboxed tenant applications) with two tenants, each
running a pipeline that copies a Redis stream into an exactly-once file sink, fed
numbered entries at a steady rate for the whole suite.

Tenant ``a`` is the server's bootstrap tenant (its admin key changes at each start of
the server); tenant ``b`` is created with the platform admin key and is the
neighbour every scenario checks is left alone.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import redis

from spate.scheduler.backends import process
from tests.api.serving import ServeProcess, wait_for
from tests.faults.processes import (
    application_jobs,
    application_record,
    has_driver,
    stray_processes,
)
from tests.faults.servers import SmallVolume

PLATFORM_KEY = "pk-" + secrets.token_urlsafe(32)
#: Memory limit of a tenant's application: room for its JVM (2 GB heap at most) and
#: Python processes in normal work, not for a burst of values of hundreds of MB.
APPLICATION_MEMORY_MB = 1536
#: Job states in which the control plane holds a job's query as running.
ACTIVE_STATES = ("starting", "running", "stopping")
#: The pipeline every tenant runs, and where its rows land in the tenant's storage.
COPY = "copy"
OUTPUT = "out/copy.jsonl"

COPY_SQL = """
CREATE TABLE events (n BIGINT) WITH (connector = 'redis', type = 'source',
    address = '{address}', stream = '{stream}', format = 'json',
    'source.offset' = 'earliest');
CREATE TABLE out WITH (connector = 'single_file', path = '{path}', format = 'json',
    type = 'sink');
INSERT INTO out SELECT n FROM events;
"""


class NotResumedError(AssertionError):
    """A pipeline failed for good after a fault instead of resuming by itself."""


@dataclass
class Tenant:
    """A tenant of the server: its key, its input stream and its storage root."""

    label: str
    id: str
    key: str
    stream: str
    storage: Path

    @property
    def output(self) -> Path:
        return self.storage / OUTPUT


class Feed:
    """Entries ``{"n": 0}``, ``{"n": 1}``, … added to every tenant's stream at ``rate_per_s``
    from a thread; :attr:`produced` counts those in every stream."""

    def __init__(self, address: str, streams: list[str], rate_per_s: float) -> None:
        self.client = redis.Redis.from_url(address)
        self.streams = streams
        self.interval_s = 1.0 / rate_per_s
        self.produced = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="faults-feed", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.client.close()

    def burst(self, count: int) -> None:
        """Add the next ``count`` entries at once (an epoch's worth of work for seconds)."""
        with self._lock:
            pipe = self.client.pipeline(transaction=False)
            for n in range(self.produced, self.produced + count):
                for stream in self.streams:
                    pipe.xadd(stream, {"value": json.dumps({"n": n})})
            pipe.execute()
            self.produced += count

    def _run(self) -> None:
        due = time.monotonic()
        while not self._stop.is_set():
            with self._lock:
                pipe = self.client.pipeline(transaction=False)
                for stream in self.streams:
                    pipe.xadd(stream, {"value": json.dumps({"n": self.produced})})
                pipe.execute()
                self.produced += 1
            due = max(due + self.interval_s, time.monotonic())  # no catching up after a burst
            self._stop.wait(max(0.0, due - time.monotonic()))


@dataclass
class Spate:
    """The server under test and what it runs."""

    base: Path
    env: dict[str, str]
    redis_address: str
    serve: ServeProcess | None = None
    tenants: dict[str, Tenant] = field(default_factory=dict)
    feed: Feed | None = None
    #: tenant ``a``'s storage volume
    volume: SmallVolume | None = None
    starts: int = 0

    # -- the server ----------------------------------------------------------------------

    def start_serve(self) -> ServeProcess:
        """Start ``spate serve`` (again), in a folder of its own for its log; tenant
        ``a``'s key is the new one it issues."""
        self.starts += 1
        workdir = self.base / f"serve-{self.starts}"
        workdir.mkdir()
        self.serve = ServeProcess(workdir, self.env)
        if "a" in self.tenants:
            self.tenants["a"].key = self.serve.admin_key
        return self.serve

    def kill_serve(self) -> None:
        """``kill -9`` the server's process (alone: not its process group)."""
        assert self.serve is not None
        self.serve.http.close()
        os.kill(self.serve.process.pid, signal.SIGKILL)
        self.serve.process.wait(30)

    @property
    def url(self) -> str:
        assert self.serve is not None
        return self.serve.url + "/api/v1"

    @property
    def data_dir(self) -> Path:
        return Path(self.env["SPATE_DATA_DIR"])

    def call(self, tenant: Tenant, method: str, path: str, **kwargs: Any) -> httpx.Response:
        with httpx.Client(base_url=self.url, timeout=30,
                          headers={"Authorization": f"Bearer {tenant.key}"}) as client:
            return client.request(method, path, **kwargs)

    def ok(self, tenant: Tenant, method: str, path: str, **kwargs: Any) -> Any:
        response = self.call(tenant, method, path, **kwargs)
        assert response.status_code < 300, f"{method} {path}: {response.text}"
        return response.json() if response.content else None

    def log(self) -> str:
        return self.serve.log() if self.serve is not None else ""

    # -- pipelines and jobs --------------------------------------------------------------

    def create_pipeline(self, tenant: Tenant, name: str, sql: str) -> dict[str, Any]:
        created: dict[str, Any] = self.ok(tenant, "POST", "/pipelines",
                                          json={"name": name, "sql": sql})
        return created

    def copy_sql(self, tenant: Tenant) -> str:
        return COPY_SQL.format(address=self.redis_address, stream=tenant.stream, path=OUTPUT)

    def job(self, tenant: Tenant, pipeline: str = COPY) -> dict[str, Any] | None:
        """The pipeline's current job as the API shows it."""
        job: dict[str, Any] | None = self.ok(tenant, "GET", f"/pipelines/{pipeline}")["job"]
        return job

    def running_job(self, tenant: Tenant, pipeline: str = COPY,
                    timeout_s: float = 120.0) -> dict[str, Any]:
        """Wait for the pipeline's job to be running; it (a failed job fails the wait)."""

        def running() -> dict[str, Any] | None:
            job = self.job(tenant, pipeline)
            if job is not None and job["state"] == "failed":
                raise AssertionError(f"tenant {tenant.label}'s {pipeline} failed: "
                                     f"{job['failure_message']}")
            return job if job is not None and job["state"] == "running" else None

        found: dict[str, Any] = wait_for(f"tenant {tenant.label}'s {pipeline} to run",
                                         running, timeout_s)
        return found

    def jobs(self, tenant: Tenant) -> list[dict[str, Any]]:
        jobs: list[dict[str, Any]] = self.ok(tenant, "GET", "/jobs",
                                             params={"limit": 200})["items"]
        return jobs

    def errors(self, tenant: Tenant, job_id: str) -> list[str]:
        items = self.ok(tenant, "GET", f"/jobs/{job_id}/errors", params={"limit": 200})["items"]
        return [f"{item['message']} {item['detail']}" for item in items]

    def delete_pipeline(self, tenant: Tenant, name: str) -> None:
        response = self.call(tenant, "DELETE", f"/pipelines/{name}", params={"force": "true"})
        assert response.status_code == 204, response.text

    def restore(self, timeout_s: float = 180.0) -> list[str]:
        """Bring back what a scenario left broken, as an operator would, until every
        tenant's copy pipeline runs: a failed one is restarted from its committed state
        (in a new application if the tenant's current one lost its Spark driver). What
        was repaired."""
        repaired: list[str] = []
        deadline = time.monotonic() + timeout_s
        while True:
            jobs = {label: self.job(tenant) for label, tenant in self.tenants.items()}
            if all(job is not None and job["state"] == "running" for job in jobs.values()):
                return repaired
            assert time.monotonic() < deadline, f"not restored: {jobs}"
            for label, job in jobs.items():
                if job is not None and job["state"] == "failed":
                    self._restart_failed(self.tenants[label])
                    repaired.append(f"tenant {label}'s {COPY} ({job['failure_message']})")
            time.sleep(1.0)

    def _restart_failed(self, tenant: Tenant) -> None:
        application = application_record(self.data_dir, tenant.id)
        if application is not None and not has_driver(self.data_dir, tenant.id):
            process.kill(application)  # its Spark driver is gone: it is of no use
        self.ok(tenant, "POST", f"/pipelines/{COPY}/restart", json={"with_state": True})

    # -- output --------------------------------------------------------------------------

    def produced(self) -> int:
        assert self.feed is not None
        return self.feed.produced

    def fresh_output(self, tenant: Tenant, since: int, what: str,
                     timeout_s: float = 120.0, ask_api: bool = True) -> float:
        """Wait until the tenant's output holds an entry numbered ``since`` or later
        (produced at or after the moment ``since`` was read); the monotonic time then.
        A failed copy job (``ask_api``: the API is asked every second) ends the wait at
        once: it will not resume by itself."""
        checked = 0.0

        def arrived() -> bool:
            nonlocal checked
            if max(seen(tenant.output), default=-1) >= since:
                return True
            if ask_api and time.monotonic() - checked > 1.0:
                checked = time.monotonic()
                job = self.job(tenant)
                if job is not None and job["state"] == "failed":
                    raise NotResumedError(f"{what}: tenant {tenant.label}'s {COPY} failed "
                                          f"instead: {job['failure_message']}")
            return False

        wait_for(f"{what}: tenant {tenant.label}'s output to reach entry {since}", arrived,
                 timeout_s, 0.1)
        return time.monotonic()

    def assert_exactly_once(self, tenant: Tenant, timeout_s: float = 120.0) -> int:
        """Every entry produced so far reaches the tenant's output, none of them twice;
        how many were checked."""
        upto = self.produced()
        try:
            wait_for(f"tenant {tenant.label}'s output to hold entries 0..{upto - 1}",
                     lambda: not incomplete(seen(tenant.output), upto), timeout_s, 0.2)
        except AssertionError as error:
            missing = sorted(set(range(upto)) - set(seen(tenant.output)))
            job = self.job(tenant)
            raise AssertionError(f"{error}; {len(missing)} missing, from {missing[:5]} to "
                                 f"{missing[-5:]}; its job: {job}") from None
        counts = Counter(seen(tenant.output))
        twice = sorted(n for n, count in counts.items() if count > 1)
        assert not twice, f"tenant {tenant.label}: entries written more than once: {twice[:20]}"
        assert max(counts) < self.produced(), "an entry nobody produced"
        return upto

    # -- what runs -----------------------------------------------------------------------

    def orphans(self) -> list[str]:
        """Queries an application runs that the control plane does not hold as running,
        and processes of a tenant's user outside its current application."""
        found = []
        for tenant in self.tenants.values():
            active = {job["id"] for job in self.jobs(tenant) if job["state"] in ACTIVE_STATES}
            running = application_jobs(self.data_dir, tenant.id)
            found += [f"tenant {tenant.label}: query of job {job_id} runs, but the API shows "
                      "it ended" for job_id in sorted(running - active)]
            found += [f"tenant {tenant.label}: process {line} outside its application"
                      for line in stray_processes(self.data_dir, tenant.id)]
        return found

    def assert_no_orphans(self, timeout_s: float = 30.0) -> None:
        """Within a few reconciles, nothing runs that the control plane does not hold as
        running."""
        deadline = time.monotonic() + timeout_s
        while (found := self.orphans()) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not found, "orphans survive:\n" + "\n".join(found)


def seen(path: Path) -> list[int]:
    """The numbers in a copy pipeline's output file (complete lines only)."""
    try:
        text = path.read_bytes()
    except FileNotFoundError:
        return []
    return [int(json.loads(line)["n"]) for line in text.split(b"\n")[:-1] if line]


def incomplete(numbers: list[int], upto: int) -> bool:
    """Whether some number below ``upto`` is not among ``numbers``."""
    return len(set(numbers) & set(range(upto))) < upto


def eventually(what: str, check: Callable[[], Any], timeout_s: float = 60.0) -> Any:
    """:func:`wait_for` with a deadline fit for this suite."""
    return wait_for(what, check, timeout_s, 0.25)
