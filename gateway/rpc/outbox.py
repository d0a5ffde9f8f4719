"""What one WebSocket still has to write, counted in bytes.

Every reply and notification of a connection goes through its outbox, and
one writer task sends them in order. The server's own send blocks while the
peer's TCP window is shut (uvicorn waits for the transport to drain), so what
piles up behind a client that does not read is here, counted: the
connection stops reading new frames while the outbox is over its limit and
closes the socket if it stays there (see ``websocket.Connection``). Each
entry may carry a ``written`` callback, run once the text has been handed to
the transport: that is when a frame's in-flight budget comes back, so a
client cannot park an unbounded number of answered calls behind a shut window.

Sizes are ``len(text)``: characters, which for the mostly-ASCII JSON the
gateway writes is the byte count (and never more than it).
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Awaitable, Callable

Written = Callable[[], None]
#: Writes one text; False when the socket is gone (the writer then stops).
Send = Callable[[str], Awaitable[bool]]


class Outbox:
    def __init__(self, limit: int) -> None:
        self.limit = max(1, limit)
        self.size = 0
        self._items: collections.deque[tuple[str, Written | None]] = collections.deque()
        self._ready = asyncio.Event()
        self._room = asyncio.Event()
        self._room.set()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def full(self) -> bool:
        return self.size > self.limit

    def put(self, text: str, written: Written | None = None) -> None:
        self._items.append((text, written))
        self.size += len(text)
        self._ready.set()
        self._idle.clear()
        if self.full:
            self._room.clear()

    async def room(self, within: float | None = None) -> bool:
        """Wait until the outbox is within its limit; False if ``within`` seconds passed first."""
        return await _wait(self._room, within)

    async def flushed(self, within: float | None = None) -> bool:
        """Wait until everything put has been written; False if ``within`` seconds passed first."""
        return await _wait(self._idle, within)

    async def run(self, send: Send) -> None:
        """The writer: send entries in order until ``send`` reports the socket gone."""
        while True:
            await self._ready.wait()
            text, written = self._items.popleft()
            if not self._items:
                self._ready.clear()
            try:
                alive = await send(text)
            finally:
                self.size -= len(text)
                if not self.full:
                    self._room.set()
                if not self._items:
                    self._idle.set()
                if written is not None:
                    written()
            if not alive:
                return


async def _wait(event: asyncio.Event, within: float | None) -> bool:
    if event.is_set():
        return True
    try:
        await asyncio.wait_for(event.wait(), within)
    except TimeoutError:
        return False
    return True
