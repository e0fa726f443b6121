"""The control plane's settings: ``SPATE_*`` environment variables or ``spate.toml``.

Settings are validated when they are built, so a process with a bad database
URL or a guessable platform-admin key refuses to start instead of running
insecurely. Defaults give the embedded mode: a SQLite file, no Redis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from spate.api.billing import PriceBook, PriceBookError
from spate.api.crypto import check_fernet_key
from spate.api.quotas import (
    DEFAULT_LIMITS,
    ComputeUnits,
    EventsPerSecond,
    Limits,
    Parallelism,
    PipelineCount,
    Plans,
    PreviewCount,
    RunningCount,
    parse_plans,
)
from spate.engine.connectors.core.egress import AllowRule
from spate.engine.defaults import (
    DEFAULT_EPOCH_MAX_DELAY_MS,
    DEFAULT_FLUSH_INTERVAL_MS,
    DEFAULT_STATE_URL,
)
from spate.scheduler.autoscale import COOLDOWN_S
from spate.scheduler.config import BackendName, cluster_masters, parse_clusters
from spate.scheduler.errors import ConfigurationError

CONFIG_FILE = Path("spate.toml")
DEFAULT_DATABASE_URL = "sqlite:///.spate/spate.db"
MIN_SECRET_CHARS = 32

# Values people paste from examples; a platform key must never be one of them,
# nor contain one when it is otherwise short on variety.
_PLACEHOLDERS = ("changeme", "changethis", "change_me", "change-me", "secret", "password",
                 "admin", "example", "placeholder", "default", "test", "xxxx", "todo")


class Settings(BaseSettings):
    """Everything the API process reads from its environment."""

    model_config = SettingsConfigDict(
        env_prefix="SPATE_", toml_file=CONFIG_FILE, extra="forbid", frozen=True,
        hide_input_in_errors=True,  # a rejected secret must not end up in a log
    )

    database_url: str = Field(
        default=DEFAULT_DATABASE_URL,
        description="Control-plane database: sqlite:///path or postgresql://user@host/db",
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis for rate limits (redis://host:port/db); unset: in-process limits",
    )
    redis_key_prefix: str = Field(default="spate:", min_length=1, max_length=64)
    platform_admin_key: SecretStr | None = Field(
        default=None, description="Key that creates tenants; unset: tenant creation is disabled",
    )
    rate_limit_per_minute: Annotated[int, Field(ge=0, le=1_000_000)] = (
        DEFAULT_LIMITS.api_requests_per_minute or 0)
    rate_limit_burst: Annotated[int, Field(ge=1, le=100_000)] = 60
    max_body_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = 1024 * 1024
    secret_key: SecretStr | None = Field(
        default=None,
        description="Fernet key encrypting connection secrets at rest; unset: a key is "
                    "generated on first use into the data directory's secret.key (mode 0600)",
    )

    # -- tenants' plans: limits checked at admission (see api/quotas.py, docs/quotas.md) --
    quota_pipelines: Annotated[PipelineCount, Field(description=(
        "Default plan: pipelines a tenant may store"))] = DEFAULT_LIMITS.pipelines
    quota_running_pipelines: Annotated[RunningCount, Field(description=(
        "Default plan: a tenant's pipelines whose desired state is running (a finished or "
        "failed one counts until it is stopped)"))] = DEFAULT_LIMITS.running_pipelines
    quota_compute_units: Annotated[ComputeUnits, Field(description=(
        "Default plan: compute units a tenant's running pipelines and live previews reserve "
        "together, one per task (a pipeline's or preview's parallelism)"))] = (
        DEFAULT_LIMITS.compute_units)
    quota_parallelism: Annotated[Parallelism, Field(description=(
        "Default plan: the most tasks one pipeline or preview may run with"))] = (
        DEFAULT_LIMITS.parallelism)
    quota_previews: Annotated[PreviewCount, Field(description=(
        "Default plan: previews a tenant may stream at once (more are a 429 until one "
        "ends)"))] = DEFAULT_LIMITS.previews
    quota_source_rate: Annotated[EventsPerSecond, Field(description=(
        "Default plan: events per second one generator source (impulse, nexmark) may "
        "produce"))] = (
        DEFAULT_LIMITS.source_rate)
    plans: str = Field(
        default="", max_length=100_000,
        description="Named plans as a JSON object: plan name -> the limits it changes from "
                    "the default plan, e.g. {\"pro\": {\"running_pipelines\": 100, "
                    "\"compute_units\": 256, \"api_requests_per_minute\": 3000}}; limits: "
                    "pipelines, running_pipelines, compute_units, parallelism, previews, "
                    "source_rate, api_requests_per_minute. The platform admin puts a tenant "
                    "on one with PATCH /api/v1/tenants/{id} (see docs/quotas.md)")

    # -- scheduler (see scheduler/ and api/worker.py) -----------------------------
    broker_url: str | None = Field(
        default=None,
        description="Celery broker of the scheduler (redis://host:port/db); unset: the "
                    "in-process memory transport of `spate serve` (API and worker in one process)",
    )
    scheduler_queue: str = Field(default="spate", min_length=1, max_length=100,
                                 description="Celery queue the scheduler's tasks go to")
    state_url: str = Field(
        default=DEFAULT_STATE_URL,
        description="State store jobs use: sqlite:///path (one machine), postgresql://…, fdb://",
    )
    data_dir: Path = Field(
        default=Path(".spate"),
        description="Scheduler's files: jobs/<job id>/ (spec, events, log) and checkpoints/",
    )
    cluster_backend: BackendName = Field(
        default="local", description="Where jobs run: local processes, a Spark standalone "
                                     "cluster, or Kubernetes",
    )
    spark_master: str | None = Field(
        default=None, description="local backend: local[N] (default local[2]); standalone: "
                                  "spark://host:port of the default cluster (required unless "
                                  "SPATE_SPARK_CLUSTERS names clusters)",
    )
    spark_clusters: str = Field(
        default="", max_length=10_000,
        description="standalone: comma-separated named clusters pipelines can run on and "
                    "move between, name=spark://host:port (a=spark://h1:7077,b=spark://h2:7077); "
                    "the default cluster is the one whose master is SPATE_SPARK_MASTER "
                    "('default' if none is), else the first named")
    restart_budget: Annotated[int, Field(ge=0, le=1000, description=(
        "Automatic restarts of a job whose process died, before it is failed"))] = 3
    restart_backoff_s: Annotated[float, Field(ge=0, le=3600, description=(
        "Wait before the first automatic restart; doubles each time"))] = 2.0
    restart_backoff_max_s: Annotated[float, Field(ge=0, le=86400, description=(
        "Cap of the doubling restart wait"))] = 60.0
    reconcile_interval_s: Annotated[float, Field(gt=0, le=3600, description=(
        "Period of the scheduler's full reconcile"))] = 5.0
    meter_interval_s: Annotated[float, Field(ge=1, le=3600, description=(
        "Period of usage metering: how often each compute unit's CPU and memory are read "
        "and charged to the jobs it runs (see docs/billing.md)"))] = 15.0
    price_book: str = Field(default="", description=(
        "The price book, JSON: a list of versions {\"version\", \"effective_from\" (a "
        "date), \"currency\", \"prices\": {dimension: price per billing unit}} "
        "(docs/billing.md); empty: the built-in one"))
    heartbeat_timeout_s: Annotated[float, Field(gt=0, le=86400, description=(
        "A job silent this long is taken for dead and restarted"))] = 60.0
    update_flush_interval_ms: Annotated[int, Field(ge=0, le=3_600_000, description=(
        "pipeline.update-aggregate-flush-interval: how often updating aggregates emit "
        "their changes (0: every epoch)"))] = DEFAULT_FLUSH_INTERVAL_MS
    stop_timeout_s: Annotated[float, Field(gt=0, le=86400, description=(
        "A job asked to stop that is still alive after this long is killed"))] = 120.0
    # -- the tenant boundary (see docs/security.md) --------------------------------
    sandbox: Literal["required", "off"] = Field(
        default="required",
        description="required: every job runs in its tenant's sandbox (needs root, bubblewrap "
                    "and cgroups; the server refuses to start without them); off: "
                    "single-tenant/dev mode, jobs run as the server's user and no tenant "
                    "can be created besides the first",
    )
    tenant_storage: Path | None = Field(
        default=None, description="Folder of the tenants' storage roots, one folder per "
                                  "tenant id; file paths in SQL resolve inside it (default "
                                  "<data_dir>/tenants)")
    egress_allow: str = Field(
        default="", max_length=10_000,
        description="Comma-separated destinations tenants' connectors may reach besides public "
                    "addresses: CIDR (10.0.0.0/8), address[:port] or host[:port]; the control "
                    "plane's database, broker and state store stay refused")
    sandbox_uid_base: Annotated[int, Field(ge=1000, le=2**31 - 2**24, description=(
        "Tenants' OS users are this plus a number per tenant"))] = 2_000_000
    job_memory_mb: Annotated[int, Field(ge=256, le=1_048_576, description=(
        "Memory limit of a sandboxed job, plus job_memory_per_task_mb per task"))] = 2048
    job_memory_per_task_mb: Annotated[int, Field(ge=0, le=1_048_576, description=(
        "Memory a sandboxed job gets per task of its parallelism"))] = 512
    # -- tenants' warm applications (see docs/deployment.md) ---------------------------
    applications: Literal["on", "off"] = Field(
        default="on",
        description="on: with the local backend, a tenant's pipelines and previews run as "
                    "queries of one warm Spark application of that tenant, started on its "
                    "first job and gone when idle; off: every job starts its own")
    application_max_parallelism: Annotated[int, Field(ge=1, le=128, description=(
        "A job of a higher parallelism gets an application of its own"))] = 4
    application_idle_exit_s: Annotated[float, Field(ge=1, le=86400, description=(
        "An application with no job left exits after this long"))] = 60.0
    application_memory_mb: Annotated[int, Field(ge=512, le=1_048_576, description=(
        "Memory limit of a tenant's sandboxed application"))] = 4096
    application_cpu_cores: Annotated[float, Field(gt=0, le=1024, description=(
        "CPU cores a tenant's sandboxed application may use"))] = 2.0
    idle_stop_s: Annotated[float, Field(ge=0, le=86400, description=(
        "Scale to zero: a pipeline with no input for this long stops after a commit and "
        "resumes when its input is due (0: never)"))] = 60.0
    max_starting_jobs: Annotated[int, Field(ge=0, le=10_000, description=(
        "Admission control: jobs starting at once (their Spark query not running yet); "
        "more wait their turn (0: no limit)"))] = 3
    epoch_max_delay_ms: Annotated[int, Field(ge=0, le=3_600_000, description=(
        "Rate-adaptive epochs: after an epoch of few rows a pipeline waits for more, at most "
        "this long (0: epochs back to back); a pipeline's checkpoint_interval_ms fixes its "
        "trigger instead"))] = DEFAULT_EPOCH_MAX_DELAY_MS
    autoscale_cooldown_s: Annotated[float, Field(ge=0, le=86_400, description=(
        "The autoscaler's least time between two decisions for one pipeline (hysteresis "
        "against flapping)"))] = COOLDOWN_S
    plan_timeout_s: Annotated[float, Field(gt=0, le=600, description=(
        "Time budget of planning one request's SQL (a plan over it is a 422)"))] = 10.0
    plan_memory_mb: Annotated[int, Field(ge=64, le=65_536, description=(
        "Memory budget of planning one request's SQL"))] = 512
    plan_workers: Annotated[int, Field(ge=1, le=64, description=(
        "Processes that plan SQL for the API, outside its event loop"))] = 2
    plan_per_tenant: Annotated[int, Field(ge=1, le=64, description=(
        "Plans of one tenant that run at once (more wait their turn)"))] = 1
    auth_failures_per_minute: Annotated[int, Field(ge=1, le=100_000, description=(
        "Failed authentications a client or key id may make a minute before it is "
        "throttled (429)"))] = 10

    k8s_api_server: str = Field(default="https://kubernetes.default.svc",
                                description="kubernetes backend: the API server URL")
    k8s_namespace_prefix: str = Field(
        default="spate-t", pattern=r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$",
        description="kubernetes backend: a tenant's jobs run in namespace <prefix>-<tenant id>")
    k8s_job_cidrs: str = Field(
        default="", description="kubernetes backend: comma-separated networks every job must "
                                "reach (the state store, the job channel's Redis)")
    k8s_tenant_cpu: str = Field(default="8", description="kubernetes backend: CPU limit of a "
                                                         "tenant namespace's ResourceQuota")
    k8s_tenant_memory: str = Field(default="32Gi", description="kubernetes backend: memory "
                                   "limit of a tenant namespace's ResourceQuota")
    k8s_image: str = Field(default="spate:latest",
                           description="kubernetes backend: image with Spate at /opt/spate")
    k8s_service_account: str = Field(default="spate-job",
                                     description="kubernetes backend: drivers' ServiceAccount")
    k8s_checkpoint_claim: str | None = Field(
        default=None, description="kubernetes backend: ReadWriteMany claim holding checkpoints, "
                                  "mounted at <data_dir>/checkpoints in drivers and the worker",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # Explicit arguments win, then the environment, then spate.toml.
        del dotenv_settings, file_secret_settings
        return init_settings, env_settings, TomlConfigSettingsSource(settings_cls)

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str) -> str:
        scheme = value.split("://", 1)[0].split("+", 1)[0]
        if scheme not in ("sqlite", "postgresql", "postgres"):
            raise ValueError("database_url must be sqlite:///path or postgresql://...")
        return value

    @field_validator("broker_url")
    @classmethod
    def _known_broker(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "memory://")):
            raise ValueError("broker_url must be redis://host:port/db (or memory:// in-process)")
        return value

    @field_validator("redis_url")
    @classmethod
    def _known_redis(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("redis://", "rediss://", "unix://")):
            raise ValueError("redis_url must start with redis://, rediss:// or unix://")
        return value

    @field_validator("spark_clusters")
    @classmethod
    def _cluster_entries(cls, value: str) -> str:
        try:
            parse_clusters(value)
        except ConfigurationError as error:
            raise ValueError(str(error)) from None
        return value

    @field_validator("egress_allow")
    @classmethod
    def _egress_entries(cls, value: str) -> str:
        for entry in egress_entries(value):
            AllowRule.parse(entry)  # a ValueError names the bad entry
        return value

    @field_validator("plans")
    @classmethod
    def _plan_entries(cls, value: str) -> str:
        parse_plans(value)  # a ValueError names the bad entry
        return value

    @field_validator("price_book")
    @classmethod
    def _valid_price_book(cls, value: str) -> str:
        try:
            PriceBook.parse(value)
        except PriceBookError as error:
            raise ValueError(str(error)) from None
        return value

    @field_validator("platform_admin_key")
    @classmethod
    def _strong_platform_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None:
            return None
        check_secret_strength(value.get_secret_value(), "platform_admin_key")
        return value

    @field_validator("secret_key")
    @classmethod
    def _fernet_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            check_fernet_key(value.get_secret_value())
        return value


def known_clusters(settings: Settings) -> dict[str, str | None]:
    """The Spark clusters the settings name, by name, the default first."""
    return cluster_masters(settings.spark_master, parse_clusters(settings.spark_clusters))


def quota_plans(settings: Settings) -> Plans:
    """The operator's plans: the default one from the ``quota_*`` settings (its
    request rate is ``SPATE_RATE_LIMIT_PER_MINUTE``; 0: none) and ``SPATE_PLANS``."""
    default = Limits(
        pipelines=settings.quota_pipelines, running_pipelines=settings.quota_running_pipelines,
        compute_units=settings.quota_compute_units, parallelism=settings.quota_parallelism,
        previews=settings.quota_previews, source_rate=settings.quota_source_rate,
        api_requests_per_minute=settings.rate_limit_per_minute or None)
    return Plans.build(default, parse_plans(settings.plans))


def egress_entries(value: str) -> list[str]:
    """The entries of a comma-separated egress allow-list."""
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def check_secret_strength(secret: str, name: str) -> None:
    """Refuse short, placeholder or low-variety secrets (the message never echoes it)."""
    if len(secret) < MIN_SECRET_CHARS:
        raise ValueError(f"{name} must be at least {MIN_SECRET_CHARS} characters; generate one "
                         "with: python -c 'import secrets; print(secrets.token_urlsafe(32))'")
    lowered = secret.lower()
    if any(word in lowered for word in _PLACEHOLDERS) and len(set(lowered)) < 16:
        raise ValueError(f"{name} looks like a placeholder; generate a random one")
    if len(set(secret)) < 10:
        raise ValueError(f"{name} has too little variety to be random; generate a random one")
