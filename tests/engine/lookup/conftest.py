"""Fixtures of the lookup tests (real Redis and PostgreSQL)."""

from tests.engine.lookup.support import pg_table, redis_client, redis_prefix

__all__ = ["pg_table", "redis_client", "redis_prefix"]
