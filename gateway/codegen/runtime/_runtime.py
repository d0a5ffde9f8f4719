"""The connection under ``HeroClient``: JSON-RPC framing, reconnects, subscriptions.

Hand-written (the generator copies it verbatim, with ``_stream.py`` for the
subscriptions, ``_timeouts.py`` and ``_errors.py``), so the generated methods
stay one line each. What it promises:

- One WebSocket, one reader task. Answers are matched to calls by id; a call
  waits for its answer, its timeout, or the loss of the socket it was sent on
  (``ConnectionLost``: the server may or may not have acted on it).
- When the socket drops (server restart, network), it reconnects with
  exponential backoff and jitter, authenticates again and resumes every open
  subscription with ``since`` = the last event id it delivered, so no event is
  lost and none is delivered twice. Calls made while it is reconnecting wait
  (within their timeout) instead of failing.
- Auth by API key: ``Authorization: Bearer`` on the upgrade; if something in
  between refuses that header (a 4xx other than 401), it falls back to
  ``auth.login`` as the first call, which is what browsers do. A key the
  server does not know (401 / -32004) is fatal: no reconnect can fix it.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import itertools
import json
import logging
import random
import time
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, Literal, Self

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from ._errors import (
    UNAUTHENTICATED,
    CallTimeout,
    ConnectionLost,
    HeroClientError,
    RpcError,
    SubscriptionLost,
    error_for,
)
from ._stream import EventStream
from ._timeouts import RESUME_MARGIN_MS, RETRY_PAUSE, WAIT_GRACE, Default, Timeout

# What the generated client takes from here (RETRY_PAUSE, Default and Timeout live in
# _timeouts, EventStream in _stream).
__all__ = ["RETRY_PAUSE", "Connection", "Default", "EventStream", "Timeout"]

log = logging.getLogger("hero_client")


class _Call:
    """A call in flight: the socket it went out on and what to do with its answer."""

    __slots__ = ("future", "on_result", "ws")

    def __init__(
        self,
        future: asyncio.Future[Any],
        ws: ClientConnection,
        on_result: Callable[[Any], None] | None,
    ) -> None:
        self.future = future
        self.ws = ws
        self.on_result = on_result


class Connection:
    """One logical connection to a hero-gateway, kept alive across socket drops.

    ``url`` is the gateway's WebSocket endpoint (``ws://host:port/ws``). ``key``
    is an API key (or None when the server runs without keys). ``timeout`` is
    each call's default timeout in seconds (None: wait forever); every method
    takes ``timeout=`` to override it. ``reconnect=False`` makes a dropped socket
    final: calls then fail with ``ConnectionLost`` and subscriptions end with
    ``SubscriptionLost``. ``auth="login"`` sends the key with ``auth.login`` instead
    of a header from the start (for proxies that drop ``Authorization``).
    """

    def __init__(
        self,
        url: str = "ws://127.0.0.1:8080/ws",
        *,
        key: str | None = None,
        auth: Literal["header", "login"] = "header",
        timeout: float | None = 30.0,
        connect_timeout: float = 10.0,
        reconnect: bool = True,
        backoff: tuple[float, float] = (0.05, 5.0),
        max_size: int | None = 16 * 1024 * 1024,
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.reconnect = reconnect
        #: Sockets opened after the first one (a test or a dashboard may show it).
        self.reconnects = 0
        self._key = key
        self._login_only = auth == "login"
        self._backoff = backoff
        self._max_size = max_size
        self._ids = itertools.count(1)
        self._calls: dict[int, _Call] = {}
        self._subs: set[EventStream[Any]] = set()
        self._by_server_id: dict[str, EventStream[Any]] = {}
        self._ws: ClientConnection | None = None
        self._ready: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None
        self._fatal: HeroClientError | None = None
        self._closed = False
        self._clock_offset_ms = 0.0

    # -- lifetime --------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the connection (idempotent). Raises what made the first attempt fail
        when it cannot connect within ``connect_timeout``."""
        if self._closed:
            raise ConnectionLost("the client is closed")
        if self._runner is None:
            self._ready = asyncio.Event()
            self._runner = asyncio.create_task(self._run(), name="hero-client")
        await self._wait_ready(self.connect_timeout)

    async def close(self) -> None:
        """Close the socket, end every subscription, fail calls still waiting."""
        if self._closed:
            return
        self._closed = True
        for sub in list(self._subs):
            sub._end(None)
        self._subs.clear()
        self._by_server_id.clear()
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
        self._fail_calls(None, ConnectionLost("the client was closed"))

    async def __aenter__(self) -> Self:
        await self.connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def connected(self) -> bool:
        return self._ready is not None and self._ready.is_set()

    # -- calls -----------------------------------------------------------------------

    async def call(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: Timeout = Default.TIMEOUT,
    ) -> Any:
        """Call any method by name (the generated methods all end up here)."""
        return await self._invoke(method, params or {}, timeout)

    async def _invoke(
        self,
        method: str,
        params: Mapping[str, Any],
        timeout: Timeout,
        on_result: Callable[[Any], None] | None = None,
    ) -> Any:
        seconds = self._timeout_for(params, timeout)
        try:
            async with asyncio.timeout(seconds):
                if self._runner is None:
                    await self.connect()
                ws = await self._wait_ready(None)
                return await self._request(ws, method, params, on_result)
        except TimeoutError as exc:
            if isinstance(exc, HeroClientError):
                raise
            raise CallTimeout(f"{method}: no answer within {seconds} s") from None

    def _timeout_for(self, params: Mapping[str, Any] | None, timeout: Timeout) -> float | None:
        seconds = self.timeout if isinstance(timeout, Default) else timeout
        wait = (params or {}).get("wait")
        if seconds is not None and isinstance(wait, int | float):
            seconds = max(seconds, float(wait) + WAIT_GRACE)
        return seconds

    async def _wait_ready(self, timeout: float | None) -> ClientConnection:
        """The open socket, once connected and authenticated (and subscriptions resumed)."""
        while True:
            if self._fatal is not None:
                raise self._fatal
            if self._closed or self._ready is None:
                raise ConnectionLost("the client is closed")
            if self._ready.is_set() and self._ws is not None:
                return self._ws
            try:
                async with asyncio.timeout(timeout):
                    await self._ready.wait()
            except TimeoutError:
                raise ConnectionLost(f"could not connect to {self.url}") from None

    async def _request(
        self,
        ws: ClientConnection,
        method: str,
        params: Mapping[str, Any],
        on_result: Callable[[Any], None] | None = None,
    ) -> Any:
        call_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._calls[call_id] = _Call(future, ws, on_result)
        frame = {"jsonrpc": "2.0", "id": call_id, "method": method, "params": dict(params)}
        try:
            try:
                await ws.send(json.dumps(frame))
            except ConnectionClosed:
                if ws is self._ws and self._ready is not None:
                    self._ready.clear()  # until the runner has a new socket: no one sends
                raise ConnectionLost(f"{method}: the connection dropped") from None
            return await future
        finally:
            self._calls.pop(call_id, None)

    # -- the socket's life -------------------------------------------------------------

    async def _run(self) -> None:
        """Connect, serve, reconnect: until ``close`` or a fatal error."""
        assert self._ready is not None
        delay = self._backoff[0]
        first = True
        while not self._closed:
            try:
                ws = await self._open()
            except HeroClientError as exc:  # a refused key: nothing to retry
                self._fatal = exc
                self._fail_calls(None, exc)
                self._end_subscriptions(exc)
                self._ready.set()
                return
            except (OSError, InvalidHandshake, TimeoutError, ConnectionClosed) as exc:
                if not self.reconnect and first:
                    self._fatal = ConnectionLost(f"could not connect to {self.url}: {exc}")
                    self._ready.set()
                    return
                log.debug("connect failed, retrying in %.2fs: %s", delay, exc)
                await asyncio.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, self._backoff[1])
                continue
            delay = self._backoff[0]
            if not first:
                self.reconnects += 1
            first = False
            self._ws = ws
            reader = asyncio.create_task(self._read(ws), name="hero-client-reader")
            try:
                await self._resume(ws)
                self._ready.set()
                await reader
            except (ConnectionLost, ConnectionClosed):
                pass
            except HeroClientError as exc:
                self._fatal = exc
                self._ready.set()
            finally:
                self._ready.clear()
                self._ws = None
                reader.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await reader
                with contextlib.suppress(Exception):
                    await ws.close()
                self._fail_calls(ws, ConnectionLost("the connection dropped before the answer"))
            if self._fatal is not None:
                self._fail_calls(None, self._fatal)
                self._end_subscriptions(self._fatal)
                self._ready.set()
                return
            if not self.reconnect:
                lost = ConnectionLost("the connection dropped")
                self._fatal = lost
                self._end_subscriptions(SubscriptionLost("the connection dropped"))
                self._ready.set()
                return

    async def _open(self) -> ClientConnection:
        headers: dict[str, str] = {}
        if self._key is not None and not self._login_only:
            headers["Authorization"] = f"Bearer {self._key}"
        try:
            ws = await connect(
                self.url,
                additional_headers=headers or None,
                open_timeout=self.connect_timeout,
                max_size=self._max_size,
                ping_interval=20,
                ping_timeout=20,
            )
        except InvalidStatus as exc:
            status = exc.response.status_code
            if status == 401:
                raise error_for(UNAUTHENTICATED, "the server refused the API key") from None
            if headers and 400 <= status < 500:
                self._login_only = True  # something refused the header: log in instead
                return await self._open()
            raise
        self._learn_clock(ws)
        return ws

    def _learn_clock(self, ws: ClientConnection) -> None:
        """Estimate the server's clock from the upgrade's Date header, so a
        subscription resumes from the server's idea of when it was made."""
        response = ws.response
        date = response.headers.get("Date") if response is not None else None
        if not date:
            return
        with contextlib.suppress(TypeError, ValueError):
            server = email.utils.parsedate_to_datetime(date).timestamp() * 1000
            offset = server - time.time() * 1000
            self._clock_offset_ms = offset if abs(offset) > RESUME_MARGIN_MS else 0.0

    def server_now_ms(self) -> int:
        return int(time.time() * 1000 + self._clock_offset_ms)

    async def _resume(self, ws: ClientConnection) -> None:
        """On a fresh socket: log in if the key did not go in a header, then
        resubscribe every open subscription from its last event."""
        if self._key is not None and self._login_only:
            try:
                await self._request(ws, "auth.login", {"key": self._key})
            except RpcError as exc:
                if exc.code == UNAUTHENTICATED:
                    raise
                raise ConnectionLost(f"auth.login failed: {exc}") from None
        for sub in list(self._subs):
            if sub.server_id is not None:  # one still being made is retried by its start()
                await sub._resubscribe(ws)

    async def _read(self, ws: ClientConnection) -> None:
        try:
            async for raw in ws:
                try:
                    message = json.loads(raw)
                except ValueError:
                    log.warning("ignoring a frame that is not JSON")
                    continue
                for item in message if isinstance(message, list) else [message]:
                    if isinstance(item, dict):
                        self._dispatch(item)
        finally:
            # Calls sent on this socket get no answer now, including those made while
            # resuming (which would otherwise wait forever on a dead socket).
            self._fail_calls(ws, ConnectionLost("the connection dropped before the answer"))

    def _dispatch(self, message: dict[str, Any]) -> None:
        if "method" in message and "id" not in message:
            params = message.get("params")
            if message["method"] == "job.event" and isinstance(params, dict):
                sub = self._by_server_id.get(str(params.get("subscription")))
                if sub is not None and isinstance(params.get("event"), dict):
                    sub._push(params["event"])
            return
        call_id = message.get("id")
        call = self._calls.get(call_id) if isinstance(call_id, int) else None
        if call is None or call.future.done():
            return
        error = message.get("error")
        if isinstance(error, dict):
            call.future.set_exception(
                error_for(
                    int(error.get("code", -32603)),
                    str(error.get("message", "")),
                    error.get("data"),
                )
            )
            return
        result = message.get("result")
        if call.on_result is not None:
            call.on_result(result)  # before any later frame is read (subscription ids)
        call.future.set_result(result)

    def _fail_calls(self, ws: ClientConnection | None, error: HeroClientError) -> None:
        for call in list(self._calls.values()):
            if (ws is None or call.ws is ws) and not call.future.done():
                call.future.set_exception(error)

    def _end_subscriptions(self, error: HeroClientError) -> None:
        for sub in list(self._subs):
            sub._end(error)

    # -- subscriptions (used by EventStream) -------------------------------------------

    def _subscription(
        self, method: str, params: Mapping[str, Any], timeout: Timeout
    ) -> EventStream[Any]:
        return EventStream(self, method, dict(params), timeout)

    def _bind(self, sub: EventStream[Any], server_id: str) -> None:
        if sub.server_id is not None:
            self._by_server_id.pop(sub.server_id, None)
        sub.server_id = server_id
        self._by_server_id[server_id] = sub

    def _forget(self, sub: EventStream[Any]) -> None:
        self._subs.discard(sub)
        if sub.server_id is not None:
            self._by_server_id.pop(sub.server_id, None)
