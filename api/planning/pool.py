"""Planning SQL (and reading UDF files) outside the API process, within a time and memory
budget per request.

A tenant's SQL can be expensive to plan (a 60,000-term expression takes
seconds and much memory), and planning in the API's own process would stall
every other tenant's requests. So the API hands each plan to a pool of worker
processes and waits. The pool is pebble's ``ProcessPool`` on the
``forkserver`` start method: workers fork from a clean server process that has
imported the planner already, so they start in milliseconds and inherit no
lock held by one of the API's threads.

- **Time.** A plan over ``plan_timeout_s`` is abandoned (pebble kills its
  worker and starts another) and the request is a 422 naming the budget.
- **Memory.** Each worker's data segment is capped at its size after start-up
  plus ``plan_memory_mb``; a plan that needs more fails in its worker with
  MemoryError, also a 422 naming the budget.
- **Fairness.** A tenant has at most ``plan_per_tenant`` plans running and a
  few more waiting; beyond that its requests are 429s, so one tenant cannot
  hold the pool or the API's threads. Workers run at a lower CPU priority
  than the API, which keeps answering other tenants while they plan.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import resource
import threading
from collections.abc import Callable
from concurrent.futures import TimeoutError as FutureTimeoutError
from dataclasses import dataclass
from typing import Any, TypeVar

from pebble import ProcessExpired, ProcessPool

from spate.api.http.errors import ApiError, InvalidSqlError
from spate.api.planning.sql import PlanAnswer, PlanRequest, plan_request
from spate.api.planning.state import UpdatePlanAnswer, UpdatePlanRequest, plan_update
from spate.api.planning.udfs import (
    UdfCallersRequest,
    UdfCheckAnswer,
    UdfCheckRequest,
    check_udf,
    udf_callers,
)
from spate.api.settings import Settings

log = logging.getLogger(__name__)

#: Plans of a tenant that may wait for a turn, on top of those running.
WAITING_PER_TENANT = 4
#: Niceness of planning workers: the API's own threads come first.
WORKER_NICENESS = 10
T = TypeVar("T")


class PlanningBudgetError(ApiError):
    """A plan that needed more time or memory than a request may use."""

    status_code, code = 422, "planning_budget_exceeded"


class PlanningBusyError(ApiError):
    """A tenant with as many plans under way as it may have."""

    status_code, code = 429, "planning_busy"

    def __init__(self, running: int) -> None:
        super().__init__(
            f"too many of your plans are under way at once (plan_per_tenant: {running} "
            f"running, {WAITING_PER_TENANT} waiting); retry when one has finished",
            headers={"Retry-After": "1"})


@dataclass(frozen=True)
class PlanningBudget:
    timeout_s: float
    memory_mb: int
    workers: int
    per_tenant: int


class PlanningPool:
    """The API's planning processes, and who may use them when."""

    def __init__(self, budget: PlanningBudget) -> None:
        self.budget = budget
        self._pool: ProcessPool | None = None
        self._lock = threading.Lock()
        self._running: dict[str, threading.BoundedSemaphore] = {}
        self._in_flight: dict[str, int] = {}

    def plan(self, tenant_id: str, request: PlanRequest) -> PlanAnswer:
        """Plan ``request`` for ``tenant_id`` within the budget (blocking this thread)."""
        return self._in_turn(tenant_id, plan_request, request)

    def plan_update(self, tenant_id: str, request: UpdatePlanRequest) -> UpdatePlanAnswer:
        """Plan new SQL for a pipeline and judge its state, within the same budget
        (both SQL texts are planned in one worker, one turn)."""
        return self._in_turn(tenant_id, plan_update, request)

    def check_udf(self, tenant_id: str, request: UdfCheckRequest) -> UdfCheckAnswer:
        """Read a UDF file as ``spate run --udf`` does (never running it), in the same
        budget: a file can be made as expensive to parse as SQL."""
        return self._in_turn(tenant_id, check_udf, request)

    def udf_callers(self, tenant_id: str, request: UdfCallersRequest) -> list[str]:
        """The pipelines among ``request``'s whose SQL calls its UDF."""
        return self._in_turn(tenant_id, udf_callers, request)

    def _in_turn(self, tenant_id: str, function: Callable[[Any], T], request: Any) -> T:
        """Run ``function(request)`` in a worker once ``tenant_id`` has a turn."""
        turn = self._admit(tenant_id)
        try:
            if not turn.acquire(timeout=self.budget.timeout_s):
                raise PlanningBusyError(self.budget.per_tenant)
            try:
                return self._run(function, request)
            finally:
                turn.release()
        finally:
            with self._lock:
                self._in_flight[tenant_id] -= 1

    @classmethod
    def from_settings(cls, settings: Settings) -> PlanningPool:
        return cls(PlanningBudget(timeout_s=settings.plan_timeout_s,
                                  memory_mb=settings.plan_memory_mb,
                                  workers=settings.plan_workers,
                                  per_tenant=settings.plan_per_tenant))

    def require_valid(self, tenant_id: str, request: PlanRequest) -> PlanAnswer:
        """The answer for valid SQL, else :class:`InvalidSqlError` (400) with diagnostics."""
        return require_valid(self.plan(tenant_id, request))

    def close(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()  # type: ignore[no-untyped-call]
            pool.join(timeout=10)

    def _admit(self, tenant_id: str) -> threading.BoundedSemaphore:
        with self._lock:
            in_flight = self._in_flight.get(tenant_id, 0)
            if in_flight >= self.budget.per_tenant + WAITING_PER_TENANT:
                raise PlanningBusyError(self.budget.per_tenant)
            self._in_flight[tenant_id] = in_flight + 1
            return self._running.setdefault(
                tenant_id, threading.BoundedSemaphore(self.budget.per_tenant))

    def _run(self, function: Callable[[Any], T], request: Any) -> T:
        future = self._workers().schedule(function, args=(request,),
                                          timeout=self.budget.timeout_s)
        try:
            result: T = future.result()
            return result
        except FutureTimeoutError:
            raise PlanningBudgetError(
                f"planning this SQL took longer than its budget of {self.budget.timeout_s:g} s "
                "and was stopped; simplify the SQL (long expressions, deep nesting)") from None
        except (MemoryError, ProcessExpired, RecursionError):
            raise PlanningBudgetError(
                f"planning this SQL needed more than its memory budget of "
                f"{self.budget.memory_mb} MB and was stopped; simplify the SQL") from None

    def _workers(self) -> ProcessPool:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPool(
                    max_workers=self.budget.workers, initializer=_start_worker,
                    initargs=(self.budget.memory_mb,),
                    context=_forkserver())
            return self._pool


def require_valid(answer: PlanAnswer) -> PlanAnswer:
    """``answer`` when its SQL is valid, else :class:`InvalidSqlError` (400) with its
    located diagnostics."""
    if not answer.valid:
        first = answer.diagnostics[0]
        raise InvalidSqlError(
            f"line {first['line']}, column {first['column']}: {first['message']}",
            details=answer.diagnostics)
    return answer


def _forkserver() -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["spate.api.planning.sql", "spate.api.planning.state",
                                    "spate.api.planning.udfs"])
    return context


def _start_worker(memory_mb: int) -> None:
    """Lower the worker's priority and cap its memory above what start-up took."""
    os.nice(WORKER_NICENESS)
    # Import the planner before measuring: the budget is for planning, not for imports.
    plan_request(PlanRequest(sql="SELECT 1"))
    used = _data_bytes()
    limit = used + memory_mb * 1024 * 1024
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    except (ValueError, OSError) as error:
        log.warning("cannot cap planning memory: %s", error)


def _data_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmData:"):
                return int(line.split()[1]) * 1024
    return 0
