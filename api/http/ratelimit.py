"""Per-tenant request rate limits: a generic cell-rate algorithm (GCRA).

Each bucket (a tenant, or the platform admin) may make ``burst`` requests at
once and then ``per_minute`` requests a minute, evenly spaced: the limiter's own
limit, or the one a call passes (a tenant's plan's, :mod:`spate.api.quotas`).
GCRA keeps one number per bucket — the theoretical arrival time of the next
request — so it is exact without counting windows. With Redis the check is one
Lua script run atomically on Redis's clock, shared by every API process; without
Redis (the embedded mode) the same algorithm runs in process memory.

When Redis cannot be reached the limiter lets requests through and logs: an
outage of the limiter should not become an outage of the API.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import redis
from cachetools import LRUCache

logger = logging.getLogger(__name__)

_REDIS_BACKOFF_S = 5.0
#: Buckets an in-memory limiter remembers (the least recently used are forgotten).
MEMORY_BUCKETS = 100_000

# KEYS[1]: the bucket; ARGV[1]: ms between requests; ARGV[2]: burst.
# Returns the ms until one more request would be allowed (0: now), changing nothing.
_PEEK_SCRIPT = """
local now_parts = redis.call('TIME')
local now_ms = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local interval_ms = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or now_ms)
if tat < now_ms then tat = now_ms end
local wait_ms = tat + interval_ms - interval_ms * tonumber(ARGV[2]) - now_ms
if wait_ms > 0 then return math.ceil(wait_ms) end
return 0
"""

# KEYS[1]: the bucket; ARGV[1]: ms between requests; ARGV[2]: burst.
# Returns 0 when allowed, else the ms until the request would be allowed.
_GCRA_SCRIPT = """
local now_parts = redis.call('TIME')
local now_ms = tonumber(now_parts[1]) * 1000 + math.floor(tonumber(now_parts[2]) / 1000)
local interval_ms = tonumber(ARGV[1])
local tolerance_ms = interval_ms * tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now_ms)
if tat < now_ms then tat = now_ms end
local next_tat = tat + interval_ms
local wait_ms = next_tat - tolerance_ms - now_ms
if wait_ms > 0 then return math.ceil(wait_ms) end
redis.call('SET', KEYS[1], tostring(next_tat), 'PX', math.ceil(next_tat - now_ms) + 1000)
return 0
"""


@dataclass(frozen=True)
class RateLimit:
    """``burst`` requests at once, then ``per_minute`` a minute."""

    per_minute: int
    burst: int

    @property
    def interval_ms(self) -> float:
        return 60_000.0 / self.per_minute


class RateLimiter(Protocol):
    def acquire(self, bucket: str, limit: RateLimit | None = None) -> int | None:
        """None when the request may proceed, else seconds to wait (at least 1);
        ``limit`` replaces the limiter's own for this bucket."""

    def blocked(self, bucket: str, limit: RateLimit | None = None) -> int | None:
        """Like :meth:`acquire`, but only asks: the bucket is left as it was."""

    def close(self) -> None:
        """Release connections."""


def _retry_after_s(wait_ms: float) -> int:
    return max(1, math.ceil(wait_ms / 1000.0))


class RedisRateLimiter:
    """GCRA in Redis: one key per bucket, checked and updated atomically."""

    def __init__(self, client: redis.Redis, limit: RateLimit, key_prefix: str) -> None:
        self._client = client
        self._limit = limit
        self._key_prefix = key_prefix
        self._script = client.register_script(_GCRA_SCRIPT)
        self._peek = client.register_script(_PEEK_SCRIPT)
        self._skip_until = 0.0

    @classmethod
    def from_url(cls, url: str, limit: RateLimit, key_prefix: str) -> RedisRateLimiter:
        client = redis.Redis.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)
        return cls(client, limit, key_prefix)

    def key(self, bucket: str) -> str:
        return f"{self._key_prefix}ratelimit:{bucket}"

    def acquire(self, bucket: str, limit: RateLimit | None = None) -> int | None:
        return self._run(self._script, bucket, limit or self._limit)

    def blocked(self, bucket: str, limit: RateLimit | None = None) -> int | None:
        return self._run(self._peek, bucket, limit or self._limit)

    def _run(self, script: Any, bucket: str, limit: RateLimit) -> int | None:
        if time.monotonic() < self._skip_until:
            return None
        try:
            wait_ms = int(script(keys=[self.key(bucket)],
                                 args=[limit.interval_ms, limit.burst]))
        except redis.RedisError as error:
            self._skip_until = time.monotonic() + _REDIS_BACKOFF_S
            logger.warning("rate limiter unavailable; allowing requests for %.0f s",
                           _REDIS_BACKOFF_S, extra={"error": type(error).__name__})
            return None
        return _retry_after_s(wait_ms) if wait_ms > 0 else None

    def close(self) -> None:
        self._client.close()


class MemoryRateLimiter:
    """GCRA in this process's memory, for the embedded mode.

    It remembers the :data:`MEMORY_BUCKETS` most recently used buckets, so
    callers inventing bucket names (client addresses, key ids) cannot grow it
    without bound.
    """

    def __init__(self, limit: RateLimit) -> None:
        self._limit = limit
        self._tat_ms: LRUCache[str, float] = LRUCache(MEMORY_BUCKETS)
        self._lock = threading.Lock()

    def acquire(self, bucket: str, limit: RateLimit | None = None) -> int | None:
        return self._check(bucket, limit or self._limit, take=True)

    def blocked(self, bucket: str, limit: RateLimit | None = None) -> int | None:
        return self._check(bucket, limit or self._limit, take=False)

    def _check(self, bucket: str, limit: RateLimit, take: bool) -> int | None:
        now_ms = time.monotonic() * 1000.0
        with self._lock:
            tat = max(self._tat_ms.get(bucket, now_ms), now_ms)
            next_tat = tat + limit.interval_ms
            wait_ms = next_tat - limit.interval_ms * limit.burst - now_ms
            if wait_ms > 0:
                return _retry_after_s(wait_ms)
            if take:
                self._tat_ms[bucket] = next_tat
            return None

    def close(self) -> None:
        """Nothing to release: the buckets stay, as the app that owns them may serve again."""


def create_rate_limiter(redis_url: str | None, limit: RateLimit | None,
                        key_prefix: str) -> RateLimiter | None:
    """The limiter the settings ask for; None when limits are off."""
    if limit is None:
        return None
    if redis_url is None:
        return MemoryRateLimiter(limit)
    return RedisRateLimiter.from_url(redis_url, limit, key_prefix)
