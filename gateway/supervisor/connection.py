"""Redis clients and the boundary where redis-py errors become ours.

Callers share one bounded pool per process: under load they queue for a
connection instead of opening more (1,000 waiting callers, a handful of
connections). The job path and the blocking readers use ``wire.Wire``
connections instead, so a BLOCK never holds a pool slot.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, ParamSpec, Protocol, TypeVar
from urllib.parse import urlsplit

import redis.asyncio as aioredis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff
from redis.exceptions import ClusterDownError, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.errors import BackendUnavailable

P = ParamSpec("P")
T = TypeVar("T")


class Commands(Protocol):
    """A client that runs one raw command: redis-py's ``Redis`` and a ``wire.Wire``
    both (Function calls and the per-connection checks take either)."""

    async def execute_command(self, *args: Any) -> Any: ...


#: Error replies that mean "not now", not "no": Redis is loading its dataset
#: (just after a restart), busy in a long script, a replica without its master,
#: a cluster slot on the move. They pass like an outage does.
TRANSIENT_REPLIES = frozenset({"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"})


class RedisNotReady(RedisConnectionError):  # type: ignore[misc]  # redis-py's class is untyped
    """A transient error reply, raised as a connection error (redis-py does the
    same with its ``BusyLoadingError``), so every ``except UNAVAILABLE`` and the
    pool's retry treat it as the outage it is, not as a refusal of the command."""


def transient(reply: ResponseError) -> bool:
    """Whether an error reply is one of TRANSIENT_REPLIES. redis-py's parser
    moves the code out of the message (into ``status_code``, and a class of its
    own for some, such as ``ClusterDownError``); hiredis on the wire keeps it in."""
    code = getattr(reply, "status_code", None) or str(reply).partition(" ")[0]
    return code in TRANSIENT_REPLIES or isinstance(reply, ClusterDownError | TryAgainError)


def reply_error(reply: ResponseError) -> ResponseError | RedisNotReady:
    """The exception an error reply raises: ``RedisNotReady`` for a transient one."""
    return RedisNotReady(str(reply)) if transient(reply) else reply


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


def guarded(fn: Callable[P, Awaitable[T]]) -> Callable[P, Coroutine[Any, Any, T]]:
    """Map "Redis unreachable" (or answering a transient error, such as LOADING)
    to BackendUnavailable (-32007) at the supervisor boundary.

    Typed as returning a coroutine (what it is) so callers can hand the result
    to ``asyncio.create_task``."""

    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except UNAVAILABLE:
            raise BackendUnavailable() from None
        except ResponseError as exc:
            if transient(exc):  # from redis-py's own parser (it maps only LOADING itself)
                raise BackendUnavailable() from None
            raise

    return wrapper


StreamEntry = tuple[str, dict[str, str]]


def _entries(raw: Any) -> list[StreamEntry]:
    return [(str(entry_id), dict(fields or {})) for entry_id, fields in raw or []]


async def xrange_after(
    client: aioredis.Redis, stream: str, after: str, count: int
) -> list[StreamEntry]:
    """Entries strictly after ``after``, oldest first."""
    return _entries(await client.xrange(stream, min=f"({after}", count=count))
