"""The supervisor's API for actors: claim, report, heartbeat, stop requests.

An actor never touches a key itself. A busy actor costs one round trip per
cycle (``hero_cycle`` reports finished jobs and claims the next ones in one
Function call); an idle one blocks on the events stream for a ``dispatched``
event that concerns it, so nothing polls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from gateway import __version__
from gateway.config import Config
from gateway.supervisor import connection, keys, library, presence
from gateway.supervisor.events import last_id

log = logging.getLogger("gateway.supervisor.worker")


#: What hero_cycle returns per claimed job, after its id (same order as CLAIM_FIELDS in hero.lua).
CLAIM_FIELDS = ("script", "script_type", "timeout", "env_vars", "caller_id", "context_id",
                "attempt", "retries")  # fmt: skip


@dataclass(frozen=True)
class Claimed:
    """A job handed to an actor, with what it needs to run it."""

    job_id: str
    script: str
    script_type: str
    timeout: int
    env_vars: dict[str, str]
    caller_id: str
    context_id: str
    attempt: int
    retries: int

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> Claimed:
        job_id, script, script_type, timeout, env, caller, context, attempt, retries = row[:9]
        return cls(
            job_id=job_id,
            script=script or "",
            script_type=script_type,
            timeout=int(timeout or 300),
            env_vars=json.loads(env) if env else {},
            caller_id=caller or "",
            context_id=context or "",
            attempt=int(attempt or 1),
            retries=int(retries or 0),
        )


@dataclass(frozen=True)
class Outcome:
    job_id: str
    status: str  # finished | error | timeout | stopped
    output: str = ""
    error: str = ""
    log_path: str = ""


class ActorLink:
    """One actor instance's connection to the supervisor."""

    def __init__(
        self,
        config: Config,
        script_type: str,
        group: str,
        instance: str,
        *,
        capabilities: Sequence[str] = (),
        on_stop: Callable[[str], None] | None = None,
    ) -> None:
        self.script_type, self.group, self.instance = script_type, group, instance
        self.name = f"{group}:{instance}"
        self._config = config
        self._held = keys.held(script_type, group, instance)
        self._ctl = keys.ctl(script_type, group, instance)
        self._lease = keys.presence(script_type, group, instance)
        self._queues = keys.pop_order(script_type, group, instance)
        self._cycle_keys = [self._held, *self._queues]
        self._info = {
            "script_type": script_type,
            "group": group,
            "instance": instance,
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "started_at": time.time(),
            "version": __version__,
            "capabilities": list(capabilities),
        }
        self.redis = connection.pooled(config.redis, 2, "actor", resend=False)
        self._waker = connection.BlockingReader(config.redis, "actor-waker")
        self._control = connection.BlockingReader(config.redis, "actor-control")
        self._on_stop = on_stop
        self._work = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._closed = False

    async def open(self) -> None:
        await library.load(self.redis)
        await presence.beat(self.redis, self._info, self._config.presence_ttl)
        self._work.set()  # whatever is queued already
        self._tasks = [
            asyncio.create_task(self._wake_on_dispatch(), name="actor-waker"),
            asyncio.create_task(self._heartbeat(), name="actor-heartbeat"),
        ]
        if self._on_stop is not None:
            self._tasks.append(asyncio.create_task(self._obey_control(self._on_stop)))

    async def close(self) -> None:
        self._closed = True
        if self._tasks:  # opened
            waker, heartbeat, *control = self._tasks
            heartbeat.cancel()
            await self._waker.interrupt(self.redis, waker)
            for task in control:
                await self._control.interrupt(self.redis, task)
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            with contextlib.suppress(*connection.UNAVAILABLE):
                await presence.leave(self.redis, self._info)
        for reader in (self._waker, self._control):
            await reader.aclose()
        await self.redis.aclose()

    async def cycle(self, outcomes: Sequence[Outcome], want: int) -> list[Claimed]:
        """Report outcomes and claim up to ``want`` jobs, in one round trip."""
        self._work.clear()  # cleared before claiming: a dispatch after this wakes us
        args: list[str | int] = [self.name, self._ctl, self._lease, want, len(outcomes)]
        for o in outcomes:
            args += [o.job_id, o.status, o.output, o.error, o.log_path]
        rows = await library.call(
            self.redis, self._config, "hero_cycle", *args, key_names=self._cycle_keys
        )
        return [Claimed.from_row(row) for row in rows]

    async def adopt(self, running: Collection[str]) -> list[Claimed]:
        """Jobs this instance holds as started but is not running: a cycle whose
        reply was lost (Redis went away mid-call), or a previous process with the
        same instance name. They are run again (the finish stays exactly-once)."""
        held: list[str] = await self.redis.lrange(self._held, 0, -1)
        orphans = [job_id for job_id in held if job_id not in running]
        if not orphans:
            return []
        async with self.redis.pipeline(transaction=False) as pipe:
            for job_id in orphans:
                pipe.hmget(keys.job(job_id), "status", "actor", *CLAIM_FIELDS)
            rows = await pipe.execute()
        return [
            Claimed.from_row([job_id, *row[2:]])
            for job_id, row in zip(orphans, rows, strict=True)
            if row[0] == "started" and row[1] == self.name
        ]

    async def wait_for_work(self) -> None:
        await self._work.wait()

    def poke(self) -> None:
        """Wake ``wait_for_work`` (used when a running job finishes)."""
        self._work.set()

    async def store_logs(self, job_id: str, text: str) -> None:
        """The log tail, for ``job.logs`` from any host; it expires with the job."""
        ttl = self._config.job_ttl
        await self.redis.set(keys.logs(job_id), text, ex=ttl if ttl > 0 else None)

    # -- background ------------------------------------------------------------

    def _concerns_me(self, fields: dict[str, str]) -> bool:
        if fields.get("event") != "dispatched" or fields.get("script_type") != self.script_type:
            return False
        group, instance = fields.get("group", ""), fields.get("instance", "")
        if not group:
            return True
        return group == self.group and (not instance or instance == self.instance)

    async def _wake_on_dispatch(self) -> None:
        position = "$"  # until the first successful read says where the stream ends
        delay = 0.05
        while not self._closed:
            if position == "$":
                try:
                    position = await last_id(self.redis)
                except connection.UNAVAILABLE:
                    await asyncio.sleep(delay)
                    continue
                self._work.set()  # anything dispatched before we started reading
            try:
                await self._waker.ready()
                entries = await connection.xread(
                    self._waker.client, keys.EVENTS, position, block_ms=5000, count=500
                )
            except connection.UNAVAILABLE:
                self._waker.lost()
                if self._closed:
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                self._work.set()  # re-check queues once Redis is back
                continue
            delay = 0.05
            if not entries:
                continue
            position = entries[-1][0]
            if any(self._concerns_me(fields) for _, fields in entries):
                self._work.set()

    async def _obey_control(self, on_stop: Callable[[str], None]) -> None:
        """Stop requests arrive on this instance's control queue (Hero's ctl keys)."""
        while not self._closed:
            try:
                await self._control.ready()
                reply = await self._control.client.blpop([self._ctl], timeout=5)
            except connection.UNAVAILABLE:
                self._control.lost()
                await asyncio.sleep(0.5)
                continue
            if reply is None:
                continue
            try:
                message = json.loads(reply[1])
            except ValueError:
                log.warning("ignored malformed control message")
                continue
            if isinstance(message, dict) and message.get("action") == "stop":
                on_stop(str(message.get("job_id")))

    async def _heartbeat(self) -> None:
        while not self._closed:
            await asyncio.sleep(self._config.presence_ttl / 3)
            try:
                await presence.beat(self.redis, self._info, self._config.presence_ttl)
            except connection.UNAVAILABLE:
                log.warning("heartbeat failed: redis unavailable")
