"""A connection in pub/sub mode: a ``wire.Wire`` whose pushes go to callbacks.

Redis pushes messages to a subscribed connection instead of answering its
caller, so nothing on it is owed a reply in turn; the link is the Wire's
(redis-py's connection, its TLS, AUTH and keepalive), only read differently.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import ConnectionError as RedisConnectionError

from gateway.supervisor.link import INVALIDATE
from gateway.supervisor.wire import Wire


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
