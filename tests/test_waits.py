"""Waiting for results from all three kinds of actor, with shared readers only.

The hash-only and reply-queue actors here are deliberately written the way a
foreign Hero actor would be: they use nothing from gateway except the key
builders, and never touch the events stream.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.actor import Actor, JobContext
from gateway.config import Config
from gateway.errors import JobNotFound, WaitTimeout
from gateway.model import Event
from gateway.supervisor import Supervisor, keys
from gateway.supervisor.waits import WaitHub
from gateway.supervisor.wire import Wire
from tests.helpers import eventually, job


async def foreign_actor(url: str, script_type: str, *, reply: bool, hash_status: bool) -> None:
    """Pop one job like a plain Hero actor: BRPOP, run, report the Hero way."""
    client = aioredis.Redis.from_url(url, decode_responses=True)
    try:
        _, job_id = await client.brpop([keys.work_queue(script_type)], timeout=10)
        script = await client.hget(keys.job(job_id), "script")
        await client.hset(keys.job(job_id), mapping={"status": "started"})
        output = script.upper()
        if hash_status:
            await client.hset(keys.job(job_id), mapping={"status": "finished", "output": output})
        if reply:
            await client.lpush(keys.reply(job_id), output)
    finally:
        await client.aclose()


@pytest.mark.parametrize(
    ("reply", "hash_status"),
    [(False, True), (True, True), (True, False)],
    ids=["hash-only", "reply-queue-and-hash", "reply-queue-only"],
)
async def test_run_waits_for_foreign_actors(
    sup: Supervisor, redis_url: str, reply: bool, hash_status: bool
) -> None:
    worker = asyncio.create_task(
        foreign_actor(redis_url, "osis", reply=reply, hash_status=hash_status)
    )
    result = await sup.run(job("hello", script_type="osis"), wait=10)
    await worker
    assert result["status"] == "finished"
    assert result["output"] == "HELLO"


async def test_run_waits_for_our_actor_through_events(sup: Supervisor, actors: Any) -> None:
    actors()
    result = await sup.run(job("print('from python')"), wait=20)
    assert result == {
        "job_id": result["job_id"],
        "status": "finished",
        "output": "from python\n",
        "error": None,
    }


async def test_failed_job_is_a_result_not_an_exception(sup: Supervisor, actors: Any) -> None:
    actors()
    result = await sup.run(job("import sys; print('bad', file=sys.stderr); sys.exit(2)"), wait=20)
    assert result["status"] == "error" and result["error"] == "bad"


async def test_output_of_a_finished_job_returns_at_once(sup: Supervisor, actors: Any) -> None:
    actors()
    first = await sup.run(job(job_id="done"), wait=20)
    assert await sup.output("done", wait=30) == first
    assert await sup.output("done") == first


async def test_output_without_wait_reports_the_current_state(sup: Supervisor) -> None:
    await sup.create(job(job_id="idle"))
    assert await sup.output("idle") == {
        "job_id": "idle",
        "status": "created",
        "output": None,
        "error": None,
    }
    with pytest.raises(JobNotFound):
        await sup.output("nobody", wait=1)


async def test_wait_timeout_names_the_job_and_leaves_it_running(sup: Supervisor) -> None:
    await sup.create(job(job_id="slow", script_type="osis"))
    await sup.start("slow")
    with pytest.raises(WaitTimeout) as err:
        await sup.output("slow", wait=0.2)
    assert err.value.data == {"job_id": "slow"}
    assert (await sup.status("slow"))["status"] == "dispatched"
    assert sup.waits.waiting == 0


async def test_many_waiters_on_one_job_all_get_the_result(sup: Supervisor, actors: Any) -> None:
    await sup.create(job("print(7)", job_id="shared"))
    waiters = [asyncio.create_task(sup.output("shared", wait=20)) for _ in range(50)]
    await eventually(lambda: asyncio.sleep(0, sup.waits.waiting == 1))  # their one wait is set
    actors()
    await sup.start("shared")
    results = await asyncio.gather(*waiters)
    assert {r["output"] for r in results} == {"7\n"}


OUR_CONNECTIONS = ("hero-gateway/supervisor-jobs", "hero-gateway/events")


async def test_thousand_concurrent_runs_use_a_handful_of_connections(
    config: Config, rds: aioredis.Redis
) -> None:
    before = {c["id"] for c in await rds.client_list()}  # earlier tests' closing sockets
    sup = await Supervisor.connect(config)
    actor = Actor(config, concurrency=100)

    @actor.handler("osis")
    def echo(ctx: JobContext) -> str:
        return ctx.job.script

    serving = asyncio.create_task(actor.serve())
    peak = 0
    names: list[str] = []
    done = asyncio.Event()

    async def watch_connections() -> None:
        nonlocal peak
        while not done.is_set():
            clients = await rds.client_list()
            ours = [c for c in clients if c["id"] not in before and c["name"] in OUR_CONNECTIONS]
            if len(ours) > peak:
                peak, names[:] = len(ours), [f"{c['name']} {c['id']} {c['age']}s" for c in ours]
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch_connections())
    try:
        results = await asyncio.gather(
            *(sup.run(job(f"n{n}", script_type="osis"), wait=60) for n in range(1000))
        )
    finally:
        done.set()
        await watcher
        actor.stop()
        await serving
        await sup.close()
    assert sorted(r["output"] for r in results) == sorted(f"n{n}" for n in range(1000))
    assert {r["status"] for r in results} == {"finished"}
    # the process's one wire and the events reader, whatever the number of callers
    assert peak == 2, names


# -- results carried by the terminal event ------------------------------------------


@contextlib.asynccontextmanager
async def _hub(redis_url: str, watch_interval: float = 30) -> AsyncIterator[WaitHub]:
    async def reconcile(job_id: str) -> None:
        return None

    wire = Wire(redis_url, "test-waits")
    hub = WaitHub(wire, watch_interval=watch_interval, compat=False, reconcile=reconcile)
    hub.start()
    try:
        yield hub
    finally:
        await hub.stop()
        await wire.aclose()


def _terminal(job_id: str, **fields: str) -> Event:
    return Event.from_entry(
        "1-1", {"job_id": job_id, "event": "finished", "status": "finished", **fields}
    )


@pytest.mark.parametrize("caller", [None, "alice"])
async def test_a_terminal_event_with_the_output_resolves_a_created_job_at_once(
    rds: aioredis.Redis, redis_url: str, caller: str | None
) -> None:
    """No hash read: the hash here says something else, and the event wins
    (for a user's wait too: the event names the job's caller)."""
    await rds.hset(keys.job("ev-1"), mapping={"status": "started", "output": ""})
    async with _hub(redis_url) as hub:
        fut = hub.register("ev-1", caller)
        hub.created("ev-1")
        hub.on_events([_terminal("ev-1", output="42", error="", caller_id=caller or "")])
        assert fut.done()
        assert await hub.wait("ev-1", fut, 1) == {
            "job_id": "ev-1",
            "status": "finished",
            "output": "42",
            "error": None,
        }


async def test_an_event_output_is_not_trusted_for_a_job_the_waiter_did_not_create(
    rds: aioredis.Redis, redis_url: str
) -> None:
    """A late terminal event of an earlier round (a replayed dead letter) must
    not end a wait: without ``created`` the hash decides, as for every event."""
    await rds.hset(keys.job("ev-2"), mapping={"status": "dispatched"})
    async with _hub(redis_url) as hub:
        fut = hub.register("ev-2")
        hub.on_events([_terminal("ev-2", status="dlq", output="old", error="gave up")])
        # barrier: a later end, resolved from its hash, proves ev-2's hash was read too
        await rds.hset(keys.job("ev-3"), mapping={"status": "finished", "output": "3"})
        later = hub.register("ev-3")
        hub.on_events([_terminal("ev-3")])
        assert (await hub.wait("ev-3", later, 5))["output"] == "3"
        assert not fut.done()
        await rds.hset(keys.job("ev-2"), mapping={"status": "finished", "output": "new"})
        hub.on_events([_terminal("ev-2")])  # an event without the output: the hash is read
        assert (await hub.wait("ev-2", fut, 5))["output"] == "new"


async def test_one_waiter_timing_out_leaves_the_others_waiting(redis_url: str) -> None:
    async with _hub(redis_url) as hub:
        short, long = hub.register("ev-3"), hub.register("ev-3")
        with pytest.raises(WaitTimeout):
            await hub.wait("ev-3", short, 0.05)
        assert hub.waiting == 1
        hub.created("ev-3")
        hub.on_events([_terminal("ev-3", output="done", error="")])
        assert (await hub.wait("ev-3", long, 1))["output"] == "done"
        assert hub.waiting == 0


# -- an id deleted and taken by another caller while waited on --------------------------


async def test_the_end_of_another_callers_job_tells_a_waiter_its_job_is_gone(
    rds: aioredis.Redis, redis_url: str
) -> None:
    """alice waited on her job; the id is bob's now, and bob's run waits too.
    bob's end (from the event, which names bob) is bob's and an admin's;
    alice learns her job is not found, from the hash, which names bob too."""
    await rds.hset(keys.job("reused"), mapping={"status": "finished", "output": "bob's",
                                                "caller_id": "bob"})  # fmt: skip
    async with _hub(redis_url) as hub:
        alice, admin, bob = (hub.register("reused", c) for c in ("alice", None, "bob"))
        hub.created("reused")  # bob's run
        hub.on_events([_terminal("reused", output="bob's", error="", caller_id="bob")])
        with pytest.raises(JobNotFound):
            await hub.wait("reused", alice, 5)
        assert (await hub.wait("reused", admin, 1))["output"] == "bob's"
        assert (await hub.wait("reused", bob, 1))["output"] == "bob's"


async def test_the_sweep_gives_a_waiter_no_other_callers_end(
    rds: aioredis.Redis, redis_url: str
) -> None:
    """A hash-only actor ended the job now under the id (no event): the
    sweep finds it bob's, and alice's wait ends as for a missing job."""
    async with _hub(redis_url, watch_interval=0.05) as hub:
        alice, bob = hub.register("swept", "alice"), hub.register("swept", "bob")
        await rds.hset(keys.job("swept"), mapping={"status": "finished", "output": "bob's",
                                                   "caller_id": "bob"})  # fmt: skip
        assert (await hub.wait("swept", bob, 5))["output"] == "bob's"
        with pytest.raises(JobNotFound):
            await hub.wait("swept", alice, 1)


async def test_output_of_an_id_another_caller_holds_is_not_found(sup: Supervisor) -> None:
    """Ownership is checked by the read itself (the RPC layer looks no job up
    first): another caller's job answers as missing, waiting or not."""
    await sup.create(job(job_id="taken", caller_id="bob"))
    assert (await sup.output("taken", caller_id="bob"))["status"] == "created"
    for wait in (None, 5.0):
        with pytest.raises(JobNotFound):
            await sup.output("taken", wait, caller_id="alice")
    assert sup.waits.waiting == 0


