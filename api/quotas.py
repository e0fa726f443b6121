"""Tenants' plans and their limits (quotas): every limit, and every admission check.

A **plan** is a set of limits the operator configures: the default plan from
the ``quota_*`` settings (``SPATE_QUOTA_PIPELINES``, …), and named plans
(``SPATE_PLANS``) that change some of its limits. A tenant is on the plan its
``Tenant.plan`` names (None: the default plan).

The limits (docs/quotas.md):

- ``pipelines`` — pipelines the tenant stores;
- ``running_pipelines`` — its pipelines whose desired state is running (a
  finished or failed one included, until it is stopped);
- ``compute_units`` — the units reserved by its running pipelines and live
  previews, where a pipeline or preview reserves **one unit per task: its
  parallelism**;
- ``parallelism`` — the most tasks one pipeline or preview may run with;
- ``previews`` — its live previews (streaming, not yet asked to stop);
- ``source_rate`` — events a second one generator source (``impulse``,
  ``nexmark``) may produce;
- ``api_requests_per_minute`` — its API request rate (:mod:`spate.api.http.ratelimit`).

Limits are checked when something is *admitted* — a pipeline created, a
version added, a job asked for (start, restart, move, a rescale up), a preview
opened, a generator connection table stored or changed — and never
afterwards: lowering a plan refuses new admissions and harms nothing that
runs, and stopping, deleting or lowering a parallelism is never refused.

This module holds the limits and the rules: what each request demands
(:func:`new_pipeline`, :func:`pipeline_change`, :func:`new_sources`,
:func:`new_preview`) and whether the plan has room (:func:`check`). The
queries and the tenant row lock that make a check race-safe are
:class:`spate.api.repositories.quotas.QuotaRepository`'s, which the pipeline,
job and connection repositories call before they write, so no route has to
remember a check.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal, NoReturn, get_args

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from spate.api.http.errors import BadRequestError, QuotaExceededError
from spate.api.http.schemas.common import NAME_PATTERN
from spate.api.http.schemas.pipelines import MAX_PARALLELISM
from spate.api.planning.sql import PlannedSource
from spate.engine.connectors.core.base import SOURCE, TableConfig
from spate.engine.connectors.core.options import OptionReader

logger = logging.getLogger(__name__)

LimitName = Literal["pipelines", "running_pipelines", "compute_units", "parallelism",
                    "previews", "source_rate", "api_requests_per_minute"]
#: Every limit, in the order they are reported.
LIMITS: tuple[LimitName, ...] = get_args(LimitName)
#: The plan of a tenant whose ``Tenant.plan`` is None.
DEFAULT_PLAN = "default"
#: Retry-After of a refusal that live previews are behind: they end by themselves
#: (at their row limit, their timeout, or when their reader hangs up).
PREVIEW_RETRY_AFTER_S = 5

# The bounds of each limit, for the quota_* settings and named plans alike.
PipelineCount = Annotated[int, Field(ge=0, le=1_000_000)]
RunningCount = Annotated[int, Field(ge=0, le=100_000)]
ComputeUnits = Annotated[int, Field(ge=0, le=1_000_000)]
Parallelism = Annotated[int, Field(ge=1, le=MAX_PARALLELISM)]
PreviewCount = Annotated[int, Field(ge=0, le=1_000)]
EventsPerSecond = Annotated[int, Field(ge=0, le=10**12)]
RequestsPerMinute = Annotated[int, Field(ge=1, le=1_000_000)]

#: Asks the planner for the sources a stored pipeline's SQL reads (nothing when it
#: no longer plans: its job would fail to start and produce nothing).
SourcePlanner = Callable[[str], Sequence[PlannedSource]]


@dataclass(frozen=True)
class Limits:
    """The limits of one plan."""

    pipelines: int
    running_pipelines: int
    compute_units: int
    parallelism: int
    previews: int
    #: events a second, per generator source
    source_rate: int
    #: None: the server's API rate limits are off (``SPATE_RATE_LIMIT_PER_MINUTE = 0``)
    api_requests_per_minute: int | None


#: The default plan's limits, chosen so that a normal tenant never meets them while
#: a script creating or starting pipelines in a loop stops within a minute or so:
#:
#: - 100 pipelines: a team's real pipelines number in the tens; the rows are cheap.
#: - 20 running: each is a Spark query the scheduler keeps alive (in the tenant's
#:   warm application or a process of its own); 20 is several times what one
#:   team watches, and the density benchmark runs 44 of them on a whole machine.
#: - 32 compute units: 20 pipelines at parallelism 1 plus a few at 2 to 4 and the
#:   previews; a rescale to 16 still fits once, a second does not.
#: - parallelism 16: the local backend gives a job of more than 4 tasks an
#:   application of its own already; 16 tasks is a large job on one cluster.
#: - 4 previews: what ``POST /pipelines/preview`` allowed before plans existed.
#: - 1,000,000 events/s: about the most the fastest stateless pipeline processes
#:   on the benchmark machine (BENCHMARKS.md); a faster generator only builds
#:   backlog and burns its tenant's CPU.
#: - 600 requests a minute: ``SPATE_RATE_LIMIT_PER_MINUTE``'s default.
DEFAULT_LIMITS = Limits(pipelines=100, running_pipelines=20, compute_units=32, parallelism=16,
                        previews=4, source_rate=1_000_000, api_requests_per_minute=600)


class PlanOverrides(BaseModel):
    """A named plan: the limits it changes from the default plan (the rest are kept)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pipelines: PipelineCount | None = None
    running_pipelines: RunningCount | None = None
    compute_units: ComputeUnits | None = None
    parallelism: Parallelism | None = None
    previews: PreviewCount | None = None
    source_rate: EventsPerSecond | None = None
    api_requests_per_minute: RequestsPerMinute | None = None


