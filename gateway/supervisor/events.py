"""The one reader of the events stream per process, fanning entries out in memory.

Waiters and subscribers never read Redis themselves: a single task does
``XREAD BLOCK`` on a dedicated connection and hands each batch to the
registered listeners. When Redis goes away the reader backs off and resumes
from the last id it saw, so listeners miss nothing the stream still holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable
from typing import Any

import redis.asyncio as aioredis

from gateway.supervisor import keys
from gateway.supervisor.connection import UNAVAILABLE, BlockingReader, xread

log = logging.getLogger("gateway.supervisor.events")

Event = dict[str, str]
Listener = Callable[[list[Event]], None]


def stream_id(text: str) -> tuple[int, int]:
    """Order of two stream ids ("ms-seq"); a bare "ms" counts as "ms-0"."""
    ms, _, seq = text.partition("-")
    return int(ms), int(seq or 0)


def as_event(entry_id: str, fields: dict[str, str]) -> Event:
    event = dict(fields)
    event["id"] = entry_id
    return event


async def last_id(client: aioredis.Redis) -> str:
    newest: Any = await client.xrevrange(keys.EVENTS, count=1)
    return str(newest[0][0]) if newest else "0-0"


class EventReader:
    """Tails the events stream; listeners are called synchronously, in stream order."""

    def __init__(
        self,
        reader: BlockingReader,
        waker: aioredis.Redis,
        *,
        block_ms: int = 5000,
        count: int = 1000,
    ) -> None:
        self._reader = reader
        self._client = reader.client
        self._waker = waker
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
        self.position = await last_id(self._client)
        self.healthy = True
        self._task = asyncio.create_task(self._run(), name="hero-events-reader")

    async def stop(self) -> None:
        self._closed = True
        if self._task is not None:
            await self._reader.interrupt(self._waker, self._task)
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._reader.aclose()

    async def _run(self) -> None:
        delay = 0.05
        while not self._closed:
            try:
                await self._reader.ready()
                entries = await xread(
                    self._client,
                    keys.EVENTS,
                    self.position,
                    block_ms=self._block_ms,
                    count=self._count,
                )
            except UNAVAILABLE as exc:
                self._reader.lost()
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
            if not entries:
                continue
            batch = [as_event(entry_id, fields) for entry_id, fields in entries]
            self.position = batch[-1]["id"]
            for listener in self._listeners:
                try:
                    listener(batch)
                except Exception:
                    log.exception("event listener failed")