# -- a job deleted while waited on ------------------------------------------------------


async def _started(rds: aioredis.Redis, job_id: str) -> bool:
    return bool(await rds.hget(keys.job(job_id), "status") == "started")


@pytest.mark.parametrize("where", ["this gateway", "another gateway"])
async def test_a_running_job_deleted_while_waited_on_is_not_found_at_once(
    sup: Supervisor, config: Config, rds: aioredis.Redis, actors: Any, where: str
) -> None:
    """Its end never comes (the actor is told to stop, and what it reports
    for a job whose hash is gone is dropped), so the waiter is told the job
    is gone, as a read of it now would say, not kept until its wait times out.
    From another gateway too, whose waiter this one's delete cannot reach."""
    actors()
    other = await Supervisor.connect(config) if where == "another gateway" else sup
    try:
        await sup.create(job("import time; time.sleep(60)", job_id="doomed"))
        await sup.start("doomed")
        await eventually(lambda: _started(rds, "doomed"), within=20)
        waiting = asyncio.create_task(other.output("doomed", wait=30))
        await asyncio.sleep(0.3)  # the waiter is registered and has read the job
        assert await sup.delete("doomed") == {"deleted": 1}
        async with asyncio.timeout(5):  # the sweep's longest back-off is 2 s
            with pytest.raises(JobNotFound):
                await waiting
        assert other.waits.waiting == 0
    finally:
        if other is not sup:
            await other.close()


async def test_a_created_job_deleted_while_waited_on_is_not_found(sup: Supervisor) -> None:
    """No actor: the sweep looks at the job, and finds it gone."""
    await sup.create(job("never runs", job_id="unrun", script_type="osis"))
    waiting = asyncio.create_task(sup.output("unrun", wait=30))
    await asyncio.sleep(0.3)
    await sup.delete("unrun")
    async with asyncio.timeout(5):
        with pytest.raises(JobNotFound):
            await waiting
