"""Settings come from SPATE_* variables or spate.toml and refuse weak secrets at start-up."""

from __future__ import annotations

import os
import secrets
from dataclasses import fields
from pathlib import Path

import pytest
from pydantic import ValidationError

from spate.api.settings import DEFAULT_DATABASE_URL, Settings
from spate.api.worker import (
    DEFAULTED_KUBERNETES_FIELDS,
    DEFAULTED_SCHEDULER_FIELDS,
    KUBERNETES_PREFIX,
    scheduler_config,
)
from spate.scheduler.config import KubernetesConfig, SchedulerConfig

STRONG_KEY = secrets.token_urlsafe(32)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No SPATE_* variables and no spate.toml from the machine running the tests."""
    for name in list(os.environ):
        if name.startswith("SPATE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


def test_defaults_are_the_embedded_mode() -> None:
    settings = Settings()
    assert settings.database_url == DEFAULT_DATABASE_URL
    assert settings.redis_url is None
    assert settings.platform_admin_key is None


def test_environment_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPATE_DATABASE_URL", "postgresql://spate@db/spate")
    monkeypatch.setenv("SPATE_REDIS_URL", "redis://cache:6379/1")
    monkeypatch.setenv("SPATE_PLATFORM_ADMIN_KEY", STRONG_KEY)
    monkeypatch.setenv("SPATE_RATE_LIMIT_PER_MINUTE", "120")
    settings = Settings()
    assert settings.database_url == "postgresql://spate@db/spate"
    assert settings.redis_url == "redis://cache:6379/1"
    assert settings.platform_admin_key is not None
    assert settings.platform_admin_key.get_secret_value() == STRONG_KEY
    assert settings.rate_limit_per_minute == 120


def test_toml_file_and_environment_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    Path("spate.toml").write_text('database_url = "sqlite:///from-toml.db"\n'
                                  'rate_limit_burst = 7\n')
    monkeypatch.setenv("SPATE_RATE_LIMIT_BURST", "9")
    settings = Settings()
    assert settings.database_url == "sqlite:///from-toml.db"
    assert settings.rate_limit_burst == 9


def test_unknown_toml_key_is_refused() -> None:
    Path("spate.toml").write_text('databse_url = "sqlite:///typo.db"\n')
    with pytest.raises(ValidationError, match="databse_url"):
        Settings()


@pytest.mark.parametrize("weak", [
    "short",
    "changeme" * 4,
    "changethis-changethis-changethis",
    "a" * 64,
    "0123456701234567012345670123456701234567",
])
def test_weak_platform_keys_are_refused_without_echoing_them(weak: str) -> None:
    with pytest.raises(ValidationError) as raised:
        Settings(platform_admin_key=weak)
    assert "platform_admin_key" in str(raised.value)
    assert weak not in str(raised.value)


@pytest.mark.parametrize(("field", "value"), [
    ("database_url", "mysql://root@db/spate"),
    ("redis_url", "http://cache:6379"),
    ("rate_limit_per_minute", -1),
    ("max_body_bytes", 10),
])
def test_bad_values_are_refused(field: str, value: object) -> None:
    with pytest.raises(ValidationError, match=field):
        Settings(**{field: value})


def test_the_secret_is_hidden_in_the_settings_repr() -> None:
    settings = Settings(platform_admin_key=STRONG_KEY)
    assert STRONG_KEY not in repr(settings)
    assert STRONG_KEY not in str(settings.model_dump())


def test_every_scheduler_field_comes_from_a_setting_or_is_left_at_its_default() -> None:
    # scheduler_config copies same-named settings as they are, converts a few, and leaves
    # DEFAULTED_SCHEDULER_FIELDS alone: a SchedulerConfig field with neither a setting of
    # its name nor a conversion fails here (no setting to read), one both defaulted and a
    # setting would ignore the setting.
    settings = Settings(applications="on", idle_stop_s=30, restart_budget=7,
                        application_memory_mb=1234, max_starting_jobs=3)
    config = scheduler_config(settings)
    assert (config.restart_budget, config.application_memory_mb, config.max_starting_jobs) == (
        7, 1234, 3)
    assert config.applications is True and config.idle_stop_s == 30
    assert not DEFAULTED_SCHEDULER_FIELDS & set(Settings.model_fields)
    assert DEFAULTED_SCHEDULER_FIELDS <= {field.name for field in fields(SchedulerConfig)}


def test_the_kubernetes_backend_reads_its_prefixed_settings() -> None:
    settings = Settings(k8s_image="registry/spate:7", k8s_tenant_cpu="3",
                        k8s_checkpoint_claim="checkpoints", k8s_job_cidrs="10.0.0.0/8")
    kubernetes = scheduler_config(settings).kubernetes
    assert (kubernetes.image, kubernetes.tenant_cpu, kubernetes.checkpoint_claim) == (
        "registry/spate:7", "3", "checkpoints")
    assert kubernetes.job_cidrs == ("10.0.0.0/8",)
    prefixed = {name.removeprefix(KUBERNETES_PREFIX) for name in Settings.model_fields
                if name.startswith(KUBERNETES_PREFIX)}
    assert prefixed | DEFAULTED_KUBERNETES_FIELDS | {"channel_redis_url"} == {
        field.name for field in fields(KubernetesConfig)}
