"""Redis clients and the boundary where redis-py errors become ours.

Callers share one bounded pool per process: under load they queue for a
connection instead of opening more (1,000 waiting callers, a handful of
connections). The job path and the blocking readers use ``wire.Wire``
connections instead, so a BLOCK never holds a pool slot.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol, TypeVar
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.errors import BackendUnavailable

P = ParamSpec("P")
T = TypeVar("T")


class Commands(Protocol):
    """A client that runs one raw command: redis-py's ``Redis`` and a ``wire.Wire``
    both (Function calls and the per-connection checks take either)."""

    async def execute_command(self, *args: Any) -> Any: ...


#: Errors that mean "Redis is not reachable right now".
UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, OSError)


def pooled(url: str, max_connections: int, name: str, *, resend: bool = True) -> aioredis.Redis:
    """A shared pool; ``name`` (CLIENT SETNAME) tells operators who holds a connection.

    ``resend``: retry a command once more on a connection error, which mostly
    means a pooled socket went stale across a Redis restart (the command never
    ran). The actor turns it off: a re-sent ``hero_cycle`` whose first reply
    was lost would claim twice, so it recovers its held jobs itself instead.
    """
    pool = aioredis.BlockingConnectionPool.from_url(
        url,
        client_name=f"hero-gateway/{name}",
        max_connections=max_connections,
        timeout=None,
        decode_responses=True,
        socket_connect_timeout=2,
        health_check_interval=30,
        retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), retries=2 if resend else 0),
        retry_on_error=[RedisConnectionError],
    )
    return aioredis.Redis.from_pool(pool)  # owns the pool: aclose() closes it


def user_of(url: str) -> str:
    """The Redis user a URL connects as (never its password), for the logs."""
    return urlsplit(url).username or "default"


def guarded(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Map "Redis unreachable" to BackendUnavailable (-32007) at the supervisor boundary."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except UNAVAILABLE:
            raise BackendUnavailable() from None

    return wrapper


StreamEntry = tuple[str, dict[str, str]]


def _entries(raw: Any) -> list[StreamEntry]:
    return [(str(entry_id), dict(fields or {})) for entry_id, fields in raw or []]


async def xrange_after(
    client: aioredis.Redis, stream: str, after: str, count: int
) -> list[StreamEntry]:
    """Entries strictly after ``after``, oldest first."""
    return _entries(await client.xrange(stream, min=f"({after}", count=count))
