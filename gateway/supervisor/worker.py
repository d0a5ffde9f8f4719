"""The supervisor's API for actors: claim, report, heartbeat, stop requests.

An actor never touches a key itself. A busy actor costs one round trip per
cycle (``hero_cycle`` reports finished jobs and claims the next ones in one
Function call); an idle one waits for a wake-up that ``dispatch`` publishes
on its type's channel, naming the queue, so nothing polls and an actor is
woken only by work it may take (not by every event of every job).

That PUBLISH is a speed-up, not the only way to learn of work: a producer we
did not write just LPUSHes. So the wake-up connection also asks Redis to
track the type's queue keys (CLIENT TRACKING in broadcast mode, which needs
no server setting, unlike keyspace notifications): Redis names every queue
key written by anyone, and an actor with room looks (one EXISTS over its
queues, since most such writes are other actors' pops) and claims. The pop
itself stays the atomic claim into the held list. Where Redis refuses
tracking, or ``HERO_QUEUE_POLL`` asks for it, the actor looks every so often
instead. bench/interop.py measures both (idle cost, pickup latency).

An actor whose cycle left it room offers its free slots in its type's idle
hash, so the next dispatches hand it jobs directly: already claimed, their
claim rows published on the instance's own channel (``handed``; one message
per Function call, a JSON array of the rows it handed), saving the
claim round trip for an interactive run-and-wait. Each handoff takes one
slot, so a handed job needs no cycle before the one reporting it, which
offers the slots again. Such a job is in the held list like any other, so a
message lost on a reconnect is recovered by ``adopt``; until then, and
while handoff messages are on their way, the held list counts them against
the actor's claims (``holding``), so its concurrency is never exceeded.

In stream mode (``HERO_STREAM_TYPES``) the link is a consumer named
``host:pid:index`` in the type stream's group. Its heartbeat also refreshes
the deliveries it holds, and its cycles reclaim those a silent consumer left
idle past ``HERO_STREAM_CLAIM_IDLE``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
from collections.abc import Callable, Sequence

from gateway.config import Config
from gateway.model import CLAIM_FIELDS, Call, Claimed, Outcome
from gateway.model import library as functions
from gateway.supervisor import connection, deliveries, keys, library, presence, stop_requests
from gateway.supervisor.in_hand import InHand, RunKey, run_key
from gateway.supervisor.subscriber import Subscriber
from gateway.supervisor.wire import Wire

#: Seconds between looks at the queues when Redis refuses CLIENT TRACKING.
FALLBACK_POLL = 0.025

log = logging.getLogger("gateway.supervisor.worker")


class ActorLink:
    """One actor instance's connection to the supervisor."""

    def __init__(
        self,
        config: Config,
        script_type: str,
        group: str,
        instance: str,
        *,
        index: int = 0,
        capabilities: Sequence[str] = (),
        on_stop: Callable[[str, str], None] | None = None,
        sandbox_off: bool = False,
    ) -> None:
        self.script_type, self.group, self.instance = script_type, group, instance
        self.name = f"{group}:{instance}"
        self._config = config
        self._held = keys.held(script_type, group, instance)
        self._ctl = keys.ctl(script_type, group, instance)
        self._lease = keys.presence(script_type, group, instance)
        self.stream = script_type in config.stream_types
        if self.stream:
            self.consumer = f"{socket.gethostname()}:{os.getpid()}:{index}"
            self._queues = [keys.work_stream(script_type)]
        else:
            self.consumer = ""
            self._queues = keys.pop_order(script_type, group, instance)
        self._idle = keys.idle(script_type)
        self._channel = keys.handoff(script_type, group, instance)
        #: sandbox_off: runs python jobs unconfined (HERO_SANDBOX=off), which
        #: their started event and hash say.
        self._who = functions.Actor(self.name, self._ctl, self._lease,
                                    "" if self.stream else self._channel, self.consumer,
                                    sandbox_off)  # fmt: skip
        self._cycle_keys = [self._held, self._idle, *self._queues]
        self._queues_set = frozenset(self._queues)
        self._handed: list[Claimed] = []
        #: Jobs given to the caller (claimed, handed, adopted) and not reported yet.
        self._in_hand = InHand()
        #: A cycle may find work: a wake-up, a written queue, or the last claim was full.
        self.claim_due = True
        self.offering = False  # free slots offered for handoffs may stand
        self._adopted: set[RunKey] = set()
        #: Held jobs may be unknown to this process: at start, after a lost
        #: cycle reply, and after a reconnect that may have lost a handoff.
        self.adopt_due = True
        self._listening = False  # subscribed to the wake-up and handoff channels
        self._reclaim = self.stream  # reclaim at start, then once per heartbeat
        self._info = presence.record(script_type, group, instance, capabilities)
        self._connections(config)
        self._written = asyncio.Event()  # Redis named one of our queues as written
        self._room = asyncio.Event()  # the last cycle claimed less than it wanted
        self._settle: asyncio.TimerHandle | None = None
        self._on_stop = on_stop
        self._work = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._obeying: asyncio.Task[None] | None = None
        self._closed = False

    def _connections(self, config: Config) -> None:
        """The link's connections (each connects on first use): one wire for
        every command (hero_cycle, the actor's one call per job, among them;
        a Wire never re-sends, so a lost cycle is never claimed twice), the
        wake-up subscriber (pub/sub mode) and the control queue's blocking
        reader (a BLPOP must not stall the others)."""
        self._wire = Wire(config.redis, "actor-jobs", timeout=config.redis_timeout)
        #: Jobs pushed by anyone are found by watching the list queues; stream
        #: mode keeps its PUBLISH wake-ups (every read and ack writes the stream).
        self._watch = not self.stream
        self._poll = config.queue_poll
        track = (keys.work_queue(self.script_type),) if self._watch and not self._poll else ()
        self._waker = Subscriber(
            config.redis, "actor-waker", self._on_message, track=track, on_written=self._on_written
        )
        self._control = Wire(config.redis, "actor-control")  # BLPOP: no timeout

    async def open(self) -> None:
        await library.load(self._wire)
        await presence.beat(self._wire, self._info, self._config.presence_ttl)
        self._wake()  # whatever is queued already
        self._tasks = [
            asyncio.create_task(self._wake_on_dispatch(), name="actor-waker"),
            asyncio.create_task(self._heartbeat(), name="actor-heartbeat"),
        ]
        if self._watch:
            self._tasks.append(asyncio.create_task(self._watch_queues(), name="actor-watch"))
        if self._on_stop is not None:  # ended by closing its connection, not cancelled
            obeying = stop_requests.obey(self._control, self._ctl, self._on_stop, self._is_closed)
            self._obeying = asyncio.create_task(obeying)

    async def close(self) -> None:
        self._closed = True
        if self._settle is not None:
            self._settle.cancel()
        if self._tasks:  # opened
            for task in self._tasks:
                task.cancel()
            await self._control.aclose()  # fails its blocked read at once
            for task in [*self._tasks, *([self._obeying] if self._obeying else [])]:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            with contextlib.suppress(*connection.UNAVAILABLE):
                await self.withdraw()
                await presence.leave(self._wire, self._info)
                if self.stream:
                    await self._stream_call(functions.stream_leave)
        await self._waker.aclose()
        await self._control.aclose()
        await self._wire.aclose()

    async def cycle(
        self, outcomes: Sequence[Outcome], want: int, *, accept_handoff: bool = False
    ) -> list[Claimed]:
        """Report outcomes and claim up to ``want`` jobs, in one round trip.

        ``accept_handoff``: offer the slots left free for jobs handed over
        directly (see ``handed``); only for a link whose caller runs what
        ``handed`` returns. Jobs handed over and not received yet count
        against ``want``."""
        self._work.clear()  # cleared before claiming: a dispatch after this wakes us
        self._written.clear()  # the claim looks at every queue: a write after this counts
        self._room.clear()
        if want > 0:
            self.claim_due = False
        reclaim = self._reclaim and want > 0
        idle_ms = int(self._config.stream_claim_idle * 1000) if reclaim else 0
        # only while subscribed: a handoff published before that would be lost
        offer = accept_handoff and self._listening and not self.stream
        call = functions.cycle(
            self._who, self._cycle_keys, want=want, outcomes=outcomes,
            attempts=self._in_hand.checked(outcomes), reclaim_idle_ms=idle_ms, offer=offer,
            holding=self._in_hand.holding(outcomes),
            outside_grace_ms=int(self._config.outside_grace * 1000),
        )  # fmt: skip
        try:
            reply = await library.call(self._wire, self._config, call)
        except BaseException:  # Redis may have run it: its reports go again, as sent again
            self._in_hand.unsure(outcomes)
            raise
        if reply.settle_ms:  # an outside job id waits for its hash: look again when its grace ends
            if self._settle is not None:
                self._settle.cancel()
            self._settle = asyncio.get_running_loop().call_later(reply.settle_ms / 1000, self._wake)
        self._in_hand.settle(outcomes)
        if reclaim:
            self._reclaim = False
        claimed = list(reply.claimed)
        self.offering = offer and len(claimed) < want
        self._in_hand.take(claimed)
        if len(claimed) < want:
            self._room.set()
        elif want > 0:
            self.claim_due = True  # a full claim: more may be queued
        return claimed

    def handed(self) -> list[Claimed]:
        """Jobs handed to this actor since the last call, to run now (but those adopted)."""
        jobs = [job for job in self._handed if run_key(job) not in self._adopted]
        self._adopted.difference_update(run_key(job) for job in self._handed)
        self._handed = []
        self._in_hand.take(jobs)
        return jobs

    def has_handed(self) -> bool:
        return bool(self._handed)

    async def withdraw(self) -> None:
        """Take back the offered slots: no job is handed over after this returns."""
        if not self.stream:
            await self._wire.execute_command("HDEL", self._idle, self.name)
            self.offering = False

    async def adopt(self) -> list[Claimed]:
        """Jobs this instance holds as started but is not running: a cycle whose
        reply was lost (Redis went away mid-call), or a previous process with the
        same instance name. They are run again (the finish stays exactly-once).
        In stream mode: the entries this consumer was delivered and has not acked.
        The jobs this link gave its caller and had no report of recorded yet
        are passed over by run (attempt, without one): a later one held is adopted."""
        self.adopt_due = False
        self._adopted = set()  # a late handoff message follows its adopt at once, if at all
        delivered: dict[str, str] = {}  # stream mode: job id -> its entry
        if self.stream:
            delivered = await deliveries.held(self._wire, self._queues[0], self.consumer)
            held = list(delivered)
        else:
            held = await self._wire.execute_command("LRANGE", self._held, 0, -1)
        if not held:
            return []
        asks = [("HMGET", keys.job(j), "status", "actor", *CLAIM_FIELDS, "run") for j in held]
        rows = await connection.lenient(self._wire, asks)
        adopted, stale = [], []
        for job_id, row in zip(held, rows, strict=True):
            if row is not None and row[0] == "started" and row[1] == self.name:
                *claim, run = row[2:]  # the entry of a stream job (or "") before its run
                job = Claimed.from_row([job_id, *claim, delivered.get(job_id, ""), run])
                if not self._in_hand.has(job) and run_key(job) not in self._adopted:
                    adopted.append(job)  # once, though the id be held twice
                    self._adopted.add(run_key(job))  # its handoff message may still come
            elif job_id not in self._in_hand:  # ended meanwhile (stopped, reaped, deleted),
                # or its key is no hash now (one in hand is its runner's to report)
                stale.append(delivered[job_id] if self.stream else job_id)
        if stale and self.stream:
            await deliveries.drop(self._wire, self._queues[0], stale)
        elif stale:
            await self._wire.pipeline([("LREM", self._held, 1, job_id) for job_id in stale])
        self._in_hand.take(adopted)
        return adopted

    async def wait_for_work(self) -> None:
        """Until something may be to do: a dispatch, a handoff, a finished job
        (``poke``). The flag is taken down on waking, so an actor with no room
        waits for its next wake-up instead of finding the flag still up."""
        await self._work.wait()
        self._work.clear()

    def poke(self) -> None:
        """Wake ``wait_for_work`` (used when a running job finishes)."""
        self._work.set()

    def _wake(self) -> None:
        """Wake ``wait_for_work`` with a claim due: work may be queued. (A
        handoff only wakes: the offer it came from still stands for the rest.)"""
        self.claim_due = True
        self._work.set()

    async def report_output(
        self,
        job_id: str,
        lines: str,
        progress: tuple[float, str] | None = None,
        *,
        attempt: int,
        run: str = "",
        cap: int,
        tail: str = "",
    ) -> bool:
        """A running job's new log ``lines`` and latest ``progress``, in one call
        (``hero_log``): appended to the log tail ``job.logs`` reads from any host
        (kept to ``cap`` bytes), and sent to subscribers as ``log`` and
        ``progress`` events while the job runs. A non-empty ``tail`` replaces
        the log tail (the job's last report); it expires with the job.

        False: nothing was written, as the job hash no longer names this
        actor's ``attempt`` and ``run`` (deleted, its id taken by another job,
        or a later attempt runs): the run's lines are not that job's, and it
        reports no more."""
        call = functions.log(job_id, self.name, attempt, lines, progress, cap, tail, run)
        return await library.call(self._wire, self._config, call)

    # -- background ------------------------------------------------------------

    async def _wake_on_dispatch(self) -> None:
        """Set the work flag when a job lands in a queue this actor pops.

        Only the wake-up travels by pub/sub; the job waits in its queue. So a
        message missed while disconnected costs nothing: every (re)subscribe
        is followed by a claim attempt."""
        channels = [keys.wake(self.script_type)] + ([] if self.stream else [self._channel])
        delay = 0.05
        first = True
        while not self._closed:
            try:
                lost = await self._waker.subscribe(channels)
            except connection.UNAVAILABLE:
                if self._closed:
                    return
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
                continue
            # Redis now delivers to us: handoffs may be accepted from here on
            self._listening = True
            if self._watch and not self._poll and not self._waker.tracking:
                log.warning(
                    "redis refused CLIENT TRACKING; looking at the queues instead",
                    extra={"every_s": FALLBACK_POLL},
                )
                self._poll = FALLBACK_POLL
                self._written.set()  # the watch may wait for a write: poll from now on
            self._wake()  # whatever was dispatched while we were away
            if not first:
                self.adopt_due = True  # a handoff may have been published meanwhile
            first, delay = False, 0.05
            try:
                await lost
            finally:
                self._listening = False

    def _on_written(self, written: list[str] | None) -> None:
        if written is None or not self._queues_set.isdisjoint(written):
            self._written.set()

    async def _watch_queues(self) -> None:
        """Set the work flag when a queue this actor pops holds a job, whoever
        pushed it: looked at when Redis names one as written (or every
        ``poll`` seconds without tracking), only while the actor has room."""
        while not self._closed:
            try:
                if self._poll:
                    await asyncio.sleep(self._poll)
                else:
                    await self._written.wait()
                await self._room.wait()
                self._written.clear()
                if await self._wire.execute_command("EXISTS", *self._queues):
                    self._wake()
            except connection.UNAVAILABLE:
                await asyncio.sleep(0.5)

    def _on_message(self, channel: str, data: str) -> None:
        if channel == self._channel:
            self._handed.extend(Claimed.from_row(row) for row in json.loads(data))
            self._work.set()
        elif data in self._queues:
            self._wake()

    def _is_closed(self) -> bool:
        return self._closed

    async def _stream_call(self, build: Callable[[str, str], Call[int]]) -> int:
        return await library.call(self._wire, self._config, build(self._queues[0], self.consumer))

    def reclaim_soon(self) -> None:
        """Stream mode: the next cycle with room also takes over deliveries a
        silent consumer left idle past ``HERO_STREAM_CLAIM_IDLE`` (each
        heartbeat asks for this once)."""
        if self.stream:
            self._reclaim = True
            self._wake()

    async def _heartbeat(self) -> None:
        while not self._closed:
            await asyncio.sleep(self._config.presence_ttl / 3)
            try:
                await presence.beat(self._wire, self._info, self._config.presence_ttl)
                if self.stream:
                    await self._stream_call(functions.stream_touch)
                    self.reclaim_soon()
            except connection.UNAVAILABLE:
                log.warning("heartbeat failed: redis unavailable")
