"""How the API tells the scheduler that desired state changed.

The API records desired state in the database; the scheduler makes it real.
After each committed change a route pokes the scheduler through a
:class:`Scheduler` (``spate.scheduler.client.SchedulerClient`` in a deployment). A
poke is only a hint that work is waiting: the scheduler's periodic reconcile
finds every change anyway, so a poke that fails is logged and forgotten, and
never turns a recorded change into an error for the caller.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

logger = logging.getLogger(__name__)


class Scheduler(Protocol):
    """What the API calls on the scheduler (``spate.scheduler.client.SchedulerClient``)."""

    def pipeline_changed(self, pipeline_id: str) -> None: ...

    def job_changed(self, job_id: str) -> None: ...

    def tenant_active(self, tenant_id: str) -> None: ...


class SchedulerNotifier:
    """Pokes the scheduler, if the app has one, without ever failing the request."""

    def __init__(self, scheduler: Scheduler | None) -> None:
        self.scheduler = scheduler

    def pipeline_changed(self, pipeline_id: str) -> None:
        if self.scheduler is not None:
            self._poke(self.scheduler.pipeline_changed, pipeline_id)

    def job_changed(self, job_id: str) -> None:
        if self.scheduler is not None:
            self._poke(self.scheduler.job_changed, job_id)

    def tenant_active(self, tenant_id: str) -> None:
        if self.scheduler is not None:
            self._poke(self.scheduler.tenant_active, tenant_id)

    @staticmethod
    def _poke(poke: Callable[[str], None], item_id: str) -> None:
        # The client already drops broker outages; this also keeps any other failure
        # from turning a committed change into an error response.
        try:
            poke(item_id)
        except Exception:  # noqa: BLE001 - the periodic reconcile catches up
            logger.warning("could not notify the scheduler; the next reconcile will catch up",
                           exc_info=True, extra={"item_id": item_id})
