"""The supervisor: every queue decision behind one object.

The RPC layer calls these methods and nothing else. Each operation is one
Redis round trip where it can be (a Function call doing the whole
transition). Every command goes out on one multiplexed ``Wire`` (the
calls of one loop turn leave together); the events reader's blocking XREAD
has a Wire of its own, and waits and subscriptions are served from that one
reader per process.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from gateway.config import Config
from gateway.errors import InvalidParams, InvalidState, JobNotFound
from gateway.model import STATUSES, TERMINAL, JobSpec, Transition, Verdict
from gateway.model import library as functions
from gateway.model.library import Call, Start
from gateway.supervisor import (
    connection,
    dlq,
    keys,
    library,
    listing,
    presence,
    reads,
    stats,
    submission,
)
from gateway.supervisor.batching import Merger
from gateway.supervisor.connection import guarded, guarded_job
from gateway.supervisor.events import EventReader
from gateway.supervisor.maintenance import Maintenance
from gateway.supervisor.replies import pairs
from gateway.supervisor.subscriptions import Subscription, Subscriptions
from gateway.supervisor.waits import WaitHub, job_result
from gateway.supervisor.wire import Wire

log = logging.getLogger("gateway.supervisor")

MAX_WAIT = 3600.0
R = TypeVar("R")


class Supervisor:
    def __init__(self, config: Config) -> None:
        self.config = config
        #: The process's one connection for every command (the Commands port).
        self.wire = Wire(config.redis, "supervisor-jobs", timeout=config.redis_timeout)
        self.waits = WaitHub(
            self.wire,
            watch_interval=config.watch_interval,
            compat=config.compat_legacy,
            reconcile=self.reconcile,
        )
        # Waits need only terminal events at once; subscribers need them all.
        self._reader = EventReader(
            Wire(config.redis, "events"),  # XREAD BLOCK: no timeout (the stall watch)
            eager=self._anyone_subscribed,
            on_ended=self.waits.on_events,
            ended_wanted=self._anyone_waits,
            ended_select=self.waits.watches,
        )
        self.subscriptions = Subscriptions(self.wire, awake=self._reader.awake)
        self._reader.add_listener(
            self.waits.on_events, wants=self._anyone_waits, select=self.waits.watches
        )
        self._reader.add_listener(self.subscriptions.on_events, wants=self._anyone_subscribed)
        self.maintenance = Maintenance(self.wire, config)
        #: The submits and the starts issued in one turn of the event loop (the
        #: elements of a JSON-RPC batch) leave together: see ``batching``.
        self._submits: Merger[tuple[JobSpec, bool]] = Merger(self._submit_jobs)
        self._starts: Merger[Start] = Merger(self._start_many)
        self.watching = False

    @classmethod
    async def connect(
        cls, config: Config, *, maintenance: bool = True, watch: bool = True
    ) -> Supervisor:
        """``watch=False``: a producer that only submits and manages jobs; it does
        not tail the events stream (no waits, no subscriptions), which would
        otherwise cost it as much CPU as a third of its submits."""
        sup = cls(config)
        try:
            await library.load(sup.wire)
        except BaseException:
            await sup.wire.aclose()
            raise
        if watch:
            await sup._reader.start()
            sup.waits.start()
            sup.watching = True
        if maintenance:
            sup.maintenance.start()
        return sup

    def _anyone_waits(self) -> bool:
        return self.waits.waiting > 0

    def _anyone_subscribed(self) -> bool:
        return len(self.subscriptions) > 0

    def _must_watch(self) -> None:
        if not self.watching:
            raise RuntimeError("waiting needs a Supervisor connected with watch=True")

    async def close(self) -> None:
        await self.maintenance.stop()
        await self.waits.stop()
        await self._reader.stop()
        await self.wire.aclose()

    async def ping(self) -> bool:
        try:
            return bool(await self.wire.execute_command("PING"))
        except connection.UNAVAILABLE:
            return False

    # -- jobs --------------------------------------------------------------------

    async def _call(self, fcall: Call[R]) -> R:
        return await library.call(self.wire, self.config, fcall)

    def job_spec(self, spec: JobSpec | Mapping[str, Any]) -> JobSpec:
        """A JobSpec is valid by construction (the RPC layer builds one from
        params the contract already checked); anything else is a client's
        data, checked in full here (``InvalidJob``)."""
        if isinstance(spec, JobSpec):
            return spec
        return JobSpec.parse(spec, self.config.script_types, self.config.stream_types)

    async def _submit_jobs(
        self, jobs: Sequence[tuple[JobSpec, bool]]
    ) -> list[Transition | Exception]:
        return await submission.submit_jobs(self.wire, self.config, jobs)

    @guarded
    async def submit_many(
        self, specs: Sequence[JobSpec | Mapping[str, Any]], *, start: bool = True
    ) -> list[dict[str, Any]]:
        """Create (and start) many jobs in one round trip: a producer's batch.

        Every spec is validated like ``create``'s; an invalid one fails the whole
        call before anything is written. Each answer is ``create``'s (or
        ``start``'s) shape; a job whose prerequisite is unknown, whose id
        another caller holds, or whose part Redis refused gets status
        ``invalid`` with the reason in ``error`` instead of failing the batch
        (a refused job may exist, created before the refusal: ``get`` tells)."""
        jobs = [self.job_spec(spec) for spec in specs]
        replies = await self._submit_jobs([(job, start) for job in jobs])
        return [submission.answer(job, r) for job, r in zip(jobs, replies, strict=True)]

    @guarded
    async def create(self, spec: JobSpec | Mapping[str, Any]) -> dict[str, Any]:
        """``Forbidden`` when a job with this id exists under another caller
        (a spec without caller_id, an admin's, may name any job)."""
        job = self.job_spec(spec)
        reply = submission.accepted(job, await self._submits.submit((job, False)))
        return {"job_id": job.job_id, "status": reply.status}

    async def _start_many(self, starts: Sequence[Start]) -> list[Transition | Exception]:
        return await submission.start_jobs(self.wire, self.config, starts)

    @guarded
    async def start(self, job_id: str, caller_id: str | None = None) -> dict[str, Any]:
        reply: Transition = await self._starts.submit((job_id, caller_id))
        if reply.verdict is Verdict.NOT_FOUND:
            raise JobNotFound(job_id)
        if reply.verdict is Verdict.INVALID_STATE:
            raise InvalidState(
                f"Job {job_id} is {reply.status}; only a created job can be started",
                {"job_id": job_id, "status": reply.status},
            )
        return {"job_id": job_id, "status": reply.status, "queue": reply.queue}

    @guarded
    async def run(
        self, spec: JobSpec | Mapping[str, Any], wait: float | None = None
    ) -> dict[str, Any]:
        """Create, start and wait, in one Function call plus the wait.

        The waiter is registered before the job exists, so its end cannot be missed.
        An existing created job of the same caller is started by the same call.
        The waiter holds to the spec's caller (none: an admin's, who may see any job).
        """
        self._must_watch()
        job = self.job_spec(spec)
        timeout = _wait_seconds(wait, default=float(job.timeout))
        fut = self.waits.register(job.job_id, job.caller_id or None)
        try:
            await self._reader.awake()
            reply = submission.accepted(job, await self._submits.submit((job, True)))
            self.waits.exists(job.job_id)
            if reply.verdict is not Verdict.EXISTS:
                self.waits.created(job.job_id)
            if reply.status in TERMINAL:  # failed at once, or an ended job of this caller
                self.waits.resolve(job.job_id, *await job_result(self.wire, job.job_id))
        except BaseException:
            self.waits.forget(job.job_id, fut)
            raise
        return await self.waits.wait(job.job_id, fut, timeout)

    @guarded_job
    async def output(
        self, job_id: str, wait: float | None = None, caller_id: str | None = None
    ) -> dict[str, Any]:
        """``caller_id``: the caller the output is for (None: anyone, an admin);
        a wait ends as for a missing job once the id holds another caller's job."""
        if not wait:
            return (await job_result(self.wire, job_id, caller_id))[0]
        self._must_watch()
        fut = self.waits.register(job_id, caller_id)
        try:
            await self._reader.awake()
            now, owner = await job_result(self.wire, job_id, caller_id)
        except BaseException:
            self.waits.forget(job_id, fut)
            raise
        self.waits.exists(job_id)
        if now["status"] in TERMINAL:
            self.waits.resolve(job_id, now, owner)
        return await self.waits.wait(job_id, fut, _wait_seconds(wait, default=MAX_WAIT))

    # Reads and changes of one job (``start`` too) take ``caller_id``: a user
    # key's call sees only that caller's job, checked in the read or the
    # Function itself (``reads``, hero.lua's ``callers``).

    @guarded_job
    async def status(self, job_id: str, caller_id: str | None = None) -> dict[str, Any]:
        return await reads.status(self.wire, job_id, caller_id)

    @guarded_job
    async def get(self, job_id: str, caller_id: str | None = None) -> dict[str, Any]:
        return await reads.job(self.wire, job_id, caller_id)

    @guarded
    async def list_jobs(
        self,
        status: str | None = None,
        script_type: str | None = None,
        caller_id: str | None = None,
        cursor: str | None = None,
        limit: int = 50,
    ) -> dict[str, Any]:
        if status is not None and status not in STATUSES:
            raise InvalidParams(f"status must be one of {', '.join(STATUSES)}")
        if not 1 <= limit <= 500:
            raise InvalidParams("limit must be between 1 and 500")
        return await listing.page(
            self.wire,
            status=status,
            script_type=script_type,
            caller_id=caller_id,
            cursor=cursor,
            limit=limit,
        )

    @guarded
    async def stop(self, job_id: str, caller_id: str | None = None) -> dict[str, Any]:
        reply = await self._call(functions.stop(job_id, caller_id))
        if reply.verdict is Verdict.NOT_FOUND:
            raise JobNotFound(job_id)
        if reply.verdict is Verdict.INVALID_STATE:
            raise InvalidState(
                f"Job {job_id} already ended ({reply.status})",
                {"job_id": job_id, "status": reply.status},
            )
        return {"job_id": job_id, "status": "stopped"}

    @guarded
    async def delete(self, job_id: str, caller_id: str | None = None) -> dict[str, Any]:
        """A waiter on this gateway is told at once that the job is gone (its
        end never comes); one on another gateway by its sweep (``waits``)."""
        deleted = await self._call(functions.delete(job_id, caller_id))
        if deleted:
            self.waits.fail(job_id, JobNotFound(job_id))
        return {"deleted": deleted}

    @guarded
    async def purge(self, status: str = "finished", older_than: float = 0.0) -> dict[str, Any]:
        """Delete ended jobs of one status that ended more than ``older_than`` s ago."""
        if status not in TERMINAL:
            raise InvalidParams(f"status must be one of {', '.join(sorted(TERMINAL))}")
        # Index scores are Redis's clock, not ours: with no age asked for, take
        # every ended job (a job that ended this very millisecond included).
        cutoff = str(int((time.time() - older_than) * 1000)) if older_than > 0 else "+inf"
        # An entry whose hash is gone already (expired, its prune to come)
        # stays: the next read starts past those, not at them again.
        deleted = passed = 0
        while ids := await self.wire.execute_command(
            "ZRANGEBYSCORE", keys.index_status(status), "-inf", cutoff, "LIMIT", passed, 500
        ):
            calls = [functions.delete(job_id) for job_id in ids]
            for done in await library.pipeline(self.wire, self.config, calls):
                if isinstance(done, Exception):
                    raise done
                deleted += done
                passed += not done
        return {"deleted": deleted}

    @guarded
    async def logs(self, job_id: str, caller_id: str | None = None) -> dict[str, Any]:
        return await reads.logs(self.wire, job_id, caller_id)

    # -- watching ----------------------------------------------------------------

    @guarded
    async def subscribe(
        self,
        *,
        job_ids: list[str] | None = None,
        script_type: str | None = None,
        caller_id: str | None = None,
        since: str | None = None,
    ) -> Subscription:
        self._must_watch()
        return await self.subscriptions.subscribe(
            job_ids=job_ids, script_type=script_type, caller_id=caller_id, since=since
        )

    def unsubscribe(self, subscription_id: str) -> bool:
        return self.subscriptions.unsubscribe(subscription_id)

    @guarded
    async def actors(self, script_type: str | None = None) -> list[dict[str, Any]]:
        return await presence.live(self.wire, script_type)

    @guarded
    async def queue_stats(self, script_type: str | None = None) -> list[dict[str, Any]]:
        return await stats.queue_stats(self.wire, script_type)

    async def reconcile(self, job_id: str) -> None:
        """Catch up with a status an actor we did not write put straight into the hash."""
        await self._call(functions.reconcile(job_id))

    @guarded
    async def dlq_list(
        self, script_type: str | None = None, limit: int = 50
    ) -> list[dict[str, Any]]:
        """Dead-lettered jobs, newest first, per type (all configured types when
        none given): the type's dead-letter list and, in stream mode, its stream."""
        types = [script_type] if script_type else list(self.config.script_types)
        return await dlq.entries(self.wire, types, limit)

    @guarded
    async def dlq_replay(self, script_type: str, job_ids: list[str] | None = None) -> list[str]:
        """Dispatch dead-lettered jobs again with fresh attempts; returns the ids replayed."""
        return await self._call(functions.dlq_replay(script_type, job_ids or []))

    @guarded
    async def status_counts(self) -> dict[str, int]:
        """How many jobs are in each status right now (from the status indexes)."""
        counts = await self.wire.pipeline([("ZCARD", keys.index_status(s)) for s in STATUSES])
        return dict(zip(STATUSES, (int(c) for c in counts), strict=True))

    @guarded
    async def transition_counts(self) -> dict[tuple[str, str], int]:
        """The deployment's job transitions per (status, script type), as emitted.
        A type the supervisor does not accept counts as ``other``: a job hash
        (anyone's to write) may name any text, which made /metrics fail for
        good, or one series per name."""
        counts: dict[tuple[str, str], int] = {}
        for field, n in pairs(await self.wire.execute_command("HGETALL", keys.TRANSITIONS)).items():
            status, _, named = field.partition(":")
            key = (status, named if named in self.config.script_types else "other")
            counts[key] = counts.get(key, 0) + int(n)
        return counts

    @guarded
    async def report(self) -> dict[str, Any] | None:
        raw = await self.wire.execute_command("GET", keys.STATS_REPORT)
        return json.loads(raw) if raw else None


def _wait_seconds(wait: float | None, default: float) -> float:
    if wait is None:
        return min(default, MAX_WAIT)
    if wait < 0 or wait > MAX_WAIT:
        raise InvalidParams(f"wait must be between 0 and {MAX_WAIT:g} seconds")
    return float(wait)