PlanName = Annotated[str, Field(pattern=NAME_PATTERN)]
_NAMED_PLANS = TypeAdapter(dict[PlanName, PlanOverrides])


def parse_plans(text: str) -> dict[str, PlanOverrides]:
    """The named plans of ``SPATE_PLANS``: a JSON object of plan name → the limits it
    changes. A ValueError says what is wrong (never echoing the whole value)."""
    if not text.strip():
        return {}
    try:
        plans = _NAMED_PLANS.validate_json(text)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the value"
        raise ValueError(f"{where}: {first['msg']}; write a JSON object of plan name → "
                         f"{{limit: value}}, limits: {', '.join(LIMITS)}") from None
    if DEFAULT_PLAN in plans:
        raise ValueError(f"'{DEFAULT_PLAN}' is the plan of the quota_* settings "
                         "(SPATE_QUOTA_PIPELINES, …); change those, or give the plan "
                         "another name")
    return plans


@dataclass(frozen=True)
class Plan:
    """A plan by name, with its limits."""

    name: str
    limits: Limits


@dataclass(frozen=True)
class Plans:
    """The operator's plans: the default one and the named ones."""

    default: Limits = DEFAULT_LIMITS
    named: Mapping[str, Limits] = field(default_factory=dict)

    @classmethod
    def build(cls, default: Limits, overrides: Mapping[str, PlanOverrides]) -> Plans:
        """Named plans as the default plan with their changes. With API rate limits off
        (the default plan has no rate), no plan has one."""
        named = {}
        for name, override in overrides.items():
            changes = override.model_dump(exclude_none=True)
            if default.api_requests_per_minute is None:
                changes.pop("api_requests_per_minute", None)
            named[name] = replace(default, **changes)
        return cls(default, named)

    def names(self) -> list[str]:
        return [DEFAULT_PLAN, *sorted(self.named)]

    def plan(self, name: str | None) -> Plan:
        """The plan of a tenant whose ``Tenant.plan`` is ``name``. A name the operator
        no longer configures gets the default plan's limits (and a warning is logged):
        a configuration change must not lock tenants out."""
        if name is None or name == DEFAULT_PLAN:
            return Plan(DEFAULT_PLAN, self.default)
        limits = self.named.get(name)
        if limits is None:
            _warn_unknown_plan(name)
            return Plan(DEFAULT_PLAN, self.default)
        return Plan(name, limits)

    def require_known(self, name: str | None) -> None:
        """Refuse (400) a plan name the operator does not configure."""
        if name is not None and name not in self.names():
            raise BadRequestError(f"unknown plan '{name}'; the plans are "
                                  f"{', '.join(self.names())} (SPATE_PLANS)",
                                  details=[{"known_plans": self.names()}])


_warned_plans: set[str] = set()


def _warn_unknown_plan(name: str) -> None:
    if name not in _warned_plans:
        _warned_plans.add(name)
        logger.warning("a tenant is on a plan SPATE_PLANS does not define; it gets the "
                       "default plan's limits", extra={"plan": name})


# -- what a request demands --------------------------------------------------------


