"""``spate serve``: the embedded default — API, scheduler worker, SQLite and local Spark.

One process runs the API (uvicorn), a Celery worker in a thread on the
in-process transport (unless ``SPATE_BROKER_URL`` names a shared broker), and
the periodic reconcile; jobs run as local Spark processes with the embedded
state store. These are the production code paths, wired in one process.

At start it checks that this host can sandbox tenants' jobs (root, bubblewrap,
cgroups; see :mod:`spate.scheduler.sandbox`) and refuses to start when it cannot,
unless ``SPATE_SANDBOX=off`` asks for single-tenant/dev mode, which it says.
It migrates the database, makes sure the embedded tenant exists, issues a
fresh admin key (the previous start's key is revoked) into
``<data_dir>/admin.key`` (mode 0600) and prints the API's URL and that file's
path; the key itself is printed only to a terminal, never into a log. Every
file the server writes is owner-only (umask 077).

On Ctrl-C or SIGTERM it stops the server, asks running jobs to stop after
their epoch in progress commits, and waits for them; pipelines that should run
are started again, from their state, at the next ``spate serve``.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path

import click
import uvicorn
from pydantic import ValidationError

from spate.api import migrate
from spate.api.bootstrap import Bootstrap, bootstrap_tenant
from spate.api.crypto import SecretBox
from spate.api.db import Database, create_database
from spate.api.http.app import API_PREFIX, create_app
from spate.api.repositories.control import SqlControlStore
from spate.api.settings import Settings
from spate.api.worker import check_sandbox, scheduler_client, scheduler_config, worker_app
from spate.scheduler.backends import create_backend
from spate.scheduler.embedded import start_embedded_worker
from spate.scheduler.errors import SchedulerError
from spate.scheduler.service import Scheduler

log = logging.getLogger(__name__)

#: How long shutting down waits for jobs to stop before killing them.
SHUTDOWN_WAIT_S = 60.0
#: How long a killed job (or an application asked to stop) may take to go before it is
#: killed harder (its whole application).
KILL_WAIT_S = 15.0
#: The bootstrap admin key's file in the data folder.
ADMIN_KEY_FILE = "admin.key"


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--tenant", "tenant_name", default="default", show_default=True,
              help="The tenant the printed admin key belongs to (created if absent).")
def serve(host: str, port: int, tenant_name: str) -> None:
    """Run Spate in one process: API, scheduler and local Spark jobs."""
    try:
        settings = Settings()
    except ValidationError as error:
        click.echo(f"error: invalid settings: {error}", err=True)
        sys.exit(2)
    os.umask(0o077)
    check_sandbox(settings)
    migrate.upgrade(settings.database_url)
    database = create_database(settings.database_url)
    try:
        bootstrap = bootstrap_tenant(database, tenant_name)
        worker_celery = worker_app(settings, database)
        try:
            embedded = start_embedded_worker(worker_celery, settings.reconcile_interval_s)
        except SchedulerError as error:
            click.echo(f"error: {error}", err=True)
            sys.exit(1)
        try:
            app = create_app(settings, scheduler=scheduler_client(worker_celery))
            server = uvicorn.Server(uvicorn.Config(app, host=host, port=port,
                                                   log_level="warning", lifespan="on"))
            key_file = write_key_file(settings.data_dir, bootstrap.admin_key)
            _announce_when_up(server, bootstrap, host, port, key_file)
            # uvicorn handles Ctrl-C and SIGTERM while it runs, then raises the signal
            # again on exit; a quiet handler lets the shutdown below run instead.
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, _note_signal)
            server.run()
        finally:
            embedded.stop()
            click.echo("stopping jobs…", err=True)
            stop_jobs(settings, database, SHUTDOWN_WAIT_S)
    finally:
        database.dispose()


def write_key_file(data_dir: Path, key: str) -> Path:
    """The bootstrap admin key in ``<data_dir>/admin.key``, readable by this user only."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = (data_dir / ADMIN_KEY_FILE).resolve()
    path.unlink(missing_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as key_file:
        key_file.write(key + "\n")
    return path


def _announce_when_up(server: uvicorn.Server, bootstrap: Bootstrap, host: str,
                      port: int, key_file: Path) -> None:
    """Print the URLs and where the key is once uvicorn has bound its socket."""

    def announce() -> None:
        while not server.started and not server.should_exit:
            time.sleep(0.05)
        if not server.started:
            return
        base = f"http://{host}:{port or _bound_port(server)}"
        shown = (f"  admin key: {bootstrap.admin_key}\n" if sys.stdout.isatty() else "")
        click.echo(f"Spate is serving at {base}\n"
                   f"  Console:  {base}/\n"
                   f"  API:      {base}{API_PREFIX}\n"
                   f"  API docs: {base}{API_PREFIX}/docs\n"
                   f"  tenant:   {bootstrap.tenant_name}\n"
                   f"  admin key file (revoked at the next start): {key_file}\n"
                   f"{shown}"
                   "Press Ctrl-C to stop.")

    threading.Thread(target=announce, name="spate-announce", daemon=True).start()


def _note_signal(signum: int, frame: object) -> None:
    log.info("signal %s: shutting down", signum)


def _bound_port(server: uvicorn.Server) -> int:
    for listener in server.servers:
        for socket in listener.sockets:
            return int(socket.getsockname()[1])
    return 0


def stop_jobs(settings: Settings, database: Database, wait_s: float) -> None:
    """Ask every live job to stop after its epoch in progress; kill those that do not."""
    config = scheduler_config(settings)
    store = SqlControlStore(database, SecretBox(settings.secret_key, settings.data_dir))
    scheduler = Scheduler(store, create_backend(config), config)
    live = [job.id for pipeline_id in store.pipelines_to_reconcile()
            for job in store.pipeline_jobs(pipeline_id) if not job.terminal]
    live += store.active_preview_ids()
    for job_id in live:
        scheduler.stop(job_id, "checkpoint")
    deadline = time.monotonic() + wait_s
    while live and time.monotonic() < deadline:
        time.sleep(0.5)
        live = [job_id for job_id in live if not _ended(scheduler, job_id)]
    for job_id in live:
        log.warning("job %s did not stop within %s s; killing it", job_id, wait_s)
        scheduler.stop(job_id, "force")
    deadline = time.monotonic() + KILL_WAIT_S
    while live and time.monotonic() < deadline:  # a kill is over when the unit says so
        time.sleep(0.5)
        live = [job_id for job_id in live if not _ended(scheduler, job_id)]
    if scheduler.backend.applications is not None:  # the tenants' applications go too
        scheduler.backend.applications.stop_all(KILL_WAIT_S)
        for job_id in live:  # their applications are gone now, so are they
            _ended(scheduler, job_id)
    try:  # the units' last readings: their final minutes are billed, their groups removed
        scheduler.meter.sample()
    except Exception:  # noqa: BLE001 - shutting down goes on; the next start reads them
        log.exception("the last meter reading at shutdown failed")


def _ended(scheduler: Scheduler, job_id: str) -> bool:
    job = scheduler.reconcile_job(job_id)
    return job is None or job.terminal
