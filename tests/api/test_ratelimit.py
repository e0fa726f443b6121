"""Per-tenant rate limits in Redis: 429 with Retry-After, one bucket per tenant."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

import pytest
import redis
from fastapi import FastAPI

from spate.api.http.ratelimit import MemoryRateLimiter, RateLimit, RedisRateLimiter
from tests.api.support import TestClient, error_of, new_tenant

PIPELINES = "/api/v1/pipelines"


@pytest.fixture
def limiter(redis_url: str, redis_prefix: str) -> RedisRateLimiter:
    return RedisRateLimiter.from_url(redis_url, RateLimit(per_minute=60, burst=3),
                                     f"{redis_prefix}{secrets.token_hex(4)}:")


def test_burst_then_refusal_with_the_wait(limiter: RedisRateLimiter) -> None:
    assert [limiter.acquire("t1") for _ in range(3)] == [None, None, None]
    wait_s = limiter.acquire("t1")
    assert wait_s is not None and 1 <= wait_s <= 1  # one request a second at 60/min
    assert limiter.acquire("t2") is None  # another bucket is unaffected
    limiter.close()


def test_the_bucket_refills(redis_url: str, redis_prefix: str) -> None:
    fast = RedisRateLimiter.from_url(redis_url, RateLimit(per_minute=600, burst=1),
                                     f"{redis_prefix}{secrets.token_hex(4)}:")
    assert fast.acquire("t") is None
    assert fast.acquire("t") is not None
    time.sleep(0.15)  # 600/min is one request per 100 ms
    assert fast.acquire("t") is None
    fast.close()


def test_bucket_keys_expire(limiter: RedisRateLimiter, redis_url: str) -> None:
    limiter.acquire("expiring")
    client = redis.Redis.from_url(redis_url)
    try:
        ttl_ms = client.pttl(limiter.key("expiring"))
        assert 0 < ttl_ms <= 3000
    finally:
        client.close()


def test_redis_down_lets_requests_through() -> None:
    unreachable = RedisRateLimiter.from_url("redis://127.0.0.1:1/0", RateLimit(60, 1), "x:")
    assert [unreachable.acquire("t") for _ in range(3)] == [None, None, None]
    unreachable.close()


def test_memory_limiter_matches() -> None:
    memory = MemoryRateLimiter(RateLimit(per_minute=60, burst=2))
    assert memory.acquire("a") is None and memory.acquire("a") is None
    assert memory.acquire("a") == 1
    assert memory.acquire("b") is None


def test_over_the_limit_is_429_with_retry_after(backend: str, redis_prefix: str,
                                               make_app: Callable[..., FastAPI]) -> None:
    # A token every 12 s (a tenant's burst is at most its rate a minute): none comes back
    # while the test runs (at 60 a minute, a loaded CI machine took over a second between
    # two requests and got one back).  Its buckets are its own: the platform key's bucket,
    # drained at this rate, would refuse the other tests' apps for a minute.
    own_buckets = f"{redis_prefix}{secrets.token_hex(4)}:"
    with TestClient(make_app(backend, rate_limit_per_minute=5, rate_limit_burst=5,
                             redis_key_prefix=own_buckets),
                    raise_server_exceptions=False) as client:
        # Making a tenant spends a platform request and two of the tenant's own.
        noisy, quiet = new_tenant(client), new_tenant(client)
        statuses = [client.get(PIPELINES, headers=noisy.auth("viewer")).status_code
                    for _ in range(6)]
        assert statuses.count(429) >= 1 and statuses[0] == 200
        limited = client.get(PIPELINES, headers=noisy.auth("admin"))  # same tenant, same bucket
        assert limited.status_code == 429
        assert error_of(limited)["code"] == "rate_limited"
        assert int(limited.headers["Retry-After"]) >= 1
        assert client.get(PIPELINES, headers=quiet.auth("viewer")).status_code == 200

