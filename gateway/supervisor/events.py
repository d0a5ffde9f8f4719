"""The one reader of the events stream per process, fanning entries out in memory.

Waiters and subscribers never read Redis themselves: a single task does
``XREAD BLOCK`` on a connection of its own (a ``Wire``: the read is on the
job path, where each wake-up counts) and hands each batch to the registered
listeners. When Redis goes away the reader backs off and resumes from the
last id it saw, so listeners miss nothing the stream still holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from typing import Any

from gateway.supervisor import keys
from gateway.supervisor.connection import UNAVAILABLE
from gateway.supervisor.wire import Wire

log = logging.getLogger("gateway.supervisor.events")

Event = dict[str, str]
Listener = Callable[[list[Event]], None]


def stream_id(text: str) -> tuple[int, int]:
    """Order of two stream ids ("ms-seq"); a bare "ms" counts as "ms-0"."""
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


async def last_id(wire: Wire) -> str:
    newest: Any = await wire.execute_command("XREVRANGE", keys.EVENTS, "+", "-", "COUNT", 1)
    return str(newest[0][0]) if newest else "0-0"


async def read_after(wire: Wire, after: str, *, block_ms: int, count: int) -> list[Event]:
    """Entries of the events stream after ``after``, waiting up to ``block_ms``."""
    reply: Any = await wire.execute_command(
        "XREAD", "COUNT", count, "BLOCK", block_ms, "STREAMS", keys.EVENTS, after
    )
    if not reply:
        return []
    return [_event(entry_id, flat) for entry_id, flat in reply[0][1]]


def _event(entry_id: str, flat: list[str]) -> Event:
    """RESP2 gives a stream entry's fields as one flat list: name, value, ..."""
    event = dict(zip(flat[::2], flat[1::2], strict=True))
    event["id"] = entry_id
    return event


class EventReader:
    """Tails the events stream; listeners are called synchronously, in stream order."""

    def __init__(self, wire: Wire, *, block_ms: int = 5000, count: int = 1000) -> None:
        self._wire = wire
        self._block_ms = block_ms
        self._count = count
        self._listeners: list[Listener] = []
        self._task: asyncio.Task[None] | None = None
        self.position = "0-0"
        self.healthy = False
        self._closed = False

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    async def start(self) -> None:
        self.position = await last_id(self._wire)
        self.healthy = True
        self._task = asyncio.create_task(self._run(), name="hero-events-reader")

    async def stop(self) -> None:
        self._closed = True
        await self._wire.aclose()  # fails the blocked read at once
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        delay = 0.05
        while not self._closed:
            try:
                batch = await read_after(
                    self._wire, self.position, block_ms=self._block_ms, count=self._count
                )
            except UNAVAILABLE as exc:
                if self._closed:
                    return
                if self.healthy:
                    log.warning(
                        "events reader lost redis: %s",
                        type(exc).__name__,
                        extra={"error": type(exc).__name__},
                    )
                self.healthy = False
                await asyncio.sleep(delay + random.uniform(0, delay))
                delay = min(delay * 2, 2.0)
                continue
            if not self.healthy:
                log.info("events reader reconnected", extra={"position": self.position})
            self.healthy, delay = True, 0.05
            if not batch:
                continue
            self.position = batch[-1]["id"]
            for listener in self._listeners:
                try:
                    listener(batch)
                except Exception:
                    log.exception("event listener failed")
