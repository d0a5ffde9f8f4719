"""The maintenance loop: reaping dead actors, due retries, overdue jobs
(started past their timeout, or created and never started),
expired index entries and, in stream mode, consumers left by dead actors.

It is the one detector of dead actors: an instance is dead once its
presence has been missing for a full TTL of Redis being reachable
(``hero_watch`` gives every actor a fresh TTL after an outage), and each
job it held is run again or, after ``HERO_MAX_ACTOR_DEATHS``, dead-lettered
as poison (``hero_reap``). Outside actors, which only write the protocol's
presence key, are folded into the actors index every third of a TTL, so
listing them never SCANs.

Every gateway runs the loop, but only the elected leader (a Redis key with a
short TTL, renewed each tick) does the work, so several gateways never reap
twice. Each step is a Function call, atomic on its own, so a leader that dies
mid-tick leaves nothing half done.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from typing import TypeVar

from redis.exceptions import ResponseError

from gateway.config import Config
from gateway.model import library as functions
from gateway.model.library import Call
from gateway.supervisor import keys, library, presence
from gateway.supervisor.connection import UNAVAILABLE, Commands

log = logging.getLogger("gateway.supervisor.maintenance")
R = TypeVar("R")

#: Jobs never started that one tick stops at most: each may fail a walk of
#: waiting dependents inside the same Function call, which holds Redis.
ABANDON_LIMIT = 50


class Maintenance:
    #: Stream mode: a consumer that holds nothing and has not read for this
    #: long (an actor killed before its clean exit) is removed from the group.
    stale_consumer_after = 3600.0

    def __init__(self, client: Commands, config: Config) -> None:
        self._client = client
        self._config = config
        self._interval = config.maintenance_interval
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()
        self._next_fold = 0.0  # when to look for outside actors' presence keys next

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="hero-maintenance")

    async def stop(self) -> None:
        """Let the current tick finish (a Function call cancelled mid-flight
        may or may not have run), then end the loop."""
        self._stopping.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(self._task, 5)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                if await self.lead():
                    await self.tick()
            except UNAVAILABLE:
                pass  # Redis away: nothing to do until it is back
            except Exception:
                log.exception("maintenance tick failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._interval)

    async def _call(self, fcall: Call[R]) -> R:
        return await library.call(self._client, self._config, fcall)

    async def _step(self, fcall: Call[int]) -> int:
        """One step of a tick. Redis refusing it (a key of the wrong type that
        someone else wrote, say) fails that step alone: the others, which
        every actor and job of the deployment rely on, still run."""
        try:
            return await self._call(fcall)
        except ResponseError as exc:
            log.error("maintenance step failed", extra={"step": fcall.function, "error": str(exc)})
            return 0

    async def lead(self) -> bool:
        ttl_ms = int(self._interval * 3000)
        return await self._call(functions.lead(self.holder, ttl_ms))

    async def tick(self) -> dict[str, int]:
        """One pass; returns what it did (for logs and tests)."""
        done = dict.fromkeys(
            ("reaped", "promoted", "expired", "abandoned", "pruned", "consumers"), 0
        )
        ttl_ms = self._config.presence_ttl * 1000
        # an outage: no tick for a third of the TTL, or for two intervals when
        # ticks are that far apart (HERO_PRESENCE_TTL=3 with 1 s ticks saw an
        # outage at every tick, and no dead actor was ever reaped)
        gap_ms = max(ttl_ms // 3, int(self._interval * 2000))
        lost = await self._call(functions.watch(ttl_ms, gap_ms))
        if lost:
            log.warning("redis was out of reach: every actor gets a full presence TTL again",
                        extra={"lost_ms": lost})  # fmt: skip
        if time.monotonic() >= self._next_fold:
            self._next_fold = time.monotonic() + self._config.presence_ttl / 3
            await presence.fold(self._client, self._config.presence_ttl)
        now_ms = int(time.time() * 1000)
        for lease in await self._client.execute_command(
            "ZRANGEBYSCORE", keys.ACTORS, "-inf", now_ms
        ):
            parts = keys.parse_presence(lease)
            if parts is None:
                await self._client.execute_command("ZREM", keys.ACTORS, lease)
                continue
            deaths = self._config.max_actor_deaths
            n = await self._step(functions.reap(lease, keys.held(*parts), deaths, ttl_ms))
            if n:
                log.warning("jobs of a dead actor", extra={"actor": lease, "jobs": n})
            done["reaped"] += n
        done["promoted"] = await self._step(functions.promote())
        grace_ms = int(self._config.timeout_grace * 1000)
        done["expired"] = await self._step(functions.expire(grace_ms, 500))
        if self._config.created_ttl > 0:
            created_ms = self._config.created_ttl * 1000
            done["abandoned"] = await self._step(functions.abandon(created_ms, ABANDON_LIMIT))
        done["pruned"] = await self._step(functions.prune(1000))
        idle_ms = int(self.stale_consumer_after * 1000)
        for script_type in self._config.stream_types:
            stream = keys.work_stream(script_type)
            done["consumers"] += await self._step(functions.stream_prune(stream, idle_ms))
        if done["expired"]:
            log.warning("ended overdue jobs", extra={"jobs": done["expired"]})
        if done["abandoned"]:
            ttl = self._config.created_ttl
            log.info("stopped jobs never started", extra={"jobs": done["abandoned"], "ttl": ttl})
        return done
