"""Work issued together goes to Redis together: one call in flight per kind.

A JSON-RPC batch of N ``job.create`` calls runs as N concurrent handlers,
each submitting one job. Sent one by one, that is N Function calls, each
paying Lua's per-call cost. A ``Merger`` collects what is issued together
and hands it to one flush (the supervisor's makes it one
``hero_submit_many``). Every item still gets its own answer or its own
error, so one failing item never fails the others, and a lone item (a
sequential caller) goes out on its own, in the turn it was issued.

A merger has one flush in flight at a time: what is issued while one is
out waits for its answer and goes in the next, with everything else issued
meanwhile. Under load the calls grow instead of multiplying, and the part
of a Function paid per call (its indexes, counts and offers, an idle
actor's hand-off) is paid once for more jobs; an idle gateway's calls go
at once, as before.

A merger built ``after`` another never overtakes it: while the other holds
items waiting for its call in flight, this one's next flush waits until
those have left. The supervisor's starts follow its submits, so a client
that sends ``job.create`` and then, without waiting, ``job.start`` of the
same id still has them run in that order (the wire keeps the order calls
are issued in).
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
    """Hands the items issued together to ``flush`` together, one flush at a time."""

    def __init__(self, flush: Flush[Item], *, after: Merger[Any] | None = None) -> None:
        self._flush = flush
        self._after = after
        self._pending: list[tuple[Item, asyncio.Future[Any]]] = []
        self._sender: asyncio.Task[None] | None = None
        #: Resolved when this merger next hands its pending items to ``flush``.
        self._left: asyncio.Future[None] | None = None

    async def submit(self, item: Item) -> Any:
        """The item's answer (or its error), flushed with whatever else was
        issued in this turn of the loop, or while the flush before was out."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending.append((item, fut))
        if self._sender is None:
            # Runs after every task already scheduled for this turn has submitted.
            self._sender = asyncio.create_task(self._send_all())
        return await fut

    async def left(self) -> None:
        """Once every item issued to this merger so far has been handed to its
        flush (at once when none waits behind a flush in flight)."""
        while self._pending and self._sender is not None:
            if self._left is None:
                self._left = asyncio.get_running_loop().create_future()
            await asyncio.shield(self._left)

    async def _send_all(self) -> None:
        try:
            while self._pending:
                if self._after is not None:
                    await self._after.left()
                await self._send()
        finally:
            self._sender = None
            batch, self._pending = self._pending, []  # behind a send cancelled (shutdown)
            _fail(batch, RedisConnectionError())
            self._leave()

    def _leave(self) -> None:
        if self._left is not None:
            self._left.set_result(None)
            self._left = None

    async def _send(self) -> None:
        batch, self._pending = self._pending, []
        # a merger after this one wakes after this step, which issues the call
        # (the wire queues it in the caller's step): its own call comes after
        self._leave()
        try:
            answers = await self._flush([item for item, _ in batch])
        except BaseException as exc:  # connection lost, or cancelled on shutdown: all fail alike
            _fail(batch, exc if isinstance(exc, Exception) else RedisConnectionError())
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


def _fail(batch: list[tuple[Any, asyncio.Future[Any]]], exc: Exception) -> None:
    for _, fut in batch:
        if not fut.done():
            fut.set_exception(exc)
