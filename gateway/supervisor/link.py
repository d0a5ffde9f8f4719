"""One Redis socket, multiplexed: the line of replies, the writer, the stall watch.

The socket is one of redis-py's own connections, built from the URL by its
public pieces (``ConnectionPool.from_url`` → ``make_connection`` →
``connect``): TLS, AUTH, SELECT, CLIENT SETNAME, timeouts and TCP keepalive
are redis-py's, so a URL means the same here as anywhere. A ``Link`` only
multiplexes it, with ``send_packed_command`` and a reader loop on
``read_response``, and never uses the pool itself. ``wire.Wire`` is the
client built on it, dialling a new link after a loss.

The stall watch: a Redis that is stopped (SIGSTOP, a frozen VM) or
wedged keeps its TCP connections open, so neither keepalive
nor a read error ever ends a call; and no read can carry a timeout of its
own, since replies are matched in order on one socket. So the link watches
itself instead: it notes the loop's clock when a reply comes and when a
command is sent while none was owed, and a timer every
``timeout / STALL_TICKS`` seconds ends the link as if lost once replies
are owed and that note is ``timeout`` old, failing every command in flight
with ``TimeoutError``: between one and 1¼ timeouts of silence. A tick that
runs late by half a tick or more (this process's loop was blocked, and a
reply may be waiting unread behind it) only arms the next one, so a busy
process never blames Redis for its own slowness. A connection that BLOCKs
by design (XREAD BLOCK, BLPOP) or is in pub/sub mode has no timeout: it
waits as long as Redis does and resumes with it.

Silence is counted in whole replies. Redis answers what it read in one go
together, so a pipeline counts as one command, its replies coming when its
last one is done; and a reply of many megabytes over a slow link is silence
until its last byte.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import hiredis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import AuthenticationError, BusyLoadingError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.model.job import as_stored
from gateway.supervisor.connection import (
    CONNECT_TIMEOUT,
    RedisNotReady,
    RedisRefused,
    connection,
    reply_error,
    transient,
)

Push = Callable[[list[Any]], None]

#: Ticks of the stall watch per ``timeout``: the link is ended between one and
#: ``1 + 1 / STALL_TICKS`` timeouts after its last sign of life.
STALL_TICKS = 4


class Link:
    """One connected redis-py connection, multiplexed: replies in, one future
    each; or, in pub/sub mode, pushes to ``on_push``."""

    def __init__(self, conn: AbstractConnection, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        self.conn = conn
        self._timeout = timeout
        self._clock = loop.time
        #: The stall watch's last sign of life: a reply, or a send when none was owed.
        self._heard = loop.time()
        first = self._heard + (timeout or 0.0)
        self._watch = None if timeout is None else loop.call_at(first, self._check, first)
        #: Set once the handshake is answered, for a connection in pub/sub mode.
        self.on_push: Push | None = None
        #: Whether Redis agreed to tell this connection of changes (``dial``'s ``track``).
        self.tracking = False
        self.waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.lost: asyncio.Future[None] = loop.create_future()
        self._outgoing: list[bytes] = []
        self._queued: asyncio.Future[None] = loop.create_future()
        self._closing: asyncio.Task[None] | None = None
        self._reader = loop.create_task(self._read(), name="wire-reader")
        self._writer = loop.create_task(self._write(), name="wire-writer")

    @property
    def up(self) -> bool:
        return not self.lost.done()

    def send(self, commands: Sequence[Sequence[Any]]) -> list[asyncio.Future[Any]]:
        """Queue ``commands`` for this turn's write; a future for each reply.
        Synchronous: the futures join the line of replies in the order of the
        bytes, and nothing can come between."""
        packed = self._pack(commands)  # TypeError here: nothing queued, the line intact
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in commands]
        if not self.waiting:
            self._heard = self._clock()
        self.waiting.extend(futures)
        self._queue(packed)
        return futures

    def post(self, commands: Sequence[Sequence[Any]]) -> None:
        """Queue ``commands`` whose answers come as pushes (pub/sub mode)."""
        self._queue(self._pack(commands))

    def _pack(self, commands: Sequence[Sequence[Any]]) -> list[bytes]:
        if not self.up or not self.conn.is_connected:  # else redis-py would dial again
            raise RedisConnectionError("connection to Redis lost")
        return [_packed(c) for c in commands]

    def _queue(self, packed: list[bytes]) -> None:
        if not packed:
            return
        if not self._outgoing:
            self._queued.set_result(None)  # the writer runs after this turn's callers
        self._outgoing += packed

    async def _write(self) -> None:
        """Write what the callers of each loop turn queued, in one write."""
        loop = asyncio.get_running_loop()
        conn = self.conn
        try:
            while True:
                await self._queued
                self._queued = loop.create_future()
                data, self._outgoing = b"".join(self._outgoing), []
                if not conn.is_connected:  # lost: redis-py would dial again
                    break
                await conn.send_packed_command(data, check_health=False)
        except Exception:
            pass
        self._reader.cancel()

    async def _read(self) -> None:
        conn = self.conn
        try:
            while True:
                try:
                    reply: Any = await conn.read_response()
                except ResponseError as exc:
                    reply = reply_error(exc)
                except RedisConnectionError as exc:
                    if isinstance(exc, BusyLoadingError) and self.waiting:
                        future = self.waiting.popleft()  # LOADING: redis-py dropped the socket
                        if not future.done():
                            future.set_exception(RedisNotReady(str(exc)))
                    raise
                if self.on_push is not None:
                    self.on_push(reply)
                    continue
                self._heard = self._clock()
                future = self.waiting.popleft()
                if future.done():  # its caller gave up; the reply still had its turn
                    continue
                if isinstance(reply, Exception):
                    future.set_exception(reply)
                else:
                    future.set_result(reply)
        except (Exception, asyncio.CancelledError):
            pass
        finally:
            self._end()

    def _check(self, due: float) -> None:
        """One tick of the stall watch (module docstring), meant for ``due``."""
        assert self._timeout is not None
        now, tick = self._clock(), self._timeout / STALL_TICKS
        late = now - due >= tick / 2
        if late or not self.waiting or now - self._heard < self._timeout:
            loop = asyncio.get_running_loop()
            self._watch = loop.call_at(now + tick, self._check, now + tick)
            return
        self._reader.cancel()  # its ``finally`` ends the link too, with nothing left to fail
        self._end(RedisTimeoutError(f"Redis sent no reply for {self._timeout:g} s"))

    def _end(self, error: Exception | None = None) -> None:
        error = error or RedisConnectionError("connection to Redis lost")
        if self._watch is not None:
            self._watch.cancel()
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(error)
        if not self.lost.done():
            self.lost.set_result(None)
        self._writer.cancel()
        if self._closing is None:  # the socket too, not only the tasks (a reader that failed)
            self._closing = asyncio.get_running_loop().create_task(
                self.conn.disconnect(nowait=True)
            )

    async def close(self) -> None:
        """Close the socket: every command in flight fails at once."""
        for task in (self._reader, self._writer):
            task.cancel()
        for task in (self._reader, self._writer):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._end()  # a reader cancelled before its first step never ran its ``finally``
        assert self._closing is not None
        await self._closing


async def dial(
    url: str, name: str, *, reply_timeout: float | None, track: Sequence[str], on_push: Push | None
) -> Link:
    """A connected ``Link`` to ``url`` (redis-py's handshake: socket, TLS,
    AUTH, SELECT, CLIENT SETNAME), watched for stalls after ``reply_timeout``,
    tracking ``track`` when given (``Link.tracking`` says whether Redis
    agreed), its pushes to ``on_push`` once the handshake is done."""
    conn = connection(url, name)
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            await conn.connect()
    except TimeoutError:
        await conn.disconnect(nowait=True)
        raise RedisTimeoutError("timed out connecting to Redis") from None
    except (AuthenticationError, ResponseError) as exc:  # AUTH or SELECT refused,
        await conn.disconnect(nowait=True)  # unless only for now (BUSY, MASTERDOWN)
        raise (RedisNotReady(str(exc)) if transient(exc) else RedisRefused(exc)) from None
    except BaseException:  # cancelled, or refused otherwise: no half-open socket left
        await conn.disconnect(nowait=True)
        raise
    link = Link(conn, reply_timeout)
    try:
        link.tracking = bool(track) and await _track(link, track)
    except BaseException:
        await link.close()
        raise
    link.on_push = on_push  # the handshake was answered as ordinary replies
    return link


def _packed(command: Sequence[Any]) -> bytes:
    """``command`` in RESP. hiredis encodes text strictly; a string read from
    Redis with bytes that were not UTF-8 (``model.job.TEXT_ERRORS``) goes
    back as those bytes, so an actor can report the job it was given."""
    try:
        packed: bytes = hiredis.pack_command(tuple(command))
    except UnicodeEncodeError:
        raw: tuple[Any, ...] = tuple(as_stored(a) if isinstance(a, str) else a for a in command)
        packed = hiredis.pack_command(raw)
    return packed


async def _track(link: Link, prefixes: Sequence[str]) -> bool:
    """Broadcast tracking of the keys under ``prefixes``, redirected to this same
    connection, subscribed to ``INVALIDATE``: Redis names every such key
    written by anyone (no keyspace notifications, so no server setting).
    False, with tracking off again, when Redis refuses any of it (an ACL
    without CLIENT TRACKING or that channel, an old server)."""
    tracking = False
    try:
        (client_id,) = link.send([("CLIENT", "ID")])
        command = ["CLIENT", "TRACKING", "ON", "REDIRECT", await client_id, "BCAST"]
        for prefix in prefixes:
            command += ["PREFIX", prefix]
        (reply,) = link.send([command])
        tracking = await reply == "OK"
        (reply,) = link.send([("SUBSCRIBE", INVALIDATE)])
        await reply
    except ResponseError:
        if tracking:
            (reply,) = link.send([("CLIENT", "TRACKING", "OFF")])
            await reply
        return False
    return True


#: The channel on which a tracking connection in RESP2 hears of written keys.
INVALIDATE = "__redis__:invalidate"
