"""Fixtures shared by every test package."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest


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
