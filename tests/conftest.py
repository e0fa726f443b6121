"""Fixtures shared by every test package."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator

import pytest
import redis


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local SparkSession for the whole test session (it takes seconds to start)."""
    from engine.spark import build_spark

    session = build_spark(os.environ.get("SPATE_TEST_SPARK_MASTER", "local[2]"), "spate-tests")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The real PostgreSQL server the integration tests use."""
    return os.environ.get("SPATE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The real Redis server the integration tests use."""
    return os.environ.get("SPATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def redis_key_prefix(url: str) -> Iterator[str]:
    """A fresh key prefix; every key under it is deleted when the generator closes.

    For fixtures of any scope: ``yield from redis_key_prefix(redis_url)``.
    """
    prefix = f"spate-test-{secrets.token_hex(6)}:"
    yield prefix
    client = redis.Redis.from_url(url)
    try:
        keys = list(client.scan_iter(match=f"{prefix}*", count=500))
        if keys:
            client.delete(*keys)
    finally:
        client.close()
