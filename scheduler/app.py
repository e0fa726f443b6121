"""The Celery app: built by a factory, tasks bound to one :class:`Scheduler`.

:func:`create_celery` makes an app that can *send* tasks (all the API needs);
:func:`register_tasks` adds the tasks a worker runs, bound to a scheduler, and
the beat schedule of the periodic reconcile. Tasks are named ``spate.*`` and
take ids, never objects, so any worker can run any of them; each one reads the
current rows and acts only on what is still needed, so running one twice, or
on two workers at once, is harmless.

Tasks:

- ``spate.reconcile_all`` — every ``reconcile_interval_s`` (beat): every
  pipeline that wants to run or has a live job, every live preview.
- ``spate.reconcile_pipeline(pipeline_id)`` — one pipeline: starts, stops,
  restarts (a raised ``restart_generation``) and rescales (another
  ``parallelism`` or checkpoint interval) all follow from its desired state.
- ``spate.restart(pipeline_id)`` and ``spate.rescale(pipeline_id)`` — the same
  reconcile, named for what the caller wants.
- ``spate.reconcile_job(job_id)`` and ``spate.start(job_id)`` — one job:
  ingest its channel, check its process, launch, restart after backoff.
- ``spate.stop(job_id, mode)`` — record the stop request and act on it.
- ``spate.checkpoint(job_id)`` — record the newest epoch the state store
  committed for the job (see :meth:`Scheduler.checkpoint`).
- ``spate.meter`` — every ``meter_interval_s`` (beat): read every compute unit
  and charge its jobs' usage (:mod:`spate.scheduler.metering`).
- ``spate.warm(tenant_id)`` — start the tenant's application ahead of its first
  job, when the API sees one coming (its SQL validated).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from celery import Celery

from spate.scheduler.service import Scheduler

#: Broker URL of the in-process transport (``spate serve``: API and worker in one process).
MEMORY_BROKER = "memory://localhost/"
DEFAULT_QUEUE = "spate"

RECONCILE_ALL = "spate.reconcile_all"
RECONCILE_PIPELINE = "spate.reconcile_pipeline"
RECONCILE_JOB = "spate.reconcile_job"
START = "spate.start"
STOP = "spate.stop"
RESTART = "spate.restart"
RESCALE = "spate.rescale"
CHECKPOINT = "spate.checkpoint"
METER = "spate.meter"
WARM = "spate.warm"


def create_celery(broker_url: str | None = None, *, queue: str = DEFAULT_QUEUE,
                  key_prefix: str | None = None, reconcile_interval_s: float = 5.0,
                  meter_interval_s: float = 15.0, beat_schedule_path: str | None = None) -> Celery:
    """A Celery app on ``broker_url`` (None: the in-process memory transport).

    ``key_prefix`` prefixes every key the Redis transport writes (so several
    deployments, or test runs, share one Redis); tasks go to ``queue``.
    """
    app = Celery("spate", broker=broker_url or MEMORY_BROKER, set_as_current=False)
    transport_options: dict[str, Any] = {}
    if key_prefix:
        transport_options["global_keyprefix"] = key_prefix
    app.conf.update(
        task_default_queue=queue,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        # A task is acknowledged after it ran: a worker that dies mid-task leaves it
        # to another (tasks are idempotent, so running one twice is harmless).
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        worker_hijack_root_logger=False,
        broker_connection_retry_on_startup=True,
        broker_transport_options=transport_options,
        beat_schedule={"reconcile-all": {"task": RECONCILE_ALL,
                                         "schedule": reconcile_interval_s},
                       "meter": {"task": METER, "schedule": meter_interval_s}},
        enable_utc=True,
    )
    if beat_schedule_path:
        app.conf.beat_schedule_filename = beat_schedule_path
    return app


def register_tasks(app: Celery, scheduler: Scheduler) -> None:
    """Add the scheduler's tasks to ``app`` (what a worker runs)."""

    def reconcile_job(job_id: str) -> None:
        job = scheduler.reconcile_job(job_id)
        # A job that ended may be the one a restart or rescale waits for.
        if job is not None and job.terminal and job.pipeline_id is not None:
            scheduler.reconcile_pipeline(job.pipeline_id)

    tasks: dict[str, Callable[..., Any]] = {
        RECONCILE_ALL: scheduler.reconcile_all,
        RECONCILE_PIPELINE: scheduler.reconcile_pipeline,
        RESTART: scheduler.reconcile_pipeline,
        RESCALE: scheduler.reconcile_pipeline,
        RECONCILE_JOB: reconcile_job,
        START: reconcile_job,
        STOP: scheduler.stop,
        CHECKPOINT: scheduler.checkpoint,
        METER: scheduler.meter_all,
        WARM: scheduler.warm,
    }
    for name, function in tasks.items():
        # Not shared: each app runs its own scheduler (a shared task joins every app).
        app.task(name=name, shared=False)(_returning_plain(function))


def _returning_plain(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` returning only JSON-able values (a job view becomes nothing)."""

    def task(*args: Any) -> Any:
        result = function(*args)
        return result if result is None or isinstance(result, int | str) else None

    task.__name__ = task.__qualname__ = getattr(function, "__name__", "task")
    return task
