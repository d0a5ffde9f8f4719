"""JSON-RPC over one WebSocket: read frames, answer each as its own task.

The read loop only parses and admits; every frame (a request or a whole
batch) is answered by a task of its own, so a slow call never holds up the
socket and a bad frame costs nothing but its own -32700/-32600 answer. Text
is parsed here, not by Starlette's ``encoding="json"`` (which closes the
socket with 1003 on bad JSON). Binary messages are taken as UTF-8 JSON.

``auth.login`` sent on its own is the exception: it is answered before the
next frame is read, so a client may send its first calls right behind it.

Close codes the server uses:
- 1009 a message over the size limit (uvicorn enforces it while reading;
  checked here too, in case the server runs with a larger transport limit);
- 1012 the server is shutting down (after in-flight calls were answered);
- 1013 a subscription was cut off (subscriber too slow, or its feed was lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from gateway.rpc.backends import EventSource
from gateway.rpc.context import CallContext
from gateway.rpc.credentials import Authenticator, Mode
from gateway.rpc.frames import SHUTTING_DOWN_MESSAGE, Budget, admit, answer
from gateway.rpc.messages import Frame, Request
from gateway.rpc.protocol import encode_notification, encode_reply, parse_frame
from gateway.rpc.subscriptions import ConnectionSubscriptions, reply_sent

log = logging.getLogger("gateway.rpc.websocket")

CLOSE_TOO_BIG = 1009
CLOSE_RESTART = 1012
CLOSE_TRY_AGAIN = 1013

LOGIN = "auth.login"


class Connection:
    """One accepted WebSocket and everything that lives as long as it does."""

    def __init__(
        self,
        ws: WebSocket,
        mode: Mode,
        auth: Authenticator,
        events: EventSource,
        *,
        max_message_bytes: int,
        max_inflight: int,
        draining: Callable[[], bool],
    ) -> None:
        self._ws = ws
        self._mode = mode
        self._auth = auth
        self._max_bytes = max_message_bytes
        self._budget = Budget(max_inflight)
        self._draining = draining
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self.subscriptions = ConnectionSubscriptions(events, self.notify, self._lost)
        self.ctx = CallContext(mode.identity, self.notify, self.subscriptions)

    async def serve(self) -> None:
        """Read until the client leaves or the socket is closed; then clean up."""
        try:
            while not self._closing:
                message = await self._ws.receive()
                if message["type"] == "websocket.disconnect":
                    break
                data: str | bytes | None = message.get("text")
                if data is None:
                    data = message.get("bytes")
                if data is None:
                    continue
                if len(data) > self._max_bytes:  # str: chars ≤ bytes, so never a false alarm
                    await self.close(CLOSE_TOO_BIG, "message too big")
                    break
                await self._on_frame(data)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass  # the peer vanished mid-read
        finally:
            await self._teardown()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send(encode_notification(method, params))

    async def send(self, text: str) -> None:
        """Send unless the socket is closing; a vanished peer is not an error."""
        if self._closing:
            return
        try:
            await self._ws.send_text(text)
        except (WebSocketDisconnect, RuntimeError, OSError):
            self._closing = True

    async def close(self, code: int, reason: str) -> None:
        if self._closing:
            return
        self._closing = True
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
            await self._ws.close(code, reason)

    async def drain(self, grace: float) -> None:
        """Shutdown: let the calls in flight answer (up to ``grace`` seconds), then 1012.
        New frames meanwhile are answered -32006 (see ``_on_frame``)."""
        pending = set(self._tasks)
        if pending:
            await asyncio.wait(pending, timeout=grace)
        await self.close(CLOSE_RESTART, "server shutting down")

    # -- frames ----------------------------------------------------------------------

    async def _on_frame(self, data: str | bytes) -> None:
        frame = parse_frame(data)
        if self._draining():
            elements, taken = admit(frame, self._budget, refuse=SHUTTING_DOWN_MESSAGE)
        elif _is_login(frame):
            self._mode = await self._auth.before_login(self._mode)
            self.ctx.identity = self._mode.identity
            elements, taken = admit(frame, self._budget)
            await self._answer(frame, elements, taken)  # inline: ordered before what follows
            return
        else:
            elements, taken = admit(frame, self._budget)
        task = asyncio.create_task(self._answer(frame, elements, taken))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, frame: Frame, elements: list[Any], taken: int) -> None:
        sent = asyncio.Event()
        token = reply_sent.set(sent)
        try:
            try:
                responses = await answer(elements, self._mode.dispatcher, self.ctx)
            finally:
                self._budget.give(taken)
            text = encode_reply(frame, responses)
            if text is not None:
                await self.send(text)
        finally:
            sent.set()
            reply_sent.reset(token)

    # -- ending ----------------------------------------------------------------------

    async def _lost(self, reason: str) -> None:
        """A subscription ended without the client asking: tell it by closing."""
        await self.close(CLOSE_TRY_AGAIN, reason)

    async def _teardown(self) -> None:
        self._closing = True
        await self.subscriptions.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _is_login(frame: Frame) -> bool:
    element = frame.elements[0]
    return not frame.batch and isinstance(element, Request) and element.method == LOGIN
