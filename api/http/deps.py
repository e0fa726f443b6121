"""Request dependencies, chained: ``get_session → current_key → require_role → repository``.

Routes declare what they need with the ``Annotated`` aliases at the bottom
(``PipelinesRead``, ``ApiKeysAdmin``, …); each alias authenticates the key,
applies the tenant's rate limit (its plan's), checks the role and hands over a
repository already scoped to the key's tenant — the writing ones with the
tenant's quotas, which admit what they write. This module is where a request
becomes a tenant.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from spate.api.billing import PriceBook
from spate.api.crypto import SecretBox
from spate.api.db import Database
from spate.api.http.errors import (
    AuthenticationError,
    PermissionDeniedError,
    RateLimitedError,
    TooManyFailuresError,
)
from spate.api.http.ratelimit import RateLimit, RateLimiter
from spate.api.planning.pool import PlanningPool
from spate.api.planning.sql import PlanAnswer, PlannedSource, PlanRequest
from spate.api.planning.state import UpdatePlanAnswer, UpdatePlanRequest
from spate.api.planning.udfs import UdfCallersRequest, UdfCheckAnswer, UdfCheckRequest
from spate.api.quotas import Plans, SourcePlanner
from spate.api.repositories.api_keys import ApiKeyRepository
from spate.api.repositories.auth import find_key
from spate.api.repositories.billing import BillingRepository
from spate.api.repositories.connections import ConnectionRepository
from spate.api.repositories.jobs import JobRepository
from spate.api.repositories.metrics import PlatformMetricsRepository, TenantMetricsRepository
from spate.api.repositories.pipelines import PipelineRepository
from spate.api.repositories.quotas import QuotaRepository
from spate.api.repositories.tenants import PlatformRepository
from spate.api.repositories.udfs import UdfRepository
from spate.api.repositories.usage import UsageRepository
from spate.api.scheduling import Scheduler, SchedulerNotifier
from spate.api.security import Role, hash_token, parse_key_id, token_matches
from spate.api.settings import Settings
from spate.engine.connectors.core.boundary import UNCONFINED, Boundary
from spate.engine.planner.external import TableDefinition
from spate.engine.udf import UdfFile
from spate.scheduler.checks import CheckRunner
from spate.scheduler.tenants import Tenants

_bearer = HTTPBearer(
    auto_error=False, scheme_name="ApiKey",
    description="An API key: `Authorization: Bearer spate_<id>_<secret>`",
)
# Compared against when a key id is unknown, so a miss costs what a hit costs.
_NO_SUCH_KEY_SHA256 = hash_token("spate_no-such-key")


@dataclass(frozen=True)
class AppState:
    """What the app factory builds once and every request shares."""

    settings: Settings
    database: Database
    rate_limiter: RateLimiter | None
    platform_key_sha256: str | None
    #: Poked after each committed change of desired state; None: no scheduler to tell.
    scheduler: Scheduler | None = None
    #: Encrypts connection secrets; without a configured key it makes one on first use.
    secret_box: SecretBox = field(default_factory=lambda: SecretBox(None))
    #: Plans tenants' SQL in worker processes, within a budget per request.
    planning: PlanningPool | None = None
    #: Each tenant's folders and boundary (storage root, egress policy).
    tenants: Tenants | None = None
    #: Counts failed authentications per client address and per key id.
    auth_failures: RateLimiter | None = None
    #: The operator's plans: each tenant's limits (see :mod:`spate.api.quotas`).
    plans: Plans = field(default_factory=Plans)
    #: The operator's price book (see :mod:`spate.api.billing`).
    price_book: PriceBook = field(default_factory=lambda: PriceBook.parse(""))
    #: Runs the ``/test`` connection checks in the tenants' compute units.
    checks: CheckRunner | None = None

    def boundary(self, tenant_id: str) -> Boundary:
        """What ``tenant_id``'s tables may touch (unconfined only in an app built without
        a deployment, as some tests build them)."""
        return UNCONFINED if self.tenants is None else self.tenants.boundary(tenant_id)


@dataclass(frozen=True)
class TenantCaller:
    """A request made with a tenant's API key."""

    tenant_id: str
    key_id: str
    role: Role
    #: the tenant's plan as its row names it (None: the default plan)
    plan: str | None = None


@dataclass(frozen=True)
class PlatformCaller:
    """A request made with the platform-admin key from the settings."""


Caller = TenantCaller | PlatformCaller


def app_state(request: Request) -> AppState:
    state = request.app.state.spate
    assert isinstance(state, AppState)
    return state


