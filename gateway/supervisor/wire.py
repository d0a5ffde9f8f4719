"""A lean, multiplexed Redis connection for the job path.

redis-py's asyncio client spends about 60 µs of Python per command around a
25 µs loopback round trip (pool checkout, a lock per connection, a stream
reader): measured with uvloop, a PING took 94 µs through the pool and 32 µs
here. Every hop of a run-and-wait is one such call, so the commands on the
job path (``hero_submit_many``, ``hero_cycle``, the events ``XREAD`` and the
actors' wake-up channels) go through a ``Wire`` instead:

- one socket, shared by every caller of the process, with no checkout: a
  command is queued at once and its reply matched to it in order, since
  Redis answers the commands of one connection in the order they came;
- the commands queued in one turn of the event loop leave in one write, so
  concurrent callers are pipelined without asking for it;
- hiredis parses the replies, decoded as UTF-8 like the pooled clients.

The errors are redis-py's, so callers keep one set of ``except`` clauses:
``ResponseError`` for an error reply (a transient one such as LOADING is a
``connection.RedisNotReady``, a ``ConnectionError``), ``ConnectionError`` when the socket is
lost (every command in flight fails with it and nothing is re-sent, since
a command may have run), ``TimeoutError`` when connecting takes too long.
The next command after a loss connects again.

A ``Subscriber`` is the same connection in pub/sub mode: Redis pushes
messages to it, and they go to a callback instead of a waiting caller.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import socket
import ssl
from collections.abc import Callable, Sequence
from typing import Any, cast

import hiredis
from redis.asyncio.connection import parse_url
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from gateway.supervisor.connection import reply_error

CONNECT_TIMEOUT = 2.0

Push = Callable[[list[Any]], None]


class _Protocol(asyncio.Protocol):
    """Replies in, one future each; or, in pub/sub mode, pushes to ``on_push``."""

    def __init__(self) -> None:
        self._reader = hiredis.Reader(encoding="utf-8", replyError=ResponseError)
        #: Set once the handshake is answered, for a connection in pub/sub mode.
        self.on_push: Push | None = None
        self.waiting: collections.deque[asyncio.Future[Any]] = collections.deque()
        self.transport: asyncio.Transport | None = None
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._outgoing: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        while (reply := self._reader.gets()) is not False:
            if self.on_push is not None:
                self.on_push(reply)
                continue
            future = self.waiting.popleft()
            if future.done():  # its caller gave up; the reply still had its turn
                continue
            if isinstance(reply, ResponseError):
                future.set_exception(reply_error(reply))
            else:
                future.set_result(reply)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        error = RedisConnectionError("connection to Redis lost")
        while self.waiting:
            future = self.waiting.popleft()
            if not future.done():
                future.set_exception(error)
        if not self.lost.done():
            self.lost.set_result(None)

    def send(self, commands: Sequence[Sequence[Any]]) -> list[asyncio.Future[Any]]:
        """Queue ``commands`` for this turn's write; a future for each reply."""
        loop = asyncio.get_running_loop()
        futures = [loop.create_future() for _ in commands]
        self.post(commands)
        self.waiting.extend(futures)
        return futures

    def post(self, commands: Sequence[Sequence[Any]]) -> None:
        """Queue ``commands`` whose answers come as pushes (pub/sub mode)."""
        if self.transport is None or self.transport.is_closing():
            raise RedisConnectionError("connection to Redis lost")
        if not self._outgoing:
            asyncio.get_running_loop().call_soon(self._flush)
        self._outgoing += [hiredis.pack_command(tuple(c)) for c in commands]

    def _flush(self) -> None:
        data, self._outgoing = b"".join(self._outgoing), []
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)


