"""The starts of one loop turn (a JSON-RPC batch of job.start) are one
``hero_start_jobs`` call, and the jobs one call hands to one idle actor
are one handoff message: against a real redis-server, and each job still
answered, written and evented as if it had been started alone."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from gateway.config import Config
from gateway.errors import InvalidState, JobNotFound
from gateway.supervisor import Supervisor, keys
from gateway.supervisor.worker import ActorLink
from tests.helpers import eventually, job


def _job_calls(commands: list[str]) -> list[str]:
    """The Function calls that create or start jobs (the maintenance leader's
    tick may fall in the window: its calls are not the starts')."""
    return [c for c in commands if c.startswith(("FCALL hero_start", "FCALL hero_submit"))]


async def _fcalls(rds: aioredis.Redis, monitor: Any) -> list[str]:
    """The commands MONITOR showed until now (a barrier ECHO ends them)."""
    await rds.echo("barrier")
    seen = []
    while (command := (await monitor.next_command())["command"]) != "ECHO barrier":
        seen.append(command)
    return seen


async def test_one_call_answers_each_start_alone_and_one_bad_job_fails_only_itself(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    for job_id in ("s1", "s2"):
        await sup.create(job(script_type="osis", job_id=job_id))
    await rds.set(keys.job("bad"), "not a hash")  # WRONGTYPE inside the call
    async with rds.monitor() as monitor:
        results = await asyncio.gather(
            *(sup.start(j) for j in ("s1", "bad", "missing", "s1", "s2")), return_exceptions=True
        )
        commands = await _fcalls(rds, monitor)
    s1, bad, missing, again, s2 = results
    queue = keys.work_queue("osis")
    assert s1 == {"job_id": "s1", "status": "dispatched", "queue": queue}
    assert s2 == {"job_id": "s2", "status": "dispatched", "queue": queue}
    assert isinstance(bad, ResponseError) and "WRONGTYPE" in str(bad)
    assert isinstance(missing, JobNotFound)
    assert isinstance(again, InvalidState) and again.data["status"] == "dispatched"
    [fcall] = _job_calls(commands)
    assert fcall.startswith("FCALL hero_start_jobs 0 ")
    assert await rds.lrange(queue, 0, -1) == ["s2", "s1"]  # as two LPUSHes would leave it
    assert [c for c in commands if c.startswith("LPUSH")] == [f"LPUSH {queue} s1 s2"]
    for job_id in ("s1", "s2"):
        kinds = [f["event"] for _, f in await rds.xrange(keys.EVENTS) if f["job_id"] == job_id]
        assert kinds == ["created", "dispatched"]
        assert await rds.zscore(keys.index_status("dispatched"), job_id) is not None
        assert await rds.zscore(keys.index_status("created"), job_id) is None


@pytest.mark.timeout(60)
async def test_the_jobs_one_call_hands_to_one_actor_are_one_message(
    sup: Supervisor, config: Config, rds: aioredis.Redis
) -> None:
    actor = ActorLink(config, "osis", "default", "idle")
    await actor.open()
    try:

        async def offered() -> bool:
            assert await actor.cycle([], 4, accept_handoff=True) == []
            offer = await rds.hget(keys.idle("osis"), actor.name)
            return offer is not None

        await eventually(offered)
        ids = ["h0", "h1", "h2"]
        for job_id in ids:
            await sup.create(job(f"run {job_id}", script_type="osis", job_id=job_id))
        async with rds.monitor() as monitor:
            answers = await asyncio.gather(*(sup.start(j) for j in ids))
            commands = await _fcalls(rds, monitor)
        assert [a["status"] for a in answers] == ["dispatched"] * 3
        assert await rds.llen(keys.work_queue("osis")) == 0  # all handed over
        channel = keys.handoff("osis", "default", "idle")
        assert len([c for c in commands if c.startswith(f"PUBLISH {channel}")]) == 1
        [fcall] = _job_calls(commands)
        assert fcall.startswith("FCALL hero_start_jobs 0 ")
        # the held list and the offer as three hand-offs one by one left them
        assert await rds.lrange(keys.held("osis", "default", "idle"), 0, -1) == ids[::-1]
        assert await _slots(rds, actor.name) == 1  # one slot left
        got = []

        async def all_arrived() -> bool:
            got.extend(actor.handed())
            return len(got) == 3

        await eventually(all_arrived)
        assert [(j.job_id, j.script, j.attempt) for j in got] == [(j, f"run {j}", 1) for j in ids]
        for job_id in ids:
            got_job = await sup.get(job_id)
            assert (got_job["status"], got_job["actor"]) == ("started", actor.name)
            kinds = [f["event"] for _, f in await rds.xrange(keys.EVENTS) if f["job_id"] == job_id]
            assert kinds == ["created", "dispatched", "started"]
        # a fourth start takes the last slot: the offer is gone
        await sup.create(job(script_type="osis", job_id="h3"))
        await sup.start("h3")
        assert await rds.hlen(keys.idle("osis")) == 0
    finally:
        await actor.close()


@pytest.mark.timeout(60)
async def test_the_jobs_of_one_call_go_round_the_idle_actors_one_message_each(
    sup: Supervisor, config: Config, rds: aioredis.Redis
) -> None:
    """Handed in turn, as the random pick per job spread them before; each
    actor gets its share as one message and its offer counted down by it."""
    links = [ActorLink(config, "osis", "default", name) for name in ("a", "b")]
    for actor in links:
        await actor.open()
    try:
        for actor in links:

            async def offered(actor: ActorLink = actor) -> bool:
                assert await actor.cycle([], 4, accept_handoff=True) == []
                return await rds.hget(keys.idle("osis"), actor.name) is not None

            await eventually(offered)
        ids = [f"r{n}" for n in range(6)]
        for job_id in ids:
            await sup.create(job(script_type="osis", job_id=job_id))
        async with rds.monitor() as monitor:
            await asyncio.gather(*(sup.start(j) for j in ids))
            commands = await _fcalls(rds, monitor)
        assert len([c for c in commands if c.startswith("PUBLISH hero:")]) == 2
        shares = []
        for actor in links:
            held = await rds.lrange(keys.held("osis", "default", actor.name.split(":")[1]), 0, -1)
            assert len(held) == 3 and await _slots(rds, actor.name) == 1
            got: list[str] = []

            async def arrived(actor: ActorLink = actor, got: list[str] = got) -> bool:
                got.extend(j.job_id for j in actor.handed())
                return len(got) == 3

            await eventually(arrived)
            assert got == held[::-1]
            shares.append(set(got))
        assert shares[0] | shares[1] == set(ids)
    finally:
        for actor in links:
            await actor.close()


async def _slots(rds: aioredis.Redis, actor: str) -> int:
    offer = await rds.hget(keys.idle("osis"), actor)
    return int(json.loads(offer)[0]) if offer else 0
