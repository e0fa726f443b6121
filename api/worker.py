"""The scheduler's Celery apps built from settings, and the ``spate worker`` command.

- :func:`celery_app`: an app that only sends tasks (what the API needs to poke
  the scheduler; wrap it in :func:`scheduler_client`).
- :func:`worker_app`: an app with the scheduler's tasks, bound to the
  control-plane database through :class:`~spate.api.repositories.control.SqlControlStore` (the
  scheduler itself never imports ``api``).
- ``spate worker``: runs a worker (with the periodic reconcile, by default)
  on ``SPATE_BROKER_URL``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Collection
from dataclasses import fields
from typing import Any
from urllib.parse import urlsplit

import click
from celery import Celery
from pydantic import ValidationError

from spate.api.billing import PriceBook
from spate.api.crypto import SecretBox
from spate.api.db import Database, create_database
from spate.api.repositories.control import SqlControlStore
from spate.api.settings import Settings, egress_entries
from spate.engine.connectors.core.egress import Endpoint
from spate.scheduler.app import create_celery, register_tasks
from spate.scheduler.backends import create_backend
from spate.scheduler.client import SchedulerClient
from spate.scheduler.config import KubernetesConfig, SchedulerConfig, parse_clusters
from spate.scheduler.errors import SchedulerError
from spate.scheduler.sandbox.unit import sandbox_problem
from spate.scheduler.service import Scheduler

log = logging.getLogger(__name__)


def scheduler_config(settings: Settings) -> SchedulerConfig:
    """The scheduler's deployment settings, paths made absolute."""
    secrets = SecretBox(settings.secret_key, settings.data_dir)
    converted_k8s: dict[str, Any] = {
        "job_cidrs": tuple(egress_entries(settings.k8s_job_cidrs)),
        "channel_redis_url": settings.redis_url or _redis_broker(settings)}
    kubernetes = KubernetesConfig(
        **same_named_settings(settings, KubernetesConfig, exclude=converted_k8s,
                              prefix=KUBERNETES_PREFIX, defaulted=DEFAULTED_KUBERNETES_FIELDS),
        **converted_k8s)
    converted: dict[str, Any] = {
        "spark_clusters": parse_clusters(settings.spark_clusters), "kubernetes": kubernetes,
        "sandbox": settings.sandbox == "required", "applications": settings.applications == "on",
        "idle_stop_s": settings.idle_stop_s or None,
        "egress_allow": tuple(egress_entries(settings.egress_allow)),
        "control_plane": control_plane_endpoints(settings),
        # Only a PostgreSQL state store has per-tenant roles whose passwords derive from it.
        "state_role_secret": (secrets.derive("state-store roles")
                              if settings.state_url.startswith("postgres") else b""),
    }
    return SchedulerConfig(**same_named_settings(settings, SchedulerConfig, exclude=converted),
                           **converted).resolved()


#: The scheduler's fields the service leaves at their defaults (no setting of their own).
DEFAULTED_SCHEDULER_FIELDS = frozenset({"checkpoint_root", "kill_timeout_s", "spark_conf"})
DEFAULTED_KUBERNETES_FIELDS = frozenset({"tenant_pods"})
#: The settings of the kubernetes backend are its KubernetesConfig fields' names after this.
KUBERNETES_PREFIX = "k8s_"


def same_named_settings(settings: Settings, config: type[Any], exclude: Collection[str],
                        prefix: str = "", defaulted: Collection[str] = DEFAULTED_SCHEDULER_FIELDS
                        ) -> dict[str, Any]:
    """The fields of ``config`` (a scheduler dataclass) that the setting of the same name
    (after ``prefix``) gives as it is: declared once per side, never copied by hand (a
    test keeps every field accounted for)."""
    return {f.name: getattr(settings, prefix + f.name) for f in fields(config)
            if f.name not in exclude and f.name not in defaulted}


def control_plane_endpoints(settings: Settings) -> tuple[Endpoint, ...]:
    """The network endpoints of the control plane: its database, broker, Redis and state
    store, which no tenant's connector may reach."""
    endpoints = []
    for url in (settings.database_url, settings.broker_url, settings.redis_url,
                settings.state_url):
        endpoint = endpoint_of(url) if url else None
        if endpoint is not None:
            endpoints.append(endpoint)
    return tuple(endpoints)