def get_session(request: Request) -> Iterator[Session]:
    """A database session for this request; repositories commit, the rest rolls back."""
    with app_state(request).database.sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def current_key(
    request: Request,
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Caller:
    """Who is calling, from the bearer key; then the caller's rate limit."""
    if credentials is None:
        raise AuthenticationError("send an API key: 'Authorization: Bearer spate_...'")
    state = app_state(request)
    caller = _throttled_authenticate(request, session, state, credentials.credentials)
    if state.rate_limiter is not None:
        bucket = "platform" if isinstance(caller, PlatformCaller) else f"tenant:{caller.tenant_id}"
        retry_after_s = state.rate_limiter.acquire(bucket, _request_limit(state, caller))
        if retry_after_s is not None:
            raise RateLimitedError(retry_after_s)
    return caller


def _request_limit(state: AppState, caller: Caller) -> RateLimit | None:
    """A tenant's rate is its plan's ``api_requests_per_minute``, its burst the server's
    (at most a minute's worth); None: the limiter's own (the platform key's)."""
    if isinstance(caller, PlatformCaller):
        return None
    per_minute = state.plans.plan(caller.plan).limits.api_requests_per_minute
    if per_minute is None:
        return None
    return RateLimit(per_minute, min(state.settings.rate_limit_burst, per_minute))


def _throttled_authenticate(request: Request, session: Session, state: AppState,
                            token: str) -> Caller:
    """Authenticate, unless the client or the key id failed too often lately.

    Failures count against the client's address and against the key id the
    token names; while either is over its budget every attempt is a 429, the
    right key included, so guessing gets no faster by spreading over keys.
    """
    limiter = state.auth_failures
    if limiter is None:
        return _authenticate(session, state, token)
    client = request.client.host if request.client is not None else "unknown"
    key_id = parse_key_id(token)
    buckets = [f"authfail:client:{client}"] + ([f"authfail:key:{key_id}"] if key_id else [])
    for bucket in buckets:
        wait_s = limiter.blocked(bucket)
        if wait_s is not None:
            raise TooManyFailuresError(wait_s)
    try:
        return _authenticate(session, state, token)
    except AuthenticationError:
        for bucket in buckets:
            limiter.acquire(bucket)
        raise


def _authenticate(session: Session, state: AppState, token: str) -> Caller:
    given_sha256 = hash_token(token)
    if state.platform_key_sha256 is not None and hmac.compare_digest(
            given_sha256, state.platform_key_sha256):
        return PlatformCaller()
    key_id = parse_key_id(token)
    found = find_key(session, key_id) if key_id is not None else None
    key = found.key if found is not None else None
    matches = token_matches(token, key.secret_sha256 if key else _NO_SUCH_KEY_SHA256)
    if found is None or key is None or not matches or key.revoked_at is not None:
        raise AuthenticationError("invalid or revoked API key")
    return TenantCaller(tenant_id=key.tenant_id, key_id=key.id, role=Role(key.role),
                        plan=found.plan)


CallerDep = Annotated[Caller, Depends(current_key)]


def require_role(required: Role) -> Callable[[Caller], TenantCaller]:
    """A dependency admitting tenant keys whose role includes ``required``."""

    def dependency(caller: CallerDep) -> TenantCaller:
        if isinstance(caller, PlatformCaller):
            raise PermissionDeniedError("the platform-admin key only manages tenants; "
                                        "use one of the tenant's API keys")
        if not caller.role.allows(required):
            roles = " or ".join(sorted(role.value for role in Role if role.allows(required)))
            raise PermissionDeniedError(f"this needs the {roles} role; the key is "
                                        f"a {caller.role.value} key")
        return caller

    dependency.__name__ = f"require_{required.value}"
    return dependency


def require_platform_admin(caller: CallerDep) -> PlatformCaller:
    if not isinstance(caller, PlatformCaller):
        raise PermissionDeniedError("only the platform-admin key manages tenants")
    return caller


ViewerCaller = Annotated[TenantCaller, Depends(require_role(Role.VIEWER))]
DeveloperCaller = Annotated[TenantCaller, Depends(require_role(Role.DEVELOPER))]
AdminCaller = Annotated[TenantCaller, Depends(require_role(Role.ADMIN))]
BillingCaller = Annotated[TenantCaller, Depends(require_role(Role.BILLING))]


def _quotas(request: Request, session: SessionDep, caller: ViewerCaller) -> QuotaRepository:
    state = app_state(request)
    return QuotaRepository(session, caller.tenant_id, state.plans,
                           _stored_sql_planner(state, session, caller.tenant_id),
                           state.price_book)


QuotasDep = Annotated[QuotaRepository, Depends(_quotas)]


def _pipelines_read(session: SessionDep, caller: ViewerCaller,
                    quotas: QuotasDep) -> PipelineRepository:
    return PipelineRepository(session, caller.tenant_id, quotas)


def _pipelines_write(session: SessionDep, caller: DeveloperCaller,
                     quotas: QuotasDep) -> PipelineRepository:
    return PipelineRepository(session, caller.tenant_id, quotas)


def _udfs_read(session: SessionDep, caller: ViewerCaller) -> UdfRepository:
    return UdfRepository(session, caller.tenant_id)


def _udfs_write(session: SessionDep, caller: DeveloperCaller) -> UdfRepository:
    return UdfRepository(session, caller.tenant_id)


def _api_keys_admin(session: SessionDep, caller: AdminCaller) -> ApiKeyRepository:
    return ApiKeyRepository(session, caller.tenant_id)


def _platform(session: SessionDep,
              caller: Annotated[PlatformCaller, Depends(require_platform_admin)]
              ) -> PlatformRepository:
    return PlatformRepository(session)


Platform = Annotated[PlatformRepository, Depends(_platform)]


def _jobs_read(session: SessionDep, caller: ViewerCaller) -> JobRepository:
    return JobRepository(session, caller.tenant_id)


def _jobs_write(session: SessionDep, caller: DeveloperCaller,
               quotas: QuotasDep) -> JobRepository:
    return JobRepository(session, caller.tenant_id, quotas)


def _platform_quotas(request: Request, session: SessionDep, platform: Platform,
                     tenant_id: Annotated[str, Path(max_length=64)]) -> QuotaRepository:
    platform.get_tenant(tenant_id)  # an unknown tenant is a 404
    return QuotaRepository(session, tenant_id, app_state(request).plans)


def _tenant_metrics(session: SessionDep, caller: ViewerCaller) -> TenantMetricsRepository:
    return TenantMetricsRepository(session, caller.tenant_id)


def _platform_metrics(session: SessionDep, caller: CallerDep) -> PlatformMetricsRepository:
    if not isinstance(caller, PlatformCaller):
        raise PermissionDeniedError("/metrics spans every tenant and needs the platform-admin "
                                    "key; a tenant's own metrics are at /api/v1/metrics")
    return PlatformMetricsRepository(session)


def _usage_read(session: SessionDep, caller: CallerDep) -> UsageRepository:
    """A tenant's admin reads its tenant's usage; the platform admin reads every tenant's."""
    if isinstance(caller, PlatformCaller):
        return UsageRepository(session, None)
    if not caller.role.allows(Role.BILLING):
        raise PermissionDeniedError("usage and costs need the admin or billing role; the key "
                                    f"is a {caller.role.value} key")
    return UsageRepository(session, caller.tenant_id)


def _billing(request: Request, session: SessionDep, caller: BillingCaller
             ) -> BillingRepository:
    """Invoices, budgets and estimates: the tenant's admin's and billing keys'."""
    return BillingRepository(session, caller.tenant_id, app_state(request).price_book)


def _notifier(request: Request) -> SchedulerNotifier:
    return SchedulerNotifier(app_state(request).scheduler)


PipelinesRead = Annotated[PipelineRepository, Depends(_pipelines_read)]
PipelinesWrite = Annotated[PipelineRepository, Depends(_pipelines_write)]
UdfsRead = Annotated[UdfRepository, Depends(_udfs_read)]
UdfsWrite = Annotated[UdfRepository, Depends(_udfs_write)]
ApiKeysAdmin = Annotated[ApiKeyRepository, Depends(_api_keys_admin)]
JobsRead = Annotated[JobRepository, Depends(_jobs_read)]
JobsWrite = Annotated[JobRepository, Depends(_jobs_write)]
TenantMetrics = Annotated[TenantMetricsRepository, Depends(_tenant_metrics)]
PlatformMetrics = Annotated[PlatformMetricsRepository, Depends(_platform_metrics)]
UsageRead = Annotated[UsageRepository, Depends(_usage_read)]
BillingAdmin = Annotated[BillingRepository, Depends(_billing)]
Notifier = Annotated[SchedulerNotifier, Depends(_notifier)]
#: The caller's tenant's plan and use (any role).
QuotasRead = QuotasDep
#: Another tenant's plan and use, for the platform key (path parameter ``tenant_id``).
PlatformQuotas = Annotated[QuotaRepository, Depends(_platform_quotas)]


def platform_key_sha256(settings: Settings) -> str | None:
    """The digest requests' keys are compared with, so the key itself is not kept around."""
    if settings.platform_admin_key is None:
        return None
    return hash_token(settings.platform_admin_key.get_secret_value())


def _connections_read(request: Request, session: SessionDep,
                      caller: ViewerCaller) -> ConnectionRepository:
    state = app_state(request)
    return ConnectionRepository(session, caller.tenant_id, state.secret_box,
                                state.boundary(caller.tenant_id))


def _connections_write(request: Request, session: SessionDep, caller: DeveloperCaller,
                       quotas: QuotasDep) -> ConnectionRepository:
    state = app_state(request)
    return ConnectionRepository(session, caller.tenant_id, state.secret_box,
                                state.boundary(caller.tenant_id), quotas)


ConnectionsRead = Annotated[ConnectionRepository, Depends(_connections_read)]
ConnectionsWrite = Annotated[ConnectionRepository, Depends(_connections_write)]


def _checks(request: Request) -> CheckRunner:
    checks = app_state(request).checks
    assert checks is not None, "the app was built without a check runner"
    return checks


ChecksDep = Annotated[CheckRunner, Depends(_checks)]


def _no_udfs(sql: str) -> tuple[UdfFile, ...]:
    return ()


@dataclass(frozen=True)
class TenantPlanner:
    """Plans SQL for one tenant: over its connection tables and UDFs, within its boundary,
    in the planning pool (never in the API's process); reads its UDF files there too."""

    pool: PlanningPool
    tenant_id: str
    tables: tuple[TableDefinition, ...]
    boundary: dict[str, Any]
    #: the files of the tenant's UDFs whose names a SQL text mentions
    udfs: Callable[[str], tuple[UdfFile, ...]] = _no_udfs

    def check(self, sql: str, graph: bool = False) -> PlanAnswer:
        return self.pool.plan(self.tenant_id, self._request(sql, graph))

    def require_valid(self, sql: str, needs_sinks: bool = False) -> PlanAnswer:
        """The answer for valid SQL, else a 400 with located diagnostics; ``needs_sinks``
        for a pipeline that runs on its own (a bare SELECT is then an error)."""
        return self.pool.require_valid(self.tenant_id,
                                       self._request(sql, False, needs_sinks))

    def plan_update(self, sql: str, state_sql: str | None, state_version: int | None,
                    graph: bool = False) -> UpdatePlanAnswer:
        """Plan ``sql`` as a pipeline's next version and judge the state ``state_sql``
        wrote (None: the pipeline has none)."""
        new = self._request(sql, graph, needs_sinks=True, also=state_sql or "")
        return self.pool.plan_update(self.tenant_id,
                                     UpdatePlanRequest(new, state_sql, state_version))

    def check_udf(self, name: str, source: str) -> UdfCheckAnswer:
        """Whether ``source`` can be stored as UDF ``name``: located problems, or its
        kind and signature."""
        return self.pool.check_udf(self.tenant_id, UdfCheckRequest(name, source))

    def udf_callers(self, name: str, sql: dict[str, list[str]]) -> list[str]:
        """The pipelines (keys of ``sql``: their SQL texts) that call UDF ``name``."""
        return self.pool.udf_callers(self.tenant_id, UdfCallersRequest(name, sql))

    def _request(self, sql: str, graph: bool, needs_sinks: bool = False,
                 also: str = "") -> PlanRequest:
        """A request to plan ``sql``, with the UDFs it (or ``also``) may call."""
        return PlanRequest(sql=sql, tables=self.tables, boundary=self.boundary, graph=graph,
                           needs_sinks=needs_sinks, udfs=self.udfs(f"{sql}\n{also}"))


def _tenant_planner(state: AppState, connections: ConnectionRepository,
                    tenant_id: str) -> TenantPlanner:
    if state.planning is None:
        raise RuntimeError("the app was built without a planning pool")
    udfs = UdfRepository(connections.session, tenant_id)
    return TenantPlanner(pool=state.planning, tenant_id=tenant_id,
                         tables=tuple(connections.catalog_definitions()),
                         boundary=state.boundary(tenant_id).to_dict(),
                         udfs=udfs.files_named_in)


def _planner(request: Request, connections: ConnectionsRead,
             caller: ViewerCaller) -> TenantPlanner:
    return _tenant_planner(app_state(request), connections, caller.tenant_id)


def _stored_sql_planner(state: AppState, session: Session, tenant_id: str) -> SourcePlanner:
    """Plans a stored pipeline's SQL for the sources of a new job, only when one is asked
    for (most requests need no plan, nor the tenant's tables read)."""

    def sources(sql: str) -> tuple[PlannedSource, ...]:
        connections = ConnectionRepository(session, tenant_id, state.secret_box,
                                           state.boundary(tenant_id))
        return _tenant_planner(state, connections, tenant_id).check(sql).sources

    return sources


#: Plans the caller's SQL over its connection tables (secrets as placeholders).
Planner = Annotated[TenantPlanner, Depends(_planner)]
