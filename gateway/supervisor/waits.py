"""Waiting for job results without a Redis connection per waiting caller.

Three kinds of actor report completion differently, so a wait is resolved
by whichever signal comes first:

- our actors append a terminal event: the shared ``EventReader`` sees it and
  one batched HMGET fetches the results of every job that ended in the batch
  (no fetch at all when the event carries the output and the wait is on a job
  its caller just created: see ``WaitHub.created``);
- reply-queue actors LPUSH the reply queue (``keys.reply``, or the legacy
  ``keys.legacy_reply``) and write the hash;
- hash-only actors write only the hash.

The last two are found by one batched sweep (a single pipeline for all
outstanding waits) that backs off per job. A job our actors have claimed
is not ended by the sweep: the events stream will announce its end (not in
compat mode, where a legacy actor may have popped a copy of the job and end
it while ours still runs it, and that first end is the job's).

A job deleted while waited on has no end to announce: its actor is told to
stop, and what it reports for a job whose hash is gone is dropped. So once
a wait has seen its job exist (``exists``), the sweep, which looks at our
actors' jobs too for this, takes a missing hash for a job that is gone and
tells the waiters so (``JobNotFound``), as a read of it would; a delete on
the waiters' own gateway tells them at once (``Supervisor.delete``).

A wait is kept by job id, and an id outlives its job: deleted (or expired)
while someone waits, it may be taken by another caller, whose job's end then
ends the wait. So each waiter keeps the caller it was admitted for, and an
end is handed only to waiters that may see its job (the hash's, or the
terminal event's, ``caller_id``); the others learn that their job is gone
(``JobNotFound``, as if they asked now), never the other caller's output.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import ResponseError

from gateway.errors import HeroError, JobNotFound, WaitTimeout
from gateway.model import TERMINAL, Event, belongs, result
from gateway.supervisor import keys
from gateway.supervisor.connection import UNAVAILABLE, lenient
from gateway.supervisor.wire import Wire

log = logging.getLogger("gateway.supervisor.waits")

Result = dict[str, Any]
#: A job's end as the hash holds it, with the caller it belongs to.
_RESULT_FIELDS = ("status", "output", "error", "caller_id")


async def job_result(wire: Wire, job_id: str, caller_id: str | None = None) -> tuple[Result, str]:
    """The job's JobResult and its caller ("" for none), read together;
    ``JobNotFound`` when there is none, or when ``caller_id`` is given and the
    id is another caller's by now (its job deleted since the caller's
    ownership was checked, and the id taken)."""
    status, output, error, owner = await wire.execute_command(
        "HMGET", keys.job(job_id), *_RESULT_FIELDS
    )
    if status is None or not belongs(owner, caller_id):
        raise JobNotFound(job_id)
    return result(job_id, status, output, error), owner or ""


@dataclass
class _Wait:
    #: Each waiter, and the caller it was admitted for (None: it may see every job).
    futures: dict[asyncio.Future[Result], str | None] = field(default_factory=dict)
    ours: bool = False  # claimed by one of our actors: the events stream will tell
    #: The job was seen since the wait began: a missing hash now means it is gone.
    known: bool = False
    #: The waiter created the job, so every event of it is of this round.
    created: bool = False
    next_check: float = 0.0
    backoff: float = 0.0

    def sees(self, owner: str) -> bool:
        """Whether every waiter may see a job of ``owner``."""
        return all(belongs(owner, caller) for caller in self.futures.values())


class WaitHub:
    def __init__(
        self,
        wire: Wire,
        *,
        watch_interval: float,
        compat: bool,
        reconcile: Callable[[str], Awaitable[None]],
    ) -> None:
        self._wire = wire
        self._reconcile = reconcile
        self._interval = watch_interval
        self._compat = compat
        self._waits: dict[str, _Wait] = {}
        self._ended: set[str] = set()
        self._wake_fetcher = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False

    def start(self) -> None:
        self._tasks = [
            asyncio.create_task(self._fetcher(), name="hero-waits-fetcher"),
            asyncio.create_task(self._sweeper(), name="hero-waits-sweeper"),
        ]

    async def stop(self) -> None:
        """Cancel, and also flag: redis-py can turn a cancel into ConnectionError,
        which the loops would otherwise take for "Redis away, try again"."""
        self._stopping = True
        self._wake_fetcher.set()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    @property
    def waiting(self) -> int:
        return len(self._waits)

    def watches(self, job_id: str) -> bool:
        """Whether someone waits for this job (the events reader decodes
        only such jobs' events for ``on_events``)."""
        return job_id in self._waits

    # -- registering -----------------------------------------------------------

    def register(self, job_id: str, caller_id: str | None = None) -> asyncio.Future[Result]:
        """Register before the job can end (or before reading its hash), so no end is missed.
        ``caller_id``: whose job the waiter was admitted to (None: an admin's
        wait, or a server without keys, which may see any job)."""
        fut: asyncio.Future[Result] = asyncio.get_running_loop().create_future()
        wait = self._waits.get(job_id)
        if wait is None:
            wait = self._waits[job_id] = _Wait(next_check=time.monotonic() + self._interval)
        wait.futures[fut] = caller_id
        return fut

    async def wait(self, job_id: str, fut: asyncio.Future[Result], seconds: float) -> Result:
        try:
            async with asyncio.timeout(seconds):  # cancels only this waiter's own future
                return await fut
        except TimeoutError:
            raise WaitTimeout(job_id) from None
        finally:
            self.forget(job_id, fut)

    def resolve(self, job_id: str, value: Result, owner: str) -> None:
        """End the wait with the end of the job ``owner`` (its caller_id, ""
        for none) holds the id for. A waiter admitted for another caller waited
        on a job of this id that is gone since: it is told so."""
        wait = self._waits.pop(job_id, None)
        if wait is None:
            return
        for fut, caller in wait.futures.items():
            if fut.done():
                continue
            if belongs(owner, caller):
                fut.set_result(value)
            else:
                fut.set_exception(JobNotFound(job_id))

    def fail(self, job_id: str, error: HeroError) -> None:
        """End the wait with ``error`` for every waiter."""
        wait = self._waits.pop(job_id, None)
        if wait is None:
            return
        for fut in wait.futures:
            if not fut.done():
                fut.set_exception(error)

    def created(self, job_id: str) -> None:
        """The waiter has just created this job (``run``): its terminal event
        cannot be a late one of an earlier round (a replayed dead letter), so
        one that carries the output resolves the wait without reading the hash."""
        wait = self._waits.get(job_id)
        if wait is not None:
            wait.created = True

    def exists(self, job_id: str) -> None:
        """The job was read or written after the waiter registered: from now
        on, a missing hash means it was deleted (a ``run``'s waiter registers
        before its job exists)."""
        wait = self._waits.get(job_id)
        if wait is not None:
            wait.known = True

    def forget(self, job_id: str, fut: asyncio.Future[Result]) -> None:
        wait = self._waits.get(job_id)
        if wait is None:
            return
        wait.futures.pop(fut, None)
        if not wait.futures:
            del self._waits[job_id]

    # -- events path (our actors, and the supervisor's own transitions) --------

    def on_events(self, events: list[Event]) -> None:
        for event in events:
            wait = self._waits.get(event.job_id)
            if wait is None:
                continue
            status = event.status
            if status in TERMINAL:
                self._ended_by(event, wait)
            elif status == "started" and event.actor and not self._compat:
                wait.ours = True  # in compat mode a legacy actor may end it first

    def _ended_by(self, event: Event, wait: _Wait) -> None:
        """A terminal event ends the wait itself when it carries the output of
        a job the waiter created and every waiter may see the job; else the
        hash decides (and tells a waiter of another caller its job is gone)."""
        owner = event.caller_id or ""
        if wait.created and event.output is not None and wait.sees(owner):
            self.resolve(event.job_id, _from_event(event), owner)
        else:
            self._ended.add(event.job_id)
            self._wake_fetcher.set()

    async def _fetcher(self) -> None:
        while not self._stopping:
            await self._wake_fetcher.wait()
            self._wake_fetcher.clear()
            ended, self._ended = self._ended, set()
            try:
                await self._fetch(ended)
            except UNAVAILABLE:
                self._ended |= ended  # try again once Redis is back
                await asyncio.sleep(0.1)
                self._wake_fetcher.set()

    async def _fetch(self, job_ids: Iterable[str]) -> None:
        ids = [j for j in job_ids if j in self._waits]
        if not ids:
            return
        rows = await self._wire.pipeline([("HMGET", keys.job(j), *_RESULT_FIELDS) for j in ids])
        for job_id, (status, output, error, owner) in zip(ids, rows, strict=True):
            if status is None:  # deleted while being waited on
                self.fail(job_id, JobNotFound(job_id))
            elif status in TERMINAL:
                self.resolve(job_id, result(job_id, status, output, error), owner or "")
            # else: a late event of an earlier round (a replayed dead letter): keep waiting

    # -- sweep path (reply-queue and hash-only actors) -------------------------

    async def _sweeper(self) -> None:
        while not self._stopping:
            await asyncio.sleep(self._interval)
            try:
                await self._sweep()
            except UNAVAILABLE:
                continue
            except Exception:
                log.exception("wait sweep failed")

    async def _sweep(self) -> None:
        now = time.monotonic()
        due = [j for j, w in self._waits.items() if w.next_check <= now]
        if not due:
            return
        commands: list[tuple[str | int, ...]] = []
        for job_id in due:
            commands.append(("HMGET", keys.job(job_id), *_RESULT_FIELDS))
            commands.append(("LINDEX", keys.reply(job_id), -1))
            if self._compat:
                commands.append(("LINDEX", keys.legacy_reply(job_id), -1))
        rows = await lenient(self._wire, commands)
        step = 3 if self._compat else 2
        for i, job_id in enumerate(due):
            mine = rows[i * step : i * step + step]
            if mine[0] is None:  # its key is of another type: this wait learns nothing now
                self._later(job_id, now)
                continue
            status, output, error, owner = mine[0]
            replies = [r for r in mine[1:] if r is not None]  # a refused LINDEX: none
            wait = self._waits.get(job_id)
            if wait is None:  # ended while the sweep read
                continue
            if status is None and wait.known:  # deleted since the wait saw it
                self.fail(job_id, JobNotFound(job_id))
            elif wait.ours:  # its end is the events stream's to tell
                self._later(job_id, now)
            elif status in TERMINAL:
                with contextlib.suppress(ResponseError):  # the end is the waiter's all the same
                    await self._reconcile(job_id)  # index, event and dependents catch up
                self.resolve(job_id, result(job_id, status, output, error), owner or "")
            elif replies:
                self.resolve(job_id, _from_reply(job_id, replies[0], output, error), owner or "")
            else:
                self._later(job_id, now)

    def _later(self, job_id: str, now: float) -> None:
        """The next look at a wait that found nothing yet: backing off, to 8 intervals."""
        wait = self._waits.get(job_id)
        if wait is not None:
            wait.backoff = min(max(wait.backoff * 2, self._interval), 8 * self._interval)
            wait.next_check = now + wait.backoff


def _from_event(event: Event) -> Result:
    return result(event.job_id, event.status, event.output, event.error)


def _from_reply(job_id: str, payload: str, output: str | None, error: str | None) -> Result:
    """A reply-queue item whose hash has not caught up: our JSON shape, or the bare output."""
    with contextlib.suppress(ValueError):
        data = json.loads(payload)
        if isinstance(data, dict) and data.get("status") in TERMINAL:
            return result(job_id, str(data["status"]), data.get("output"), data.get("error"))
    return result(job_id, "finished", output or payload, error)