def endpoint_of(url: str) -> Endpoint | None:
    """Host, port and database of a postgresql:// or redis:// URL (None: not networked)."""
    parts = urlsplit(url)
    scheme = parts.scheme.split("+", 1)[0].lower()
    defaults = {"postgresql": 5432, "postgres": 5432, "redis": 6379, "rediss": 6379}
    if scheme not in defaults or not parts.hostname:
        return None
    database = parts.path.strip("/") or None
    if scheme.startswith("redis"):
        database = database or "0"
    return Endpoint(parts.hostname, parts.port or defaults[scheme], database)


def celery_app(settings: Settings) -> Celery:
    """A Celery app on the settings' broker that sends the scheduler's tasks."""
    config = scheduler_config(settings)
    return create_celery(
        settings.broker_url, queue=settings.scheduler_queue,
        key_prefix=settings.redis_key_prefix if settings.broker_url else None,
        reconcile_interval_s=settings.reconcile_interval_s,
        meter_interval_s=settings.meter_interval_s,
        beat_schedule_path=str(config.data_dir / "celerybeat-schedule"))


def scheduler_client(app: Celery) -> SchedulerClient:
    """What the API calls to poke the scheduler."""
    return SchedulerClient(app)


def worker_app(settings: Settings, database: Database | None = None) -> Celery:
    """A Celery app whose tasks run the scheduler over the settings' database."""
    config = scheduler_config(settings)
    warn_about_state(config)
    config.data_dir.mkdir(parents=True, exist_ok=True)  # beat keeps its schedule there
    app = celery_app(settings)
    store = SqlControlStore(database or create_database(settings.database_url),
                            SecretBox(settings.secret_key, settings.data_dir),
                            PriceBook.parse(settings.price_book))
    register_tasks(app, Scheduler(store, create_backend(config), config))
    return app


def warn_about_state(config: SchedulerConfig) -> None:
    """Say at start-up what every job on this cluster will fail with."""
    if config.cluster_backend != "local" and config.state_url.startswith("sqlite:"):
        # Jobs are still scheduled: each fails with the engine's own message, which is
        # what the tenant sees on the job.
        log.warning("the %s backend with sqlite state: every job will fail, as a cluster's "
                    "executors cannot reach an embedded state store; set SPATE_STATE_URL to "
                    "postgresql://… or fdb://", config.cluster_backend)


def check_sandbox(settings: Settings) -> None:
    """Refuse to run untrusted tenants' jobs on a host that cannot sandbox them (exit 2),
    and say so when sandboxing is off."""
    if settings.sandbox == "off":
        click.echo("warning: SPATE_SANDBOX=off: single-tenant/dev mode. Jobs run as this "
                   "process's user with its file access; only the first tenant exists. Never "
                   "offer this server to tenants you do not trust.", err=True)
        return
    problem = sandbox_problem() if settings.cluster_backend != "kubernetes" else None
    if problem is not None:
        click.echo(f"error: this host cannot sandbox tenants' jobs: {problem}.\n"
                   "Run as root with bubblewrap installed and writable cpu and memory "
                   "cgroups, or set SPATE_SANDBOX=off for single-tenant/dev mode.", err=True)
        sys.exit(2)


def _redis_broker(settings: Settings) -> str | None:
    broker = settings.broker_url
    return broker if broker and broker.startswith(("redis://", "rediss://")) else None


@click.command("worker")
@click.option("--concurrency", "-c", default=2, show_default=True, type=click.IntRange(1, 64),
              help="Tasks run at once (threads).")
@click.option("--beat/--no-beat", default=True, show_default=True,
              help="Also send the periodic reconcile (run it in one worker only).")
@click.option("--loglevel", default="INFO", show_default=True)
def worker(concurrency: int, beat: bool, loglevel: str) -> None:
    """Run a scheduler worker on SPATE_BROKER_URL: start, stop, restart and watch jobs."""
    try:
        settings = Settings()
        os.umask(0o077)  # what the worker writes (specs, job folders) is owner-only
        check_sandbox(settings)
        if settings.broker_url is None or settings.broker_url.startswith("memory://"):
            raise click.UsageError("spate worker needs a shared broker: set SPATE_BROKER_URL "
                                   "to redis://host:port/db (the in-process transport only "
                                   "works inside `spate serve`)")
        app = worker_app(settings)
    except (ValidationError, SchedulerError) as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
    # Pool threads find the app that runs their tasks as the process's default.
    app.set_default()
    # Threads, not forks: a task mostly waits on the database, the broker or a process.
    app.Worker(pool="threads", concurrency=concurrency, beat=beat, loglevel=loglevel,
               queues=[settings.scheduler_queue]).start()
