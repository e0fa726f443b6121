"""A Celery worker inside the current process, for ``spate serve`` and the tests.

:func:`start_embedded_worker` runs a real worker (solo pool: one task at a
time, in one thread) consuming the app's queue, plus a ticker thread that
sends the app's periodic tasks on their periods (``spate.reconcile_all`` every
``reconcile_interval_s``, ``spate.meter`` every ``meter_interval_s``), as Celery
beat would otherwise do. With the memory transport the API's pokes
and the worker meet inside the process; with Redis it is an ordinary worker
that happens to run in a thread.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

from celery import Celery
from celery.utils.nodenames import anon_nodename
from celery.worker import WorkController
from celery.worker import state as worker_state

from spate.scheduler.app import RECONCILE_ALL
from spate.scheduler.errors import SchedulerError

log = logging.getLogger(__name__)

#: How long to wait for the worker to consume, and to shut down.
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0


class _ThreadedWorkController(WorkController):  # type: ignore[misc]
    """A worker that tells when its consumer is ready."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.ready = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: object) -> None:
        self.ready.set()


@dataclass
class EmbeddedWorker:
    """A running embedded worker; :meth:`stop` ends it."""

    app: Celery
    worker: WorkController
    thread: threading.Thread
    ticker: threading.Thread
    _stopping: threading.Event

    def stop(self) -> None:
        """Stop ticking, let the task in progress finish, end the worker."""
        self._stopping.set()
        self.ticker.join(STOP_TIMEOUT_S)
        # The worker's loop checks this flag between events (as celery's own
        # test worker does); stop() from another thread would not wake it.
        worker_state.should_terminate = 0
        self.thread.join(STOP_TIMEOUT_S)
        worker_state.should_terminate = None
        if self.thread.is_alive():
            log.warning("embedded worker did not stop within %s s", STOP_TIMEOUT_S)


def start_embedded_worker(app: Celery, reconcile_interval_s: float | None = None
                          ) -> EmbeddedWorker:
    """Start a worker for ``app`` (its tasks registered) in this process."""
    periods = {entry["task"]: float(entry["schedule"])
               for entry in app.conf.beat_schedule.values()}
    if reconcile_interval_s:
        periods[RECONCILE_ALL] = reconcile_interval_s
    app.finalize()
    worker = _ThreadedWorkController(
        app=app, hostname=anon_nodename(hostname="spate-embedded"), concurrency=1, pool="solo",
        loglevel="WARNING", without_heartbeat=True, without_mingle=True, without_gossip=True,
        queues=[app.conf.task_default_queue])
    thread = threading.Thread(target=_run, args=(app, worker), name="spate-worker",
                              daemon=True)
    thread.start()
    if not worker.ready.wait(START_TIMEOUT_S):
        worker_state.should_terminate = 0
        raise SchedulerError(f"the embedded worker did not start within {START_TIMEOUT_S} s "
                             "(is the broker reachable?)")
    stopping = threading.Event()
    ticker = threading.Thread(target=_tick, args=(app, periods, stopping),
                              name="spate-reconcile-ticker", daemon=True)
    ticker.start()
    return EmbeddedWorker(app=app, worker=worker, thread=thread, ticker=ticker,
                          _stopping=stopping)


def _run(app: Celery, worker: WorkController) -> None:
    # Celery finds a task's app through the thread's current app when it runs it.
    app.set_current()
    worker.start()


def _tick(app: Celery, periods: dict[str, float], stopping: threading.Event) -> None:
    """Send each task in ``periods`` (task name -> seconds) once per its period."""
    due = {task: time.monotonic() + period for task, period in periods.items()}
    while not stopping.wait(max(0.0, min(due.values()) - time.monotonic())):
        now = time.monotonic()
        for task, at in due.items():
            if at > now:
                continue
            due[task] = now + periods[task]
            try:
                app.send_task(task)
            except Exception as error:  # the broker may blink; the next tick tries again
                log.warning("could not send the periodic task %s: %s", task, error)
