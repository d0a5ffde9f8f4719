"""The maintenance pass against a real Redis: jobs created and never started
(HERO_CREATED_TTL), what it stops, what it leaves and what it tells; and the
index entries of ended jobs whose hashes expired (HERO_JOB_TTL), which it
prunes.

Each test ticks a supervisor of its own by hand (``maintenance=False``: no
loop of its own races the tick it checks), with a TTL of one second that the
test really waits out.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.config import Config
from gateway.embedded_redis import EmbeddedRedis
from gateway.errors import InvalidState
from gateway.model import library as functions
from gateway.supervisor import Supervisor, keys, library
from gateway.supervisor.worker import ActorLink
from tests.helpers import job

#: The created TTL of these tests, and a wait that outlasts it.
TTL = 1
PAST_TTL = TTL + 0.2
REASON = f"not started within {TTL} s of its creation"


@pytest.fixture
async def brief(config: Config) -> AsyncIterator[Supervisor]:
    sup = await Supervisor.connect(replace(config, created_ttl=TTL), maintenance=False)
    yield sup
    await sup.close()


def spec(job_id: str, **fields: Any) -> dict[str, Any]:
    return job(job_id=job_id, **fields)


async def stopped_events(rds: aioredis.Redis, job_id: str) -> list[dict[str, str]]:
    entries = await rds.xrange(keys.EVENTS)
    return [f for _, f in entries if f["job_id"] == job_id and f["status"] == "stopped"]


async def test_a_job_never_started_is_stopped_after_the_ttl(
    brief: Supervisor, rds: aioredis.Redis, config: Config
) -> None:
    await brief.create(spec("idle"))
    await brief.create(spec("queued"))
    await brief.start("queued")  # no actor: it waits in its queue, which is not "created"
    await asyncio.sleep(PAST_TTL)
    await brief.create(spec("fresh"))

    assert (await brief.maintenance.tick())["abandoned"] == 1

    status, error = await rds.hmget(keys.job("idle"), "status", "error")
    assert (status, error) == ("stopped", REASON)
    assert 0 < await rds.ttl(keys.job("idle")) <= config.job_ttl  # kept HERO_JOB_TTL, then gone
    assert [e["error"] for e in await stopped_events(rds, "idle")] == [REASON]
    assert await rds.zscore(keys.index_status("created"), "idle") is None
    assert await rds.zscore(keys.index_status("stopped"), "idle") is not None
    assert (await brief.status("queued"))["status"] == "dispatched"
    assert (await brief.status("fresh"))["status"] == "created"
    with pytest.raises(InvalidState):  # too late: it ended
        await brief.start("idle")
    assert (await brief.maintenance.tick())["abandoned"] == 0  # stopped once


async def test_its_dependents_fail_with_it(brief: Supervisor, rds: aioredis.Redis) -> None:
    await brief.create(spec("parent"))
    await brief.create(spec("child", prerequisites=["parent"]))
    await brief.start("child")  # waits on a parent nobody starts
    await asyncio.sleep(PAST_TTL)

    assert (await brief.maintenance.tick())["abandoned"] == 1

    assert (await brief.status("parent"))["status"] == "stopped"
    status, error = await rds.hmget(keys.job("child"), "status", "error")
    assert (status, error) == ("error", "prerequisite parent ended stopped")


async def test_zero_keeps_created_jobs(config: Config) -> None:
    sup = await Supervisor.connect(replace(config, created_ttl=0), maintenance=False)
    try:
        await sup.create(spec("kept"))
        await asyncio.sleep(PAST_TTL)
        assert (await sup.maintenance.tick())["abandoned"] == 0
        assert (await sup.status("kept"))["status"] == "created"
    finally:
        await sup.close()


async def test_what_is_not_ours_or_not_created_is_left(
    brief: Supervisor, rds: aioredis.Redis, config: Config
) -> None:
    """An outside producer's hash in status created (in no index of ours) stays
    as it is. An index entry its hash no longer bears out is settled, not
    stopped: a status written into the hash since is recorded (its index, and
    an end's TTL, so it is not left in no index and kept for good); a hash
    gone, or a key of another type, leaves the listings."""
    await rds.hset(keys.job("outside"), mapping={"status": "created", "script": "x"})
    created = keys.index_status("created")
    await rds.hset(keys.job("rewritten"), mapping={"status": "finished", "script": "x"})
    await rds.set(keys.job("other-type"), "not a hash")
    await rds.zadd(created, {"rewritten": 1, "gone": 2, "other-type": 3})
    await rds.zadd(keys.INDEX_ALL, {"rewritten": 1, "gone": 2, "other-type": 3})
    await brief.create(spec("mine"))
    await asyncio.sleep(PAST_TTL)

    assert (await brief.maintenance.tick())["abandoned"] == 1

    assert await rds.hget(keys.job("outside"), "status") == "created"
    assert await rds.hget(keys.job("rewritten"), "status") == "finished"
    assert await rds.zscore(keys.index_status("finished"), "rewritten") is not None
    assert 0 < await rds.ttl(keys.job("rewritten")) <= config.job_ttl
    assert await rds.get(keys.job("other-type")) == "not a hash"
    assert await rds.zrange(created, 0, -1) == []
    assert sorted(await rds.zrange(keys.INDEX_ALL, 0, -1)) == ["mine", "rewritten"]
    assert (await brief.status("mine"))["status"] == "stopped"


async def test_a_backlog_goes_over_several_calls(brief: Supervisor, config: Config) -> None:
    """A call stops at most its limit, oldest first; the next call goes on."""
    for name in ("first", "second", "third"):
        await brief.create(spec(name))
    await asyncio.sleep(PAST_TTL)
    abandon = functions.abandon(TTL * 1000, 2)
    assert await library.call(brief.wire, config, abandon) == 2
    assert (await brief.status("third"))["status"] == "created"
    assert await library.call(brief.wire, config, abandon) == 1
    assert (await brief.status("third"))["status"] == "stopped"


async def test_a_waiter_on_it_is_told(brief: Supervisor) -> None:
    """Someone waiting for the output of a job nobody starts gets its end."""
    await brief.create(spec("awaited"))
    waiter = asyncio.create_task(brief.output("awaited", wait=20))
    await asyncio.sleep(PAST_TTL)
    await brief.maintenance.tick()
    result = await asyncio.wait_for(waiter, 10)
    assert (result["status"], result["error"]) == ("stopped", REASON)


# -- ended jobs' index entries (HERO_JOB_TTL) -----------------------------------


@pytest.fixture
async def private(config: Config, tmp_path: Path) -> AsyncIterator[tuple[Config, aioredis.Redis]]:
    """A redis-server of the test's own, ended jobs kept TTL seconds: the
    session's shared gateway leads maintenance on the session's Redis
    whenever its tick comes first, and would prune in the test's place."""
    server = EmbeddedRedis(tmp_path / "prune", appendonly=False).start()
    client = aioredis.Redis.from_url(server.url, decode_responses=True)
    try:
        yield replace(config, redis_url=server.url, job_ttl=TTL), client
    finally:
        await client.aclose()
        server.stop()


@pytest.fixture
async def kept_briefly(private: tuple[Config, aioredis.Redis]) -> AsyncIterator[Supervisor]:
    sup = await Supervisor.connect(private[0], maintenance=False)
    yield sup
    await sup.close()


async def indexed(rds: aioredis.Redis, job_id: str, caller: str) -> list[str]:
    """The indexes that still list ``job_id`` (of type osis, ended finished)."""
    found = []
    for key in (keys.INDEX_ALL, keys.index_status("finished"), keys.index_type("osis"),
                keys.index_caller(caller)):  # fmt: skip
        if await rds.zscore(key, job_id) is not None:
            found.append(key)
    return found


async def finished_in_one_cycle(sup: Supervisor, config: Config, ids: list[str]) -> list[str]:
    """``ids`` created and started (type osis, caller alice), claimed by an
    actor and reported finished in one cycle; their ids in the order it did."""
    for job_id in ids:
        await sup.create(spec(job_id, script_type="osis", caller_id="alice"))
        await sup.start(job_id)
    actor = ActorLink(config, "osis", "default", "pruned")
    await actor.open()
    try:
        claimed = await actor.cycle([], len(ids))
        assert sorted(c.job_id for c in claimed) == sorted(ids)
        await actor.cycle([c.ended("finished", "done") for c in claimed], 0)
    finally:
        await actor.close()
    return [c.job_id for c in claimed]


async def test_the_jobs_one_call_ends_share_a_tombstone_and_all_leave_the_indexes(
    kept_briefly: Supervisor, private: tuple[Config, aioredis.Redis]
) -> None:
    """An actor's cycle that reports three jobs finished writes one tombstone
    naming the three; once their hashes expired, one tick takes every one of
    them out of every index, and their replies with them."""
    config, rds = private
    ids = ["t1", "t2", "t3"]
    ended = await finished_in_one_cycle(kept_briefly, config, ids)
    (tombstone,) = await rds.zrange(keys.EXPIRING, 0, -1)
    assert json.loads(tombstone) == {
        "ids": ended, "id": ended[0], "status": "finished", "script_type": "osis",
        "caller_id": "alice",
    }  # fmt: skip
    for job_id in ids:
        assert len(await indexed(rds, job_id, "alice")) == 4
    assert (await kept_briefly.maintenance.tick())["pruned"] == 0  # not due yet
    await asyncio.sleep(PAST_TTL)
    assert not await rds.exists(*(keys.job(j) for j in ids))
    await rds.lpush(keys.reply("t2"), "late")  # an outside actor's reply after the end

    assert (await kept_briefly.maintenance.tick())["pruned"] == 3

    for job_id in ids:
        assert await indexed(rds, job_id, "alice") == []
    assert not await rds.exists(keys.reply("t2"))
    assert await rds.zcard(keys.EXPIRING) == 0


async def test_hashes_that_outlive_their_tombstone_are_pruned_when_they_go(
    kept_briefly: Supervisor, private: tuple[Config, aioredis.Redis]
) -> None:
    """A tombstone falls due at its call's time plus the TTL, the hashes'
    EXPIREs count from a moment later: a prune in between finds the hashes
    still there. Their ids go into a tombstone due when the hashes go, not
    out of mind with their index entries kept for good."""
    config, rds = private
    ids = ["o1", "o2"]
    await finished_in_one_cycle(kept_briefly, config, ids)
    (tombstone,) = await rds.zrange(keys.EXPIRING, 0, -1)
    seconds, micros = await rds.time()
    now_ms = seconds * 1000 + micros // 1000
    await rds.zadd(keys.EXPIRING, {tombstone: now_ms - 1})  # due, the hashes kept ~TTL more

    assert (await kept_briefly.maintenance.tick())["pruned"] == 2  # looked at, both kept

    for job_id in ids:
        assert len(await indexed(rds, job_id, "alice")) == 4
    ((later, due),) = await rds.zrange(keys.EXPIRING, 0, -1, withscores=True)
    assert sorted(json.loads(later)["ids"]) == ids and due > now_ms
    await asyncio.sleep(PAST_TTL)
    assert (await kept_briefly.maintenance.tick())["pruned"] == 2
    for job_id in ids:
        assert await indexed(rds, job_id, "alice") == []
    assert await rds.zcard(keys.EXPIRING) == 0


async def test_a_tombstone_of_one_job_as_written_before_is_pruned_too(
    kept_briefly: Supervisor, private: tuple[Config, aioredis.Redis]
) -> None:
    """After an upgrade, the tombstones written one per job are still due."""
    rds = private[1]
    for key in (keys.INDEX_ALL, keys.index_status("finished"), keys.index_type("osis")):
        await rds.zadd(key, {"older": 1})
    old = {"id": "older", "status": "finished", "script_type": "osis", "caller_id": ""}
    await rds.zadd(keys.EXPIRING, {json.dumps(old): 1})

    assert (await kept_briefly.maintenance.tick())["pruned"] == 1

    assert await indexed(rds, "older", "") == []
    assert await rds.zcard(keys.EXPIRING) == 0


async def test_a_prune_takes_whole_tombstones_until_its_limit(
    kept_briefly: Supervisor, private: tuple[Config, aioredis.Redis]
) -> None:
    """The limit counts jobs; a tombstone is never split, and what is left
    waits for the next call."""
    config, rds = private
    for n, ids in enumerate((["a1", "a2", "a3"], ["b1"])):
        tombstone = {"ids": ids, "status": "finished", "script_type": "osis", "caller_id": ""}
        await rds.zadd(keys.EXPIRING, {json.dumps(tombstone): n + 1})
    prune = functions.prune(2)
    assert await library.call(kept_briefly.wire, config, prune) == 3
    assert await rds.zcard(keys.EXPIRING) == 1
    assert await library.call(kept_briefly.wire, config, prune) == 1
    assert await rds.zcard(keys.EXPIRING) == 0


async def test_a_tombstone_names_at_most_a_hundred_jobs(
    kept_briefly: Supervisor, private: tuple[Config, aioredis.Redis]
) -> None:
    """A call that ends many jobs (a stop failing 250 waiting dependents)
    writes tombstones of at most 100 jobs each, so one prune call stays near
    its limit; each names its first job under ``id`` too, as a one-job
    tombstone did, for a library that reads only that."""
    rds = private[1]
    await kept_briefly.create(spec("parent", script_type="osis"))
    await asyncio.gather(*(kept_briefly.create(spec(f"d{i:03d}", script_type="osis",
                                                   prerequisites=["parent"]))
                           for i in range(250)))  # fmt: skip
    await asyncio.gather(*(kept_briefly.start(f"d{i:03d}") for i in range(250)))
    await kept_briefly.stop("parent")
    tombstones = [json.loads(t) for t in await rds.zrange(keys.EXPIRING, 0, -1)]
    failed = [t for t in tombstones if t["status"] == "error"]
    assert sorted(len(t["ids"]) for t in failed) == [50, 100, 100]
    assert sorted(i for t in failed for i in t["ids"]) == [f"d{i:03d}" for i in range(250)]
    assert all(t["id"] == t["ids"][0] for t in tombstones)
