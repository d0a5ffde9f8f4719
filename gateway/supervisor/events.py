"""The one reader of the events stream per process, fanning entries out in memory.

Waiters and subscribers never read Redis themselves: a single task does
``XREAD BLOCK`` on a connection of its own (a ``Wire``: the read is on the
job path, where each wake-up counts) and hands each batch to the registered
listeners. When Redis goes away the reader backs off and resumes from the
last id it saw, so listeners miss nothing the stream still holds.

A job makes four or more events, and a reader woken for each costs a
process about 0.1 ms of CPU per wake-up, most of it on the path of a
run-and-wait. So while nobody needs every event at once (``eager`` is
false: no live subscription), the reader wakes for terminal events only:

- idle: it blocks on both ``keys.EVENTS`` and ``keys.ENDED``, so the first
  event of any job wakes it;
- lingering: for ``LINGER`` seconds after that it blocks on ``keys.ENDED``
  alone, whose entries (terminal events, under their ids in the events
  stream) go to ``on_ended`` at once, then reads the events stream without
  blocking and hands the whole batch to the listeners. It goes back to idle
  once such a read comes back empty.

Listeners see each event once and in order, only up to ``LINGER`` later;
``on_ended`` may see a terminal event a second time in the listeners' batch.

While nobody needs events at all (no waiter, no subscription, for
``KEEP_AWAKE`` seconds: a caller who runs jobs one after another keeps it
awake), the reader sleeps and reads nothing: a producer's stream of submits
costs it no reads. Whoever comes to need events calls ``awake`` before it
does what makes them; a sleeping reader then takes the newest id as its
position (what went by while it slept was nobody's) before ``awake`` returns,
so nothing written after ``awake`` returns is missed.

Decoding an entry into an ``Event`` costs more than reading it (about
6 µs), and most entries interest nobody: a waiter cares only for its own
job. So each listener says whether it ``wants`` events now, and a batch is
decoded only for the listeners that do; a listener that names the jobs it
cares for (``select``, the waits) gets only their entries decoded, picked by
the job id where ``emit`` and ``hero_log`` write it, first. Entries of
``keys.ENDED`` are picked and decoded the same way for ``on_ended``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from typing import Any

from gateway.model import Event, StreamId
from gateway.supervisor import keys
from gateway.supervisor.connection import UNAVAILABLE
from gateway.supervisor.replies import RawEntry, pairs
from gateway.supervisor.wire import Wire

log = logging.getLogger("gateway.supervisor.events")

Listener = Callable[[list[Event]], None]
#: Whether a listener cares for the events of the job of this id.
Selector = Callable[[str], bool]

#: Seconds the listeners' events may lag while only waiters are served.
LINGER = 0.01
#: Seconds the reader reads on after the last waiter or subscriber went.
KEEP_AWAKE = 2.0


async def last_id(wire: Wire) -> str:
    newest: Any = await wire.execute_command("XREVRANGE", keys.EVENTS, "+", "-", "COUNT", 1)
    return str(newest[0][0]) if newest else "0-0"


async def read_after(
    wire: Wire, after: dict[str, str], *, block_ms: int | None, count: int
) -> dict[str, list[RawEntry]]:
    """Entries after the given id of each stream, as read, waiting up to
    ``block_ms`` for one (``None``: not at all). RESP2 gives an entry's fields
    as one flat list (name, value, ...); an entry of ``keys.ENDED`` has the
    terminal fields and the caller only (``Event.from_entry`` leaves the rest empty)."""
    block = () if block_ms is None else ("BLOCK", max(block_ms, 1))
    reply: Any = await wire.execute_command(
        "XREAD", "COUNT", count, *block, "STREAMS", *after, *after.values()
    )
    return {name: raw for name, raw in reply or []}


def decoded(batch: list[RawEntry]) -> list[Event]:
    return [Event.from_entry(entry_id, pairs(fields)) for entry_id, fields in batch]


def _always() -> bool:
    return True


def job_of(fields: list[Any]) -> str:
    """An entry's job id, as read: the first field where hero.lua writes it,
    else wherever another writer put it."""
    if fields and fields[0] == "job_id":
        return str(fields[1])
    return str(pairs(fields).get("job_id", ""))


def taken(batch: list[RawEntry], select: Selector | None, every: list[Event] | None) -> list[Event]:
    """What a listener with ``select`` (None: every event) takes of the batch:
    from ``every``, the batch decoded already, if it was; else only the
    entries it takes are decoded."""
    if every is not None:
        return every if select is None else [event for event in every if select(event.job_id)]
    if select is None:
        return decoded(batch)
    return decoded([entry for entry in batch if select(job_of(entry[1]))])


class EventReader:
    """Tails the events stream; listeners are called synchronously, in stream order."""

    def __init__(
        self,
        wire: Wire,
        *,
        eager: Callable[[], bool] = lambda: True,
        on_ended: Listener | None = None,
        ended_wanted: Callable[[], bool] = _always,
        ended_select: Selector | None = None,
        block_ms: int = 5000,
        count: int = 1000,
    ) -> None:
        self._wire = wire
        self._eager = eager
        self._on_ended = on_ended
        self._ended_wanted = ended_wanted
        self._ended_select = ended_select
        self._block_ms = block_ms
        self._count = count
        self._listeners: list[tuple[Listener, Callable[[], bool], Selector | None]] = []
        self._task: asyncio.Task[None] | None = None
        self.position = "0-0"
        self._ended_position = "0-0"  # newest entry of keys.ENDED handed to on_ended
        self._linger_until: float | None = None  # lingering till then; None: idle
        self._needed_until = 0.0  # reads on till then although nobody needs events
        self._asleep = False
        self._bell = asyncio.Event()  # rung by awake (or stop) to end a sleep
        self._waking: asyncio.Task[None] | None = None
        self.healthy = False
        self._closed = False

    def add_listener(
        self,
        listener: Listener,
        *,
        wants: Callable[[], bool] = _always,
        select: Selector | None = None,
    ) -> None:
        """``wants``: whether the listener has any use for events now (a
        waiter, a subscription); while it has none it is not called, and
        costs no decoding. It must do nothing with a batch it does not want.
        ``select``: whether it cares for a job's events (by job id); it is
        handed those only (None: every event)."""
        self._listeners.append((listener, wants, select))

    async def start(self) -> None:
        self.position = self._ended_position = await last_id(self._wire)
        self.healthy = True
        self._task = asyncio.create_task(self._run(), name="hero-events-reader")

    async def awake(self) -> None:
        """Return once the reader reads from a position no older than this
        call. Call it after registering the need (the waiter, the
        subscription) and before what makes the events (the submit, the
        hash read, the replay): until then a sleeping reader may sleep on."""
        if not self._asleep:
            return
        if self._waking is None:
            self._waking = asyncio.create_task(self._wake(), name="hero-events-wake")
        await asyncio.shield(self._waking)

    async def _wake(self) -> None:
        try:
            newest = await last_id(self._wire)
        finally:
            self._waking = None
        self.position = self._ended_position = max(self.position, newest, key=StreamId.parse)
        self._linger_until = None
        self._asleep = False
        self._bell.set()

    def _needed(self) -> bool:
        if self._on_ended is None or self._eager() or self._ended_wanted():
            self._needed_until = time.monotonic() + KEEP_AWAKE
            return True
        return time.monotonic() < self._needed_until

    async def stop(self) -> None:
        self._closed = True
        self._bell.set()
        await self._wire.aclose()  # fails the blocked read at once
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        delay = 0.05
        while not self._closed:
            if not self._needed():  # checked and slept on in one step: awake sees it
                self._asleep = True
                self._bell.clear()
                await self._bell.wait()
                continue
            try:
                if self._on_ended is None or self._eager():
                    self._linger_until = None
                    await self._read_events(self._block_ms)
                else:
                    await self._read_lazily()
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
            # Let the callers just resolved answer before this task writes its
            # next read (a socket write, ~40 µs here, would otherwise go first).
            await asyncio.sleep(0)

    async def _read_events(self, block_ms: int | None) -> int:
        """One read of the events stream, handed to the listeners; how many it had."""
        got = await read_after(
            self._wire, {keys.EVENTS: self.position}, block_ms=block_ms, count=self._count
        )
        batch = got.get(keys.EVENTS, [])
        self._deliver(batch)
        return len(batch)

    async def _read_lazily(self) -> None:
        if self._linger_until is None:  # idle: whichever stream moves first
            got = await read_after(
                self._wire,
                {keys.EVENTS: self.position, keys.ENDED: self._ended_after()},
                block_ms=self._block_ms,
                count=self._count,
            )
            self._ended(got.get(keys.ENDED, []))
            self._deliver(got.get(keys.EVENTS, []))
            if got:
                self._linger_until = time.monotonic() + LINGER
            return
        left = self._linger_until - time.monotonic()
        if left > 0:
            got = await read_after(
                self._wire,
                {keys.ENDED: self._ended_after()},
                block_ms=int(left * 1000) + 1,
                count=self._count,
            )
            self._ended(got.get(keys.ENDED, []))
            return
        read = await self._read_events(None)
        if read < self._count:  # else more is waiting: read on at once
            self._linger_until = time.monotonic() + LINGER if read else None

    def _ended_after(self) -> str:
        """Entries of keys.ENDED up to the events position were delivered already."""
        return max(self._ended_position, self.position, key=StreamId.parse)

    def _ended(self, batch: list[RawEntry]) -> None:
        if batch and self._on_ended is not None:
            self._ended_position = batch[-1][0]
            if self._ended_wanted():
                ended = taken(batch, self._ended_select, None)
                if ended:
                    self._call(self._on_ended, ended)

    def _deliver(self, batch: list[RawEntry]) -> None:
        if not batch:
            return
        self.position = batch[-1][0]
        wanting = [(listener, select) for listener, wants, select in self._listeners if wants()]
        # the whole batch decoded once if anyone takes every event; else per selector
        every = decoded(batch) if any(select is None for _, select in wanting) else None
        for listener, select in wanting:
            events = taken(batch, select, every)
            if events:
                self._call(listener, events)

    @staticmethod
    def _call(listener: Callable[[Any], None], batch: list[Any]) -> None:
        try:
            listener(batch)
        except Exception:
            log.exception("event listener failed")
