"""JSON-RPC over one WebSocket: read frames, answer each as its own task.

The read loop only parses and admits; every frame (a request or a whole
batch) is answered by a task of its own, so a slow call never holds up the
socket and a bad frame costs nothing but its own -32700/-32600 answer. Text
is parsed here, not by Starlette's ``encoding="json"`` (which closes the
socket with 1003 on bad JSON). Binary messages are taken as UTF-8 JSON.

``auth.login`` sent on its own is the exception: it is answered before the
next frame is read, so a client may send its first calls right behind it.

Every reply and notification goes out through the connection's ``Outbox``
(one writer, in order). A client that does not read is bounded there: while
more than ``max_unsent_bytes`` wait to be written the read loop stops reading
(the client's own sends then stall in TCP), and if the client has not made
room within ``unsent_grace`` seconds the socket is closed with 1008. A
frame's in-flight budget comes back only once its reply is written.

A connection that opens without an identity (keys exist and it sent none)
has ``auth_timeout`` seconds to ``auth.login``; then it is closed with 1008.

Close codes the server uses:
- 1008 the client did not authenticate in time, or did not read its replies;
- 1009 a message over the size limit (uvicorn enforces it while reading;
  checked here too, in case the server runs with a larger transport limit);
- 1012 the server is shutting down (after in-flight calls were answered);
- 1013 a subscription was cut off (subscriber too slow, or its feed was lost).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from starlette.websockets import WebSocket, WebSocketDisconnect

from gateway.admission import Ticket
from gateway.rpc.backends import EventSource
from gateway.rpc.context import CallContext
from gateway.rpc.credentials import Authenticator, Mode
from gateway.rpc.frames import SHUTTING_DOWN_MESSAGE, Budget, admit
from gateway.rpc.messages import Frame, Request
from gateway.rpc.outbox import Outbox
from gateway.rpc.protocol import encode_notification, encode_reply, parse_frame
from gateway.rpc.subscriptions import ConnectionSubscriptions, reply_sent

log = logging.getLogger("gateway.rpc.websocket")

CLOSE_POLICY = 1008
CLOSE_TOO_BIG = 1009
CLOSE_RESTART = 1012
CLOSE_TRY_AGAIN = 1013

LOGIN = "auth.login"

#: Seconds a close frame may wait for a client that does not read before the
#: socket is given up on (uvicorn's own closing handshake allows as long).
CLOSE_TIMEOUT = 10.0

NOT_READING = "client does not read its replies"
AUTH_TIMEOUT = "authentication timeout"
TOO_MANY_UNIDENTIFIED = "Too many unidentified connections"


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
        max_batch: int,
        max_unsent_bytes: int,
        unsent_grace: float,
        auth_timeout: float,
        draining: Callable[[], bool],
    ) -> None:
        self._ws = ws
        self._mode = mode
        self._auth = auth
        self._max_bytes = max_message_bytes
        self._budget = Budget(max_inflight)
        self._max_batch = max_batch
        self._outbox = Outbox(max_unsent_bytes)
        self._grace = unsent_grace
        self._auth_timeout = auth_timeout
        self._draining = draining
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self.subscriptions = ConnectionSubscriptions(events, self.notify, self._lost)
        self.ctx = CallContext(mode.identity, self.notify, self.subscriptions)
        #: Its place in the budget of unidentified connections until it logs in.
        self.unidentified: Ticket | None = None

    async def serve(self) -> None:
        """Read until the client leaves or the socket is closed; then clean up."""
        writer = asyncio.create_task(self._outbox.run(self._write))
        deadline = None
        if self.ctx.identity is None:
            deadline = asyncio.get_running_loop().call_later(
                self._auth_timeout, lambda: self._spawn(self._auth_expired())
            )
        try:
            while not self._closing:
                if self._outbox.full and not await self._outbox.room(self._grace):
                    await self.close(CLOSE_POLICY, NOT_READING)
                    break
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
            if deadline is not None:
                deadline.cancel()
            self.identified()
            writer.cancel()
            await self._teardown()

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        """Queue a notification once the outbox has room: a subscription's pump
        waits here, so its feed (bounded by the supervisor) is what overflows."""
        await self._outbox.room()
        if not self._closing:
            self._outbox.put(encode_notification(method, params))

    async def close(self, code: int, reason: str) -> None:
        """Send a close frame (after the text being written now; the rest is
        dropped). A client that does not read gets CLOSE_TIMEOUT seconds to
        take it; then the socket is given up on (the server aborts it)."""
        if self._closing:
            return
        self._closing = True
        with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError, TimeoutError):
            await asyncio.wait_for(self._ws.close(code, reason), CLOSE_TIMEOUT)

    async def drain(self, grace: float) -> None:
        """Shutdown: let the calls in flight answer and their replies go out
        (up to ``grace`` seconds), then 1012. New frames meanwhile are answered
        -32006 (see ``_on_frame``)."""
        loop = asyncio.get_running_loop()
        until = loop.time() + grace
        pending = set(self._tasks)
        if pending:
            await asyncio.wait(pending, timeout=grace)
        await self._outbox.flushed(max(0.0, until - loop.time()))
        await self.close(CLOSE_RESTART, "server shutting down")

    async def _write(self, text: str) -> bool:
        """Send one text unless the socket is closing; False once it is gone."""
        if self._closing:
            return False
        try:
            await self._ws.send_text(text)
        except (WebSocketDisconnect, RuntimeError, OSError):
            self._closing = True
            return False
        return True

    # -- frames ----------------------------------------------------------------------

    async def _on_frame(self, data: str | bytes) -> None:
        frame = parse_frame(data, self._max_batch)
        if self._draining():
            elements, taken = admit(frame, self._budget, refuse=SHUTTING_DOWN_MESSAGE)
        elif _is_login(frame):
            self._mode = await self._auth.before_login(self._mode)
            self.ctx.identity = self._mode.identity
            elements, taken = admit(frame, self._budget)
            await self._answer(frame, elements, taken)  # inline: ordered before what follows
            if self.ctx.identity is not None:
                self.identified()
            return
        else:
            elements, taken = admit(frame, self._budget)
        if taken == 0:  # nothing to run (all refused or invalid): no task per frame
            await self._answer(frame, elements, taken)
        else:
            self._spawn(self._answer(frame, elements, taken))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, frame: Frame, elements: list[Any], taken: int) -> None:
        """Answer a frame and queue its reply; its budget and its subscriptions'
        gate (``reply_sent``) are released once the reply is written."""
        sent = asyncio.Event()
        token = reply_sent.set(sent)

        def written() -> None:
            self._budget.give(taken)
            sent.set()

        try:
            responses = await self._mode.dispatcher.dispatch_many(elements, self.ctx)
            text = encode_reply(frame, responses)
        except BaseException:
            written()
            raise
        finally:
            reply_sent.reset(token)
        if text is None or self._closing:
            written()
        else:
            self._outbox.put(text, written)

    # -- ending ----------------------------------------------------------------------

    def crowded_out(self) -> None:
        """Unidentified for too long while its client holds the most such
        connections (``admission``): closed, to try again later."""
        self._spawn(self.close(CLOSE_TRY_AGAIN, TOO_MANY_UNIDENTIFIED))

    def identified(self) -> None:
        """Out of the budget of unidentified connections (logged in, or gone);
        a second call does nothing."""
        if self.unidentified is not None:
            self.unidentified.release()
            self.unidentified = None

    async def _auth_expired(self) -> None:
        if self.ctx.identity is None:
            await self.close(CLOSE_POLICY, AUTH_TIMEOUT)

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