class Wire:
    """One multiplexed connection to the Redis at ``url``; see the module docstring."""

    def __init__(
        self, url: str, name: str, *, on_push: Push | None = None, track: Sequence[str] = ()
    ) -> None:
        self._url = url
        self._name = f"hero-gateway/{name}"
        self._protocol: _Protocol | None = None
        self._connecting: asyncio.Lock | None = None
        self._on_push = on_push
        self._track = track
        #: Whether Redis agreed to tell this connection of changes under ``track``.
        self.tracking = False
        self._closed = False

    async def execute_command(self, *args: Any) -> Any:
        """The reply to one command (same name and shape as redis-py's, so
        ``library.call`` takes either)."""
        protocol = self._protocol or await self._connect()
        (future,) = protocol.send([args])
        return await future

    async def pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Every command's reply in order; an error reply stands in its place
        as a ``ResponseError``. A lost connection raises."""
        protocol = self._protocol or await self._connect()
        futures = protocol.send(commands)
        replies: list[Any] = []
        try:
            for future in futures:  # answered in order: no gather needed
                try:
                    replies.append(await future)
                except ResponseError as exc:
                    replies.append(exc)
        except BaseException:  # lost or cancelled: the rest is nobody's now
            for future in futures:
                if not future.done():
                    future.cancel()
                elif not future.cancelled():
                    future.exception()  # retrieved, so asyncio does not log it
            raise
        return replies

    async def post(self, *args: Any) -> asyncio.Future[None]:
        """Send a command whose answer comes as a push (``on_push`` connections:
        SUBSCRIBE); the returned future ends when this connection is lost."""
        protocol = self._protocol or await self._connect()
        protocol.post([args])
        return asyncio.shield(protocol.lost)  # a cancelled waiter must not end it

    async def aclose(self) -> None:
        """Close the socket: a command in flight (a BLOCKing read too) fails at once."""
        self._closed = True
        protocol, self._protocol = self._protocol, None
        if protocol is not None and protocol.transport is not None:
            protocol.transport.close()
            await protocol.lost

    async def _connect(self) -> _Protocol:
        if self._closed:
            raise RedisConnectionError("connection closed")
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:  # one dial for every caller that found it down
            if self._protocol is not None:
                return self._protocol
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT):
                    protocol = await self._dial()
            except TimeoutError:
                raise RedisTimeoutError("timed out connecting to Redis") from None
            except OSError as exc:
                raise RedisConnectionError(f"cannot connect to Redis: {exc.strerror}") from None
            if self._closed:
                if protocol.transport is not None:
                    protocol.transport.close()
                raise RedisConnectionError("connection closed")
            protocol.lost.add_done_callback(lambda _: self._forget(protocol))
            self._protocol = protocol
            return protocol

    def _forget(self, protocol: _Protocol) -> None:
        if self._protocol is protocol:
            self._protocol = None

    async def _dial(self) -> _Protocol:
        loop = asyncio.get_running_loop()
        options = parse_url(self._url)
        protocol = _Protocol()
        if "path" in options:
            await loop.create_unix_connection(lambda: protocol, options["path"])
        else:
            await loop.create_connection(
                lambda: protocol,
                options.get("host", "localhost"),
                options.get("port", 6379),
                ssl=_tls(options) if "connection_class" in options else None,
            )
        assert protocol.transport is not None
        sock = protocol.transport.get_extra_info("socket")
        if sock is not None and "path" not in options:
            _keep_alive(sock)
        handshake: list[tuple[Any, ...]] = []
        if options.get("password"):
            user = options.get("username")
            password = options["password"]
            handshake.append(("AUTH", user, password) if user else ("AUTH", password))
        if options.get("db"):
            handshake.append(("SELECT", options["db"]))
        handshake.append(("CLIENT", "SETNAME", self._name))
        try:
            for future in protocol.send(handshake):
                await future
            self.tracking = bool(self._track) and await _track(protocol, self._track)
        except BaseException as exc:
            if protocol.transport is not None:
                protocol.transport.close()
            if isinstance(exc, ResponseError):  # AUTH or SELECT refused: unusable, like a refusal
                raise RedisConnectionError(f"Redis refused the connection: {exc}") from None
            raise
        protocol.on_push = self._on_push  # the handshake was answered as ordinary replies
        return protocol


async def _track(protocol: _Protocol, prefixes: Sequence[str]) -> bool:
    """Broadcast tracking of the keys under ``prefixes``, redirected to this same
    connection, subscribed to ``INVALIDATE``: Redis names every such key
    written by anyone (no keyspace notifications, so no server setting).
    False, with tracking off again, when Redis refuses any of it (an ACL
    without CLIENT TRACKING or that channel, an old server)."""
    tracking = False
    try:
        (client_id,) = protocol.send([("CLIENT", "ID")])
        command = ["CLIENT", "TRACKING", "ON", "REDIRECT", await client_id, "BCAST"]
        for prefix in prefixes:
            command += ["PREFIX", prefix]
        (reply,) = protocol.send([command])
        tracking = await reply == "OK"
        (reply,) = protocol.send([("SUBSCRIBE", INVALIDATE)])
        await reply
    except ResponseError:
        if tracking:
            (reply,) = protocol.send([("CLIENT", "TRACKING", "OFF")])
            await reply
        return False
    return True


#: The channel on which a tracking connection in RESP2 hears of written keys.
INVALIDATE = "__redis__:invalidate"


#: TCP keepalive: idle seconds before the first probe, seconds between probes,
#: probes. A Redis host that vanished without closing (a partition, a dead
#: VM) fails the calls in flight after about a minute instead of the
#: kernel's two hours; nothing is read with a timeout, since BLOCKing reads
#: wait for seconds by design.
KEEPALIVE = (30, 10, 3)


def _keep_alive(sock: socket.socket) -> None:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    options = ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT")
    for name, value in zip(options, KEEPALIVE, strict=True):
        if hasattr(socket, name):  # Linux; macOS names the first one differently
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, name), value)


def _tls(options: dict[str, Any]) -> ssl.SSLContext:
    """``rediss://``: verified TLS, or what the URL's ``ssl_*`` options say."""
    context = ssl.create_default_context(cafile=options.get("ssl_ca_certs"))
    if str(options.get("ssl_cert_reqs", "required")).lower() in {"none", "optional"}:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if options.get("ssl_certfile"):
        context.load_cert_chain(options["ssl_certfile"], options.get("ssl_keyfile"))
    return context


