"""How the API pokes the scheduler: fire-and-forget tasks on the broker.

A poke only says "look at this now"; the desired state is already in the
database. If the broker is down the poke is dropped with a warning, and the
periodic reconcile (``reconcile_interval_s``) picks the change up anyway.
"""

from __future__ import annotations

import logging

from celery import Celery
from kombu.exceptions import OperationalError

from spate.scheduler.app import RECONCILE_JOB, RECONCILE_PIPELINE, WARM

log = logging.getLogger(__name__)

#: A poke is retried once, after this many seconds, before it is dropped.
PUBLISH_RETRY_S = 1.0


class SchedulerClient:
    """Sends the scheduler's tasks through ``app`` (:func:`~spate.scheduler.app.create_celery`)."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def pipeline_changed(self, pipeline_id: str) -> None:
        """The pipeline's desired state changed: start, stop, restart or rescale it."""
        self._send(RECONCILE_PIPELINE, pipeline_id)

    def job_changed(self, job_id: str) -> None:
        """The job changed (a preview was created, or asked to stop): act on it."""
        self._send(RECONCILE_JOB, job_id)

    def tenant_active(self, tenant_id: str) -> None:
        """The tenant is writing SQL: a preview or a pipeline may follow, so its
        application may start now (a no-op where it runs, or without applications)."""
        self._send(WARM, tenant_id)

    def _send(self, task: str, item_id: str) -> None:
        try:
            self.app.send_task(task, args=[item_id], retry=True, retry_policy={
                "max_retries": 1, "interval_start": 0, "interval_step": PUBLISH_RETRY_S,
                "interval_max": PUBLISH_RETRY_S})
        except (OperationalError, OSError) as error:
            log.warning("scheduler not reached (%s for %s: %s); the periodic reconcile will "
                        "catch up", task, item_id, error)
