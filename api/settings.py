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

from api.crypto import check_fernet_key

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
    rate_limit_per_minute: Annotated[int, Field(ge=0, le=1_000_000)] = 600
    rate_limit_burst: Annotated[int, Field(ge=1, le=100_000)] = 60
    max_body_bytes: Annotated[int, Field(ge=1024, le=64 * 1024 * 1024)] = 1024 * 1024
    secret_key: SecretStr | None = Field(
        default=None,
        description="Fernet key encrypting connection secrets at rest; unset: a key is "
                    "generated on first use into the data directory's secret.key (mode 0600)",
    )

    # -- scheduler (see scheduler/ and api/worker.py) -----------------------------
    broker_url: str | None = Field(
        default=None,
        description="Celery broker of the scheduler (redis://host:port/db); unset: the "
                    "in-process memory transport of `spate serve` (API and worker in one process)",
    )
    scheduler_queue: str = Field(default="spate", min_length=1, max_length=100,
                                 description="Celery queue the scheduler's tasks go to")
    state_url: str = Field(
        default="sqlite:///.spate/state.db",
        description="State store jobs use: sqlite:///path (one machine), postgresql://…, fdb://",
    )
    data_dir: Path = Field(
        default=Path(".spate"),
        description="Scheduler's files: jobs/<job id>/ (spec, events, log) and checkpoints/",
    )
    cluster_backend: Literal["local", "standalone", "kubernetes"] = Field(
        default="local", description="Where jobs run: local processes, a Spark standalone "
                                     "cluster, or Kubernetes",
    )
    spark_master: str | None = Field(
        default=None, description="local backend: local[N] (default local[2]); standalone: "
                                  "spark://host:port (required)",
    )
    restart_budget: Annotated[int, Field(ge=0, le=1000, description=(
        "Automatic restarts of a job whose process died, before it is failed"))] = 3
    restart_backoff_s: Annotated[float, Field(ge=0, le=3600, description=(
        "Wait before the first automatic restart; doubles each time"))] = 2.0
    restart_backoff_max_s: Annotated[float, Field(ge=0, le=86400, description=(
        "Cap of the doubling restart wait"))] = 60.0
    reconcile_interval_s: Annotated[float, Field(gt=0, le=3600, description=(
        "Period of the scheduler's full reconcile"))] = 5.0
    heartbeat_timeout_s: Annotated[float, Field(gt=0, le=86400, description=(
        "A job silent this long is taken for dead and restarted"))] = 60.0
    update_flush_interval_ms: Annotated[int, Field(ge=0, le=3_600_000, description=(
        "pipeline.update-aggregate-flush-interval: how often updating aggregates emit "
        "their changes (0: every epoch)"))] = 1000
    stop_timeout_s: Annotated[float, Field(gt=0, le=86400, description=(
        "A job asked to stop that is still alive after this long is killed"))] = 120.0
    k8s_api_server: str = Field(default="https://kubernetes.default.svc",
                                description="kubernetes backend: the API server URL")
    k8s_namespace: str = Field(default="spate-jobs",
                               description="kubernetes backend: namespace of driver pods")
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
