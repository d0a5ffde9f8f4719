"""A lean, multiplexed Redis connection: the supervisor's and the actor's one client.

redis-py's asyncio client spends about 60 µs of Python per command around a
25 µs loopback round trip (pool checkout, a lock per connection): measured
with uvloop, a PING took 94 µs through the pool and 32 µs on the wire
(``bench/wire_ping.py``; figures in ``bench/analysis.md``). Every
hop of a run-and-wait is one such call, so every command of the supervisor
and the actor goes through a ``Wire``:

- one socket, shared by every caller of the process, with no checkout: a
  command is queued at once and its reply matched to it in order, since
  Redis answers the commands of one connection in the order they came;
- the commands queued in one turn of the event loop leave in one write, by
  the link's writer task, so concurrent callers are pipelined without asking
  for it; no caller writes itself, so a caller cancelled mid-write (a wait
  that timed out) cannot make redis-py drop the connection under the others;
- a command is packed before it is queued: one that cannot be packed fails
  alone and never takes a place in the line of replies;
- the socket is one of redis-py's own connections, built from the URL by
  its public pieces (``ConnectionPool.from_url`` → ``make_connection`` →
  ``connect``): TLS, AUTH, SELECT, CLIENT SETNAME, timeouts and TCP
  keepalive are redis-py's, so a URL means the same here as anywhere. The
  wire only multiplexes it, with ``send_packed_command`` and a reader loop
  on ``read_response``, and never uses the pool itself.

The errors are redis-py's, so callers keep one set of ``except`` clauses:
``ResponseError`` for an error reply (a transient one such as BUSY is a
``connection.RedisNotReady``, a ``ConnectionError``; redis-py raises LOADING
as a ``ConnectionError`` and drops the socket), ``ConnectionError`` when the
socket is lost (every command in flight fails with it and nothing is
re-sent, since a command may have run: an actor's ``hero_cycle`` must never
run twice), ``TimeoutError`` when connecting takes too long, or when Redis
owes replies and sends none for ``timeout`` seconds. The next command after
a loss connects again.

That last one is the stall watch. A Redis that is stopped (SIGSTOP, a
frozen VM) or wedged keeps its TCP connections open, so neither keepalive
nor a read error ever ends a call; and no read can carry a timeout of its
own, since replies are matched in order on one socket. So the link watches
itself instead: it notes the loop's clock when a reply comes and when a
command is sent while none was owed, and a timer every
``timeout / STALL_TICKS`` seconds ends the link as if lost once replies
are owed and that note is ``timeout`` old, failing every command in flight
with ``TimeoutError``: between one and 1¼ timeouts of silence. A
connection that BLOCKs by design (XREAD BLOCK, BLPOP) or is in pub/sub mode
has no timeout: it waits as long as Redis does and resumes with it. (Redis
answers what it read in one go together, so a pipeline counts as one
command: its replies come when its last one is done.)

A ``subscriber.Subscriber`` is the same connection in pub/sub mode: Redis pushes
messages to it, and they go to a callback instead of a waiting caller.
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


class _Link:
    """One connected redis-py connection, multiplexed: replies in, one future
    each; or, in pub/sub mode, pushes to ``on_push``."""

    def __init__(self, conn: AbstractConnection, timeout: float | None) -> None:
        loop = asyncio.get_running_loop()
        self.conn = conn
        self._timeout = timeout
        self._clock = loop.time
        #: The stall watch's last sign of life: a reply, or a send when none was owed.
        self._heard = loop.time()
        self._watch = None if timeout is None else loop.call_later(timeout, self._check)
        #: Set once the handshake is answered, for a connection in pub/sub mode.
        self.on_push: Push | None = None
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

    def _check(self) -> None:
        """One tick of the stall watch (module docstring)."""
        assert self._timeout is not None
        if not self.waiting or self._clock() - self._heard < self._timeout:
            loop = asyncio.get_running_loop()
            self._watch = loop.call_later(self._timeout / STALL_TICKS, self._check)
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


class Wire:
    """One multiplexed connection to the Redis at ``url``; see the module docstring.
    The one implementation of ``connection.Commands``."""

    def __init__(
        self,
        url: str,
        name: str,
        *,
        timeout: float | None = None,
        on_push: Push | None = None,
        track: Sequence[str] = (),
    ) -> None:
        """``timeout``: seconds Redis may owe replies and send none before the
        link counts as lost (the stall watch, module docstring); None for a
        connection that BLOCKs or subscribes."""
        self._url = url
        self._name = name
        self._timeout = timeout
        self._link: _Link | None = None
        self._connecting: asyncio.Lock | None = None
        self._on_push = on_push
        self._track = track
        #: Whether Redis agreed to tell this connection of changes under ``track``.
        self.tracking = False
        self._closed = False

    async def execute_command(self, *args: Any) -> Any:
        """The reply to one command; an error reply raises (same name and shape
        as redis-py's)."""
        link = self._link or await self._connect()
        (future,) = link.send([args])
        return await future

    async def pipeline(
        self, commands: Sequence[Sequence[Any]], *, errors_in_place: bool = False
    ) -> list[Any]:
        """Every command's reply in order, sent in one write. An error reply
        raises, the first one, once every reply is in (redis-py's rule), unless
        ``errors_in_place``: then it stands in its place (a ``ResponseError``,
        or a ``RedisNotReady`` for a transient one such as BUSY, which may have
        refused some commands of the pipeline and not others), for a batch
        whose commands are answered one by one (a submission). A lost
        connection raises either way."""
        link = self._link or await self._connect()
        futures = link.send(commands)
        replies: list[Any] = []
        try:
            for future in futures:  # answered in order: no gather needed
                try:
                    replies.append(await future)
                except (ResponseError, RedisNotReady) as exc:
                    replies.append(exc)
        except BaseException:  # lost or cancelled: the rest is nobody's now
            for future in futures:
                if not future.done():
                    future.cancel()
                elif not future.cancelled():
                    future.exception()  # retrieved, so asyncio does not log it
            raise
        if not errors_in_place:
            for reply in replies:
                if isinstance(reply, ResponseError | RedisNotReady):
                    raise reply
        return replies

    async def post(self, *args: Any) -> asyncio.Future[None]:
        """Send a command whose answer comes as a push (``on_push`` connections:
        SUBSCRIBE); the returned future ends when this connection is lost."""
        link = self._link or await self._connect()
        link.post([args])
        return asyncio.shield(link.lost)  # a cancelled waiter must not end it

    async def aclose(self) -> None:
        """Close the socket: a command in flight (a BLOCKing read too) fails at once."""
        self._closed = True
        link, self._link = self._link, None
        if link is not None:
            await link.close()

    async def _connect(self) -> _Link:
        if self._closed:
            raise RedisConnectionError("connection closed")
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:  # one dial for every caller that found it down
            if self._link is not None:
                return self._link
            link = await self._dial()
            if self._closed:
                await link.close()
                raise RedisConnectionError("connection closed")
            link.lost.add_done_callback(lambda _: self._forget(link))
            self._link = link
            return link

    def _forget(self, link: _Link) -> None:
        if self._link is link:
            self._link = None

    async def _dial(self) -> _Link:
        conn = connection(self._url, self._name)
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT):
                await conn.connect()  # socket, TLS, AUTH, SELECT, SETNAME: redis-py's
        except TimeoutError:
            await conn.disconnect(nowait=True)
            raise RedisTimeoutError("timed out connecting to Redis") from None
        except (AuthenticationError, ResponseError) as exc:  # AUTH or SELECT refused,
            await conn.disconnect(nowait=True)  # unless only for now (BUSY, MASTERDOWN)
            raise (RedisNotReady(str(exc)) if transient(exc) else RedisRefused(exc)) from None
        except BaseException:  # cancelled, or refused otherwise: no half-open socket left
            await conn.disconnect(nowait=True)
            raise
        link = _Link(conn, self._timeout)
        try:
            self.tracking = bool(self._track) and await _track(link, self._track)
        except BaseException:
            await link.close()
            raise
        link.on_push = self._on_push  # the handshake was answered as ordinary replies
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


async def _track(link: _Link, prefixes: Sequence[str]) -> bool:
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
