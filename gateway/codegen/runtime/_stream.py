"""Subscriptions of hero_client: ``EventStream``, a stream of events that outlives sockets.

Hand-written (the generator copies it verbatim as ``hero_client/_stream.py``).
The connection (``_runtime``) feeds it: it binds each stream to the id the
server gave it, pushes the events of that id, and on a new socket asks it to
subscribe again from the last event it delivered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Generator
from types import TracebackType
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

from ._errors import (
    CallTimeout,
    ConnectionLost,
    HeroClientError,
    RpcError,
    SubscriptionLost,
)
from ._timeouts import RESUME_MARGIN_MS, RETRY_PAUSE, Timeout

if TYPE_CHECKING:
    from ._runtime import Connection

E = TypeVar("E")


def stream_key(event_id: str) -> tuple[int, int]:
    """An events-stream id as a comparable pair (``"1700000000000-3"`` → ``(…, 3)``)."""
    ms, _, seq = event_id.partition("-")
    try:
        return int(ms), int(seq or 0)
    except ValueError:
        return (0, 0)


class _End:
    """Queued after a subscription's last event."""

    __slots__ = ("error",)

    def __init__(self, error: HeroClientError | None) -> None:
        self.error = error


class EventStream(Generic[E]):
    """A live stream of events, kept across reconnects.

    Use it as an async iterator; start it with ``await`` (or ``async with``, which
    also ends it), or just start iterating. Events are delivered once each, in
    stream order. ``last_id`` is the id of the last event delivered: pass it as
    ``since`` to a later subscription to carry on where this one stopped.
    Events wait in a buffer of ``maxsize`` until read; a reader that falls that
    far behind gets ``SubscriptionLost`` rather than unbounded memory.
    """

    def __init__(
        self,
        client: Connection,
        method: str,
        params: dict[str, Any],
        timeout: Timeout,
        maxsize: int = 10_000,
    ) -> None:
        self._client = client
        self._method = method
        self._params = params
        self._timeout = timeout
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._maxsize = maxsize
        self._started = False
        self._ended = False
        self._start_ms: int | None = None
        self.server_id: str | None = None
        self.last_id: str | None = params.get("since")

    async def start(self) -> EventStream[E]:
        """Subscribe on the server (once). A socket that drops meanwhile is not an
        error: it subscribes again on the next one, within the same timeout."""
        if self._started:
            return self
        self._started = True
        client = self._client
        client._subs.add(self)
        seconds = client._timeout_for(self._params, self._timeout)
        try:
            async with asyncio.timeout(seconds):
                while True:
                    try:
                        await client._invoke(self._method, self._params, None, self._on_subscribed)
                        return self
                    except ConnectionLost:
                        if not client.reconnect or client._closed or client._fatal is not None:
                            raise
                        await asyncio.sleep(RETRY_PAUSE)
        except TimeoutError as exc:
            self._end(None)
            if isinstance(exc, HeroClientError):
                raise
            raise CallTimeout(f"{self._method}: no answer within {seconds} s") from None
        except BaseException:
            self._end(None)
            raise

    def __await__(self) -> Generator[Any, None, EventStream[E]]:
        return self.start().__await__()

    async def __aenter__(self) -> EventStream[E]:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __aiter__(self) -> EventStream[E]:
        return self

    async def __anext__(self) -> E:
        if not self._started:
            await self.start()
        item = await self._queue.get()
        if isinstance(item, _End):
            self._queue.put_nowait(item)  # stays ended for every later read
            if item.error is not None:
                raise item.error
            raise StopAsyncIteration
        return cast(E, item)

    async def next(self, timeout: float | None = None) -> E:
        """The next event, waiting at most ``timeout`` seconds (CallTimeout)."""
        try:
            async with asyncio.timeout(timeout):
                return await self.__anext__()
        except TimeoutError:
            raise CallTimeout(f"no event within {timeout} s") from None

    async def close(self) -> None:
        """Unsubscribe (best effort: the server ends it with the connection anyway)."""
        if self._ended:
            return
        server_id = self.server_id
        self._end(None)
        ws = self._client._ws
        if server_id is not None and ws is not None and self._client.connected:
            with contextlib.suppress(HeroClientError, ConnectionClosed, TimeoutError):
                async with asyncio.timeout(5):
                    await self._client._request(ws, "job.unsubscribe", {"subscription": server_id})

    # -- called by the connection ------------------------------------------------------

    def _on_subscribed(self, result: Any) -> None:
        if isinstance(result, dict) and isinstance(result.get("subscription"), str):
            if self._start_ms is None:
                self._start_ms = self._client.server_now_ms()
            self._client._bind(self, result["subscription"])

    async def _resubscribe(self, ws: ClientConnection) -> None:
        params = dict(self._params)
        if self.last_id is not None:
            params["since"] = self.last_id
        elif self._start_ms is not None:
            params["since"] = f"{max(self._start_ms - RESUME_MARGIN_MS, 0)}-0"
        try:
            await self._client._request(ws, self._method, params, self._on_subscribed)
        except RpcError as exc:
            self._end(SubscriptionLost(f"could not resume the subscription: {exc}"))

    def _push(self, event: dict[str, Any]) -> None:
        if self._ended:
            return
        event_id = event.get("id")
        if isinstance(event_id, str):
            if self.last_id is not None and stream_key(event_id) <= stream_key(self.last_id):
                return  # already delivered (a replay overlapping what we saw)
            self.last_id = event_id
        if self._queue.qsize() >= self._maxsize:
            self._end(SubscriptionLost("events were not read fast enough"))
            return
        self._queue.put_nowait(event)

    def _end(self, error: HeroClientError | None) -> None:
        if self._ended:
            return
        self._ended = True
        self._client._forget(self)
        self._queue.put_nowait(_End(error))
