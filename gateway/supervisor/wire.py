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
- the socket is one of redis-py's own connections (``link.Link``, where
  the multiplexing is), dialled again after a loss, once for every caller
  that finds it down: a failed dial fails them all together.

The errors are redis-py's, so callers keep one set of ``except`` clauses:
``ResponseError`` for an error reply (a transient one such as BUSY is a
``connection.RedisNotReady``, a ``ConnectionError``; redis-py raises LOADING
as a ``ConnectionError`` and drops the socket), ``ConnectionError`` when the
socket is lost (every command in flight fails with it and nothing is
re-sent, since a command may have run: an actor's ``hero_cycle`` must never
run twice), ``TimeoutError`` when connecting takes too long, or when Redis
owes replies and sends none for ``timeout`` seconds. The next command after
a loss connects again.

That last one is the stall watch, which ``link`` describes.

A ``subscriber.Subscriber`` is the same connection in pub/sub mode: Redis pushes
messages to it, and they go to a callback instead of a waiting caller.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from gateway.supervisor.connection import RedisNotReady
from gateway.supervisor.link import Link, Push, dial


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
        self._link: Link | None = None
        #: The dial in progress, whose outcome every caller that found the link
        #: down shares: a failed dial fails them all at once, not one dial each.
        self._dialing: asyncio.Task[Link] | None = None
        self._on_push = on_push
        self._track = track
        #: Whether Redis agreed to tell this connection of changes under ``track``.
        self.tracking = False
        self._closed = False

    async def execute_command(self, *args: Any) -> Any:
        """The reply to one command; an error reply raises (same name and shape
        as redis-py's)."""
        link = self._live() or await self._connect()
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
        link = self._live() or await self._connect()
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
        link = self._live() or await self._connect()
        link.post([args])
        return asyncio.shield(link.lost)  # a cancelled waiter must not end it

    async def aclose(self) -> None:
        """Close the socket: a command in flight (a BLOCKing read too) fails at once."""
        self._closed = True
        if self._dialing is not None:
            self._dialing.cancel()
            with contextlib.suppress(BaseException):
                await self._dialing
        link, self._link = self._link, None
        if link is not None:
            await link.close()

    def _live(self) -> Link | None:
        """The link, unless it is lost: its replies failed already, and it is
        forgotten only once the loss's callbacks have run."""
        link = self._link
        return link if link is not None and link.up else None

    async def _connect(self) -> Link:
        if self._closed:
            raise RedisConnectionError("connection closed")
        dialing = self._dialing
        if dialing is None:
            dialing = self._dialing = asyncio.get_running_loop().create_task(self._open())
            dialing.add_done_callback(self._dialed)
        try:
            return await asyncio.shield(dialing)  # a caller cancelled leaves the dial to the others
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if dialing.cancelled() and task is not None and not task.cancelling():
                raise RedisConnectionError("connection closed") from None  # by ``aclose``
            raise

    async def _open(self) -> Link:
        link = await dial(
            self._url,
            self._name,
            reply_timeout=self._timeout,
            track=self._track,
            on_push=self._on_push,
        )
        self.tracking = link.tracking
        if self._closed:
            await link.close()
            raise RedisConnectionError("connection closed")
        link.lost.add_done_callback(lambda _: self._forget(link))
        self._link = link
        return link

    def _dialed(self, dialing: asyncio.Task[Link]) -> None:
        if self._dialing is dialing:
            self._dialing = None
        if not dialing.cancelled():
            dialing.exception()  # retrieved, should every caller have given up

    def _forget(self, link: Link) -> None:
        if self._link is link:
            self._link = None