class Subscriber:
    """A connection in pub/sub mode: every message goes to ``on_message``.

    ``subscribe`` returns once Redis has confirmed every channel, so the caller
    knows from when on it hears what is published, and returns a future that
    ends when the connection is lost. Subscribing again after a loss is up to
    the caller, who may have missed messages meanwhile and knows what that
    means for it.
    """

    def __init__(
        self,
        url: str,
        name: str,
        on_message: Callable[[str, str], None],
        *,
        track: Sequence[str] = (),
        on_written: Callable[[list[str] | None], None] | None = None,
    ) -> None:
        """``track``: key prefixes whose writes are reported to ``on_written``
        (the keys, or None when the whole database was flushed), on every
        connection Redis allows it; see ``tracking``."""
        self._wire = Wire(url, name, on_push=self._push, track=track)
        self._on_message = on_message
        self._on_written = on_written
        self._unconfirmed = 0
        self._confirmed: asyncio.Future[None] | None = None

    async def subscribe(self, channels: Sequence[str]) -> asyncio.Future[None]:
        self._unconfirmed = len(channels)
        self._confirmed = asyncio.get_running_loop().create_future()
        lost = await self._wire.post("SUBSCRIBE", *channels)
        await asyncio.wait({self._confirmed, lost}, return_when=asyncio.FIRST_COMPLETED)
        if not self._confirmed.done():
            raise RedisConnectionError("connection to Redis lost")
        return lost

    @property
    def tracking(self) -> bool:
        """Whether Redis tracks the prefixes for this connection (after ``subscribe``)."""
        return self._wire.tracking

    async def aclose(self) -> None:
        await self._wire.aclose()

    def _push(self, reply: list[Any]) -> None:
        kind = reply[0] if isinstance(reply, list) and reply else None
        if kind == "message" and reply[1] == INVALIDATE and self._on_written is not None:
            self._on_written(reply[2])
        elif kind == "message":
            self._on_message(reply[1], reply[2])
        elif kind == "subscribe":
            self._unconfirmed -= 1
            if self._unconfirmed <= 0 and self._confirmed is not None:
                with contextlib.suppress(asyncio.InvalidStateError):
                    self._confirmed.set_result(None)