@dataclass(frozen=True)
class Demand:
    """What one request asks the plan for: additions to the tenant's totals, and the
    parallelism and sources of what it admits (None, empty: nothing to check)."""

    pipelines: int = 0
    running_pipelines: int = 0
    compute_units: int = 0
    previews: int = 0
    parallelism: int | None = None
    sources: tuple[PlannedSource, ...] = ()
    #: the request asks for a new job, whose sources are those of the stored SQL
    new_job: bool = False

    @property
    def empty(self) -> bool:
        """Nothing to check: a stop, a lower parallelism, a change of description."""
        return (max(self.pipelines, self.running_pipelines, self.compute_units,
                    self.previews) <= 0 and self.parallelism is None and not self.sources)


def new_pipeline(parallelism: int, running: bool,
                 sources: Sequence[PlannedSource]) -> Demand:
    """Creating a pipeline (started unless ``running`` is false)."""
    return Demand(pipelines=1, running_pipelines=int(running),
                  compute_units=parallelism if running else 0, parallelism=parallelism,
                  sources=tuple(sources))


def new_sources(sources: Sequence[PlannedSource]) -> Demand:
    """New SQL for a pipeline (its job picks it up when it next starts), or a connection
    table stored or changed (a job that reads it may restart by itself): their sources."""
    return Demand(sources=tuple(sources))


def new_preview(parallelism: int, sources: Sequence[PlannedSource]) -> Demand:
    return Demand(previews=1, compute_units=parallelism, parallelism=parallelism,
                  sources=tuple(sources))


def pipeline_change(was_running: bool, old_parallelism: int, running: bool,
                    parallelism: int, replaces_job: bool = False) -> Demand:
    """A pipeline's desired state and parallelism changing; ``replaces_job`` when the
    request asks for a new job whatever else changes (restart, move).

    A new job (a start, a restart or move of a running pipeline, a rescale up)
    is admitted like a new pipeline: its parallelism and its sources are
    checked. A stopped pipeline may take a higher parallelism only within the
    plan too. Stopping and lowering add nothing, so they are never refused.
    """
    starts = running and not was_running
    raised = parallelism > old_parallelism
    new_job = running and (starts or raised or replaces_job)
    units_after = parallelism if running else 0
    units_before = old_parallelism if was_running else 0
    return Demand(running_pipelines=int(starts), compute_units=units_after - units_before,
                  parallelism=parallelism if new_job or raised else None, new_job=new_job)


# -- the check ---------------------------------------------------------------------


@dataclass(frozen=True)
class Usage:
    """What a tenant holds, counted in the transaction that admits a request."""

    pipelines: int = 0
    running_pipelines: int = 0
    #: the parallelism of its running pipelines, summed
    pipeline_units: int = 0
    #: the parallelism of its live previews, summed
    preview_units: int = 0
    previews: int = 0
    #: the largest parallelism among running pipelines and live previews
    largest_parallelism: int = 0

    @property
    def compute_units(self) -> int:
        return self.pipeline_units + self.preview_units


#: Per total: what the message calls it, and how the tenant makes room.
_TOTALS: dict[str, tuple[str, str]] = {
    "pipelines": ("pipelines", "delete a pipeline it no longer needs"),
    "running_pipelines": ("running pipelines (a finished or failed pipeline counts until "
                          "it is stopped)", "stop a pipeline"),
    "compute_units": ("compute units (one per task: the parallelism of running pipelines "
                      "and live previews)", "stop a pipeline or lower a parallelism"),
    "previews": ("live previews", "close a preview (or let it reach its row limit)"),
}
_ASK_OPERATOR = "or ask the operator for a plan with more"


def check(plan: Plan, usage: Usage, demand: Demand) -> None:
    """Refuse (:class:`QuotaExceededError`) a demand the plan has no room for.

    Limits on what is admitted come first (only a change of the request helps
    there), then the tenant's totals. A total counts against its limit only
    when the request raises it, so a tenant over a lowered plan can still stop
    and shrink.
    """
    limits = plan.limits
    if demand.parallelism is not None and demand.parallelism > limits.parallelism:
        raise QuotaExceededError(
            f"quota exceeded: plan '{plan.name}' allows a parallelism of at most "
            f"{limits.parallelism} per pipeline or preview, and this asks for "
            f"{demand.parallelism}; lower the parallelism, {_ASK_OPERATOR}",
            {"limit": "parallelism", "value": limits.parallelism,
             "current": demand.parallelism})
    for source in demand.sources:
        _check_source(plan, source)
    wanted = {"pipelines": demand.pipelines, "running_pipelines": demand.running_pipelines,
              "compute_units": demand.compute_units, "previews": demand.previews}
    used = {"pipelines": usage.pipelines, "running_pipelines": usage.running_pipelines,
            "compute_units": usage.compute_units, "previews": usage.previews}
    # What live previews hold: it comes back by itself, so waiting can help.
    held_by_previews = {"compute_units": usage.preview_units, "previews": usage.previews}
    for name, more in wanted.items():
        limit = getattr(limits, name)
        if more > 0 and used[name] + more > limit:
            held = held_by_previews.get(name, 0)
            _refuse_total(plan.name, name, limit, used[name], more, held)


