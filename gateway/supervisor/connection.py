"""The Redis port (``Commands``) and the boundary where redis-py errors become ours.

Every Redis access of the supervisor and the actor goes through a
``Commands``, a ``wire.Wire``: one multiplexed connection per process for
ordinary commands, and a connection of its own for each that blocks
(BLPOP, XREAD BLOCK) or is in pub/sub mode.
"""

from __future__ import annotations

import functools
import socket
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar
from urllib.parse import parse_qs, urlsplit

from redis.asyncio.connection import AbstractConnection, Connection, ConnectionPool
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ClusterDownError, ResponseError, TryAgainError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.errors import BackendUnavailable, JobNotFound
from gateway.model.job import TEXT_ERRORS

P = ParamSpec("P")
T = TypeVar("T")
S = TypeVar("S")


class Commands(Protocol):
    """What the supervisor and the actor need of Redis; its one implementation
    is ``wire.Wire`` (a multiplexed connection built by redis-py).

    Commands are raw (``"HGET", key, field``) and replies come as Redis sends
    them, decoded by ``replies``. An error reply raises (redis-py's
    ``ResponseError``; a transient one is ``RedisNotReady``), in ``pipeline``
    too, once every reply is in, unless ``errors_in_place`` asks for the
    error to stand in its command's place (a batch answered per command). A
    lost connection raises ``ConnectionError`` and nothing is re-sent.
    """

    async def execute_command(self, *args: Any) -> Any: ...

    async def pipeline(
        self, commands: Sequence[Sequence[Any]], *, errors_in_place: bool = False
    ) -> list[Any]: ...

    async def aclose(self) -> None: ...


async def scan(client: Commands, match: str) -> list[str]:
    """Every key matching ``match``, by SCAN (never KEYS, which blocks Redis)."""
    found: list[str] = []
    cursor = "0"
    while True:
        cursor, batch = await client.execute_command("SCAN", cursor, "MATCH", match, "COUNT", 1000)
        found += batch
        if cursor == "0":
            return found


CONNECT_TIMEOUT = 2.0

#: TCP keepalive: idle seconds before the first probe, seconds between probes,
#: probes. A Redis host that vanished without closing (a partition, a dead
#: VM) fails the calls in flight after about a minute instead of the
#: kernel's two hours; nothing is read with a timeout, since BLOCKing reads
#: wait for seconds by design.
KEEPALIVE = (30, 10, 3)


def _keepalive_options() -> dict[int, int]:
    names = ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT")
    return {  # Linux; macOS names the first one differently
        getattr(socket, n): v for n, v in zip(names, KEEPALIVE, strict=True) if hasattr(socket, n)
    }


def connection(url: str, name: str) -> AbstractConnection:
    """An unconnected redis-py connection for ``url``, as redis-py builds it
    for its own pools (URL options included), named ``hero-gateway/<name>``
    (CLIENT SETNAME, so operators see who holds it), never retried (a lost
    command is not re-sent) and read without a timeout (BLOCKing reads)."""
    pool = ConnectionPool.from_url(
        url,
        client_name=f"hero-gateway/{name}",
        decode_responses=True,
        # what Redis holds need not be UTF-8 (any producer may write bytes):
        # such a byte decodes to a lone surrogate instead of failing the reply,
        # which would end the connection and every call in flight on it, and
        # goes back to Redis as the same byte (wire._pack)
        encoding_errors=TEXT_ERRORS,
        socket_connect_timeout=CONNECT_TIMEOUT,
        socket_timeout=None,
        health_check_interval=0,
        retry=Retry(NoBackoff(), 0),
        protocol=2,
    )
    if issubclass(pool.connection_class, Connection):  # TCP or TLS, not a unix socket
        pool.connection_kwargs.update(
            socket_keepalive=True, socket_keepalive_options=_keepalive_options()
        )
    return pool.make_connection()


#: Error replies that mean "not now", not "no": Redis is loading its dataset
#: (just after a restart), busy in a long script, a replica without its master,
#: a cluster slot on the move. They pass like an outage does.
TRANSIENT_REPLIES = frozenset({"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"})


class RedisNotReady(RedisConnectionError):  # type: ignore[misc]  # redis-py's class is untyped
    """A transient error reply, raised as a connection error (redis-py does the
    same with its ``BusyLoadingError``), so every ``except UNAVAILABLE`` treats it
    as the outage it is, not as a refusal of the command."""


class RedisRefused(RedisConnectionError):  # type: ignore[misc]  # redis-py's class is untyped
    """Redis answered the handshake (AUTH, SELECT, CLIENT SETNAME) with a refusal:
    a wrong password or user, no such database, a user without permission.

    A ``ConnectionError``, as redis-py raises a wrong password, so that every
    ``except UNAVAILABLE`` still treats the command as not run; a class of its
    own because waiting does not fix it: an actor gives up rather than retry
    for ever, and a command says what to change (``logs.redis_failure``)."""

    def __init__(self, reply: Exception) -> None:
        super().__init__(f"Redis refused the connection: {reply}")
        self.reply = reply


def transient(reply: ResponseError) -> bool:
    """Whether an error reply is one of TRANSIENT_REPLIES. redis-py's parser
    moves the code out of the message (into ``status_code``, and a class of its
    own for some, such as ``ClusterDownError``) and keeps the codes it does not
    know (BUSY) in it."""
    code = getattr(reply, "status_code", None) or str(reply).partition(" ")[0]
    return code in TRANSIENT_REPLIES or isinstance(reply, ClusterDownError | TryAgainError)


def reply_error(reply: ResponseError) -> ResponseError | RedisNotReady:
    """The exception an error reply raises: ``RedisNotReady`` for a transient one."""
    return RedisNotReady(str(reply)) if transient(reply) else reply


#: Errors that mean "Redis is not reachable right now".
UNAVAILABLE = (RedisConnectionError, RedisTimeoutError, OSError)


async def lenient(client: Commands, commands: Sequence[Sequence[Any]]) -> list[Any]:
    """Every command's reply in order, None for one Redis refused (a key
    someone made another type): for reads over many jobs or queues, where one
    such key must not fail the listing, the stats or the metrics of them all.
    A transient refusal still raises, like the outage it is."""
    replies = await client.pipeline(commands, errors_in_place=True)
    for reply in replies:
        if isinstance(reply, RedisNotReady):
            raise reply
    return [None if isinstance(r, ResponseError) else r for r in replies]


def user_of(url: str) -> str:
    """The Redis user a URL connects as (never its password), for the logs and
    refusals. As redis-py reads it: the user before the @, else a ``username``
    query parameter (``redis://host/0?username=u&password=…``), else default."""
    parts = urlsplit(url)
    return parts.username or parse_qs(parts.query).get("username", ["default"])[0]


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


def wrong_type(exc: Exception) -> bool:
    """Whether Redis refused a command for its key's type (the key of a job a
    producer made another type: no such job, for a read of it)."""
    return isinstance(exc, ResponseError) and str(exc).startswith("WRONGTYPE")


def guarded_job(
    fn: Callable[Concatenate[S, str, P], Awaitable[T]],
) -> Callable[Concatenate[S, str, P], Coroutine[Any, Any, T]]:
    """``guarded`` for a read of one job (``self, job_id, ...``) that reads
    only its hash: a job key Redis refuses to read as a hash (a producer made
    it a key of another type) answers as no such job, not as -32603."""

    @functools.wraps(fn)
    async def wrapper(self: S, job_id: str, /, *args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(self, job_id, *args, **kwargs)
        except ResponseError as exc:
            if wrong_type(exc):
                raise JobNotFound(job_id) from None
            raise

    return guarded(wrapper)
