"""Work issued together goes to Redis together: one flush per loop turn.

A JSON-RPC batch of N ``job.create`` calls runs as N concurrent handlers,
each submitting one job. Sent one by one, that is N Function calls, each
paying Lua's per-call cost. A ``Merger`` collects what is issued in the
same turn of the event loop and hands it to one flush (the supervisor's
makes it one ``hero_submit_many``). Every item still gets its own answer or
its own error, so one failing item never fails the others, and a lone item
(a sequential caller) goes out on its own.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from redis.exceptions import ConnectionError as RedisConnectionError

Item = TypeVar("Item")
#: Answers for a batch of items, in order; an Exception answers its item with an error.
Flush = Callable[[list[Item]], Awaitable[Sequence[Any]]]


class Merger(Generic[Item]):
    """Hands the items submitted in one event-loop turn to ``flush`` together."""

    def __init__(self, flush: Flush[Item]) -> None:
        self._flush = flush
        self._pending: list[tuple[Item, asyncio.Future[Any]]] = []
        self._senders: set[asyncio.Task[None]] = set()

    def submit(self, item: Item) -> asyncio.Future[Any]:
        """The item's answer (or its error) to await, flushed with whatever
        else was submitted in this turn of the loop. The future itself, not a
        coroutine awaiting it: every job of a batch submits, and a coroutine
        is one frame more to make, resume and unwind each time. (Cancelling
        the future, or the task awaiting it, leaves its answer to nobody.)"""
        # The turn's loop looked up by its first item only: ``get_running_loop``
        # makes a ``getpid`` system call each time (CPython 3.11), about 0.2 µs,
        # and every job of a batch submits.
        if self._pending:
            loop = self._pending[0][1].get_loop()
        else:
            loop = asyncio.get_running_loop()
            # Runs after every task already scheduled for this turn has submitted.
            task = loop.create_task(self._send())
            self._senders.add(task)
            task.add_done_callback(self._senders.discard)
        fut: asyncio.Future[Any] = loop.create_future()
        self._pending.append((item, fut))
        return fut

    async def _send(self) -> None:
        batch, self._pending = self._pending, []
        try:
            answers = await self._flush([item for item, _ in batch])
        except BaseException as exc:  # connection lost, or cancelled on shutdown: all fail alike
            for _, fut in batch:
                if not fut.done():
                    fut.set_exception(exc if isinstance(exc, Exception) else RedisConnectionError())
            if not isinstance(exc, Exception):
                raise
            return
        for (_, fut), answer in zip(batch, answers, strict=True):
            if fut.done():  # its caller was cancelled
                continue
            if isinstance(answer, Exception):
                fut.set_exception(answer)
            else:
                fut.set_result(answer)
