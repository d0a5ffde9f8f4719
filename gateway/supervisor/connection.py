"""Redis clients and the boundary where redis-py errors become ours.

Callers share one bounded pool per process: under load they queue for a
connection instead of opening more (1,000 waiting callers, a handful of
connections). Blocking readers get their own single connection each, so a
BLOCK never holds a pool slot.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.errors import BackendUnavailable

P = ParamSpec("P")
T = TypeVar("T")

#: Errors that mean "Redis is not reachable right now".
UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, OSError)


def pooled(url: str, max_connections: int) -> aioredis.Redis:
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        max_connections=max_connections,
        timeout=None,
        decode_responses=True,
        socket_connect_timeout=2,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=2),
        retry_on_error=[RedisConnectionError],
    )
    return aioredis.Redis(connection_pool=pool)


def dedicated(url: str) -> aioredis.Redis:
    """One connection for one blocking reader (XREAD/BLPOP BLOCK)."""
    return aioredis.Redis.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=2,
        single_connection_client=True,
    )


def guarded(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Map "Redis unreachable" to BackendUnavailable (-32007) at the supervisor boundary."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except UNAVAILABLE:
            raise BackendUnavailable() from None

    return wrapper