def _refuse_total(plan_name: str, name: str, limit: int, current: int, more: int,
                  held_by_previews: int) -> NoReturn:
    noun, remedy = _TOTALS[name]
    waiting_helps = held_by_previews > 0 and current - held_by_previews + more <= limit
    message = (f"quota exceeded: plan '{plan_name}' allows {limit} {noun}; the tenant has "
               f"{current} and this needs {more} more. ")
    if waiting_helps and name == "previews":
        message += f"Previews end by themselves: retry in a few seconds, {remedy}, "
    elif waiting_helps:
        message += (f"Live previews hold {held_by_previews} of them and end by themselves: "
                    f"retry in a few seconds, {remedy}, ")
    else:
        message += f"To make room, {remedy}, "
    message += _ASK_OPERATOR
    raise QuotaExceededError(
        message, {"limit": name, "value": limit, "current": current, "requested": more},
        retry_after_s=PREVIEW_RETRY_AFTER_S if waiting_helps else None)


def _check_source(plan: Plan, source: PlannedSource) -> None:
    rate = generator_rate(source)
    limit = plan.limits.source_rate
    if rate is None or rate <= limit:
        return
    table = f"table '{source.name}' ({source.connector})"
    if math.isinf(rate):
        produces = (f"{table} is not rate-limited and has no runtime, so it produces events "
                    "as fast as it can, without end")
        remedy = "keep it rate_limited = 'true' or give it a runtime"
    else:
        produces = f"{table} would produce {_number(rate)} events/s"
        remedy = "lower its event_rate"
    raise QuotaExceededError(
        f"quota exceeded: plan '{plan.name}' allows generator sources of at most {limit} "
        f"events/s, and {produces}; {remedy}, or ask the operator for a plan that allows "
        f"more", {"limit": "source_rate", "value": limit,
                  "current": None if math.isinf(rate) else _number(rate),
                  "table": source.name})


def generator_rate(source: PlannedSource) -> float | None:
    """Events a second a generator source produces (inf: without bound); None for a
    source that is not a generator.

    ``impulse`` produces ``event_rate`` rows a second over all its subtasks.
    ``nexmark`` produces ``event_rate`` events a second unless
    ``rate_limited = 'false'``: then it produces as fast as its tasks can — a
    bounded replay (``runtime``) counts at its ``event_rate`` (its speed is
    what the parallelism and compute-unit limits allow, and it ends), an
    unbounded one is without bound.
    """
    if source.connector not in ("impulse", "nexmark"):
        return None
    options = OptionReader(TableConfig(source.name, source.connector, SOURCE,
                                       source.options, ()))
    rate = options.number("event_rate") or 0.0
    if source.connector == "nexmark" and not options.boolean("rate_limited", True) \
            and not source.bounded:
        return math.inf
    return rate


def _number(value: float) -> int | float:
    return int(value) if value == int(value) else value


# -- what GET /quotas reports --------------------------------------------------------


@dataclass(frozen=True)
class LimitUse:
    """One limit of a tenant's plan and the tenant's use of it (None: not counted)."""

    limit: LimitName
    value: int | None
    current: int | None


def limit_uses(plan: Plan, usage: Usage) -> list[LimitUse]:
    """Each limit with the tenant's use: totals as they stand, ``parallelism`` as the
    largest in use; a source's rate and the request rate are not counted."""
    current: dict[str, Any] = {
        "pipelines": usage.pipelines, "running_pipelines": usage.running_pipelines,
        "compute_units": usage.compute_units, "parallelism": usage.largest_parallelism,
        "previews": usage.previews, "source_rate": None, "api_requests_per_minute": None,
    }
    return [LimitUse(name, getattr(plan.limits, name), current[name]) for name in LIMITS]
