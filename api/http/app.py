"""The API application factory: ``create_app(settings)``.

Everything an app needs — database engine, rate limiter, routes, error
handlers, body limit — is built here from the settings, so tests and the
embedded server build as many independent apps as they like.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from alembic.runtime.migration import MigrationContext
from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from spate.api.billing import PriceBook
from spate.api.crypto import SecretBox
from spate.api.db import create_database
from spate.api.http.bodylimit import BodyLimitMiddleware
from spate.api.http.deps import AppState, platform_key_sha256
from spate.api.http.errors import install_error_handlers
from spate.api.http.ratelimit import RateLimit, create_rate_limiter
from spate.api.http.routes import (
    api_keys,
    billing,
    connections,
    connectors,
    jobs,
    me,
    metrics,
    pipelines,
    preview,
    quotas,
    tenants,
    udfs,
    usage,
)
from spate.api.http.routes.console import mount_console
from spate.api.http.textcheck import InvalidTextMiddleware
from spate.api.migrate import head_revision
from spate.api.planning.pool import PlanningPool
from spate.api.repositories.control import SqlControlStore
from spate.api.scheduling import Scheduler
from spate.api.settings import Settings, quota_plans
from spate.api.worker import celery_app, scheduler_client, scheduler_config
from spate.scheduler.checks import CheckRunner
from spate.scheduler.tenants import Tenants

API_PREFIX = "/api/v1"
DOCS_ASSETS = f"{API_PREFIX}/docs-assets"
logger = logging.getLogger(__name__)


class SchemaNotCurrentError(RuntimeError):
    """The database is not migrated to this release's schema."""


def create_app(settings: Settings, *, scheduler: Scheduler | None = None) -> FastAPI:
    """A new API app over the database and Redis the settings name; ``scheduler`` (if
    any) is poked after each change of desired state."""
    database = create_database(settings.database_url)
    limit = (RateLimit(settings.rate_limit_per_minute, settings.rate_limit_burst)
             if settings.rate_limit_per_minute > 0 else None)
    limiter = create_rate_limiter(settings.redis_url, limit, settings.redis_key_prefix)
    failures = RateLimit(settings.auth_failures_per_minute, settings.auth_failures_per_minute)
    auth_failures = create_rate_limiter(settings.redis_url, failures,
                                        settings.redis_key_prefix + "auth:")
    planning = PlanningPool.from_settings(settings)
    config = scheduler_config(settings)
    checks = CheckRunner(config, SqlControlStore(database).tenant_number)
    state = AppState(settings=settings, database=database, rate_limiter=limiter,
                     platform_key_sha256=platform_key_sha256(settings), scheduler=scheduler,
                     secret_box=SecretBox(settings.secret_key, settings.data_dir),
                     planning=planning, tenants=Tenants(config), checks=checks,
                     auth_failures=auth_failures, plans=quota_plans(settings),
                     price_book=PriceBook.parse(settings.price_book))

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        _check_schema(state)
        try:
            yield
        finally:
            for each in (limiter, auth_failures):
                if each is not None:
                    each.close()
            planning.close()
            database.dispose()

    # The docs pages load Swagger UI and ReDoc from files the package ships
    # (served under DOCS_ASSETS), never from a CDN: they work offline.
    app = FastAPIOffline(
        title="Spate control plane",
        version="1",
        summary="Tenants, API keys and streaming-SQL pipelines",
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=f"{API_PREFIX}/docs",
        redoc_url=f"{API_PREFIX}/redoc",
        static_url=DOCS_ASSETS,
        swagger_ui_parameters={"validatorUrl": None},  # no spec sent to an online validator
        lifespan=lifespan,
    )
    app.state.spate = state
    install_error_handlers(app)
    # The last added runs first: the size limit bounds what the text check reads.
    app.add_middleware(InvalidTextMiddleware)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes)
    for router in (tenants.router, api_keys.router, preview.router, pipelines.router,
                   jobs.router, metrics.router, usage.router, billing.router):
        app.include_router(router, prefix=API_PREFIX)
    app.include_router(metrics.platform_router)
    for router in (connections.profiles, connections.tables, connectors.router, me.router,
                   quotas.router, udfs.router):
        app.include_router(router, prefix=API_PREFIX)
    mount_console(app)  # last: the console's pages at / never shadow the API
    return app


def app_from_settings() -> FastAPI:
    """An app from ``SPATE_*`` variables and ``spate.toml``, for ASGI servers' ``--factory``.

    With a broker configured it pokes the scheduler's workers there; without one
    (the memory transport only reaches a worker in the same process, as in
    ``spate serve``) changes wait for a worker's periodic reconcile.
    """
    settings = Settings()
    if settings.broker_url is None:
        return create_app(settings)
    return create_app(settings, scheduler=scheduler_client(celery_app(settings)))


def _check_schema(state: AppState) -> None:
    with state.database.engine.connect() as connection:
        current = MigrationContext.configure(connection).get_current_revision()
    if current != head_revision():
        raise SchemaNotCurrentError(
            f"the database is at schema revision {current or '(none)'}, this release needs "
            f"{head_revision()}: run 'spate db upgrade'")
