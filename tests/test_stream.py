"""Stream mode: a type queue that is a Redis Stream with a consumer group.
Real redis-server, real actors (in-process and SIGKILLed subprocesses)."""

from __future__ import annotations

import asyncio
import os
import re
import socket
import subprocess
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.actor import Actor, JobContext, JobFailed
from gateway.config import Config
from gateway.errors import InvalidJob
from gateway.supervisor import Supervisor, keys
from gateway.supervisor.worker import ActorLink
from tests.conftest import fast_settings
from tests.helpers import events_of, eventually, job
from tests.test_reliability import sigkill_storm

STREAM = keys.work_stream("osis")


@pytest.fixture
def fast(config: Config) -> Config:
    """The fast settings (conftest's ``fsup`` uses them), in stream mode."""
    return replace(fast_settings(config), stream_types=("osis",), stream_claim_idle=0.3)


def echo_actor(config: Config, **kwargs: Any) -> Actor:
    actor = Actor(config, **kwargs)

    @actor.handler("osis")
    def echo(ctx: JobContext) -> str:
        return ctx.job.script

    return actor


def osis(script: str = "s", **fields: Any) -> dict[str, Any]:
    return job(script, script_type="osis", **fields)


async def test_a_stream_job_is_an_entry_until_its_result_is_recorded(
    fsup: Supervisor, fast: Config, actors: Any, rds: aioredis.Redis
) -> None:
    started = await fsup.start((await fsup.create(osis("hi", job_id="s1")))["job_id"])
    assert started["queue"] == STREAM
    assert await rds.type(STREAM) == "stream"
    [(entry, fields)] = await rds.xrange(STREAM)
    assert fields == {"job_id": "s1"}
    assert [g["name"] for g in await rds.xinfo_groups(STREAM)] == [keys.STREAM_GROUP]

    gate = asyncio.Event()
    actor = Actor(fast, concurrency=1)

    @actor.handler("osis")
    async def held(ctx: JobContext) -> str:
        await gate.wait()
        return ctx.job.script

    actors(actor)
    await eventually(lambda: _status_is(fsup, "s1", "started"))
    [pending] = await rds.xpending_range(STREAM, keys.STREAM_GROUP, "-", "+", 10)
    assert pending["message_id"] == entry
    assert re.fullmatch(rf"{re.escape(socket.gethostname())}:{os.getpid()}:0", pending["consumer"])
    gate.set()
    assert (await fsup.output("s1", wait=10))["output"] == "hi"
    assert await rds.xlen(STREAM) == 0  # acked and deleted
    assert (await rds.xpending(STREAM, keys.STREAM_GROUP))["pending"] == 0
    kinds = [e["event"] for e in await events_of(rds, "s1")]
    assert kinds == ["created", "dispatched", "started", "finished"]


async def test_a_stream_type_refuses_routing_and_priority(fsup: Supervisor) -> None:
    with pytest.raises(InvalidJob) as info:
        await fsup.create(osis(group="g", instance="i", priority=0))
    assert sorted(p["field"] for p in info.value.data) == ["group", "instance", "priority"]
    assert "stream mode" in str(info.value)
    created = await fsup.create(job(group="g"))  # other types keep their lists
    assert created["status"] == "created"


async def test_queue_stats_give_lag_and_pending_of_a_stream(
    fsup: Supervisor, fast: Config, actors: Any
) -> None:
    for n in range(3):
        await fsup.start((await fsup.create(osis(job_id=f"q{n}")))["job_id"])
    await asyncio.sleep(0.05)  # the oldest entry's age is under test: let it age
    [row] = await fsup.queue_stats("osis")
    assert (row["queue"], row["mode"]) == (STREAM, "stream")
    assert (row["lag"], row["pending"], row["depth"], row["consumers"]) == (3, 0, 3, 0)
    assert row["oldest_age"] is not None and row["oldest_age"] >= 0.04

    gate = asyncio.Event()
    actor = Actor(fast, concurrency=1)

    @actor.handler("osis")
    async def held(ctx: JobContext) -> str:
        await gate.wait()
        return ""

    actors(actor)
    await eventually(lambda: _status_is(fsup, "q0", "started"))
    [row] = await fsup.queue_stats("osis")
    assert (row["lag"], row["pending"], row["depth"], row["consumers"]) == (2, 1, 3, 1)
    gate.set()
    for n in range(3):
        await fsup.output(f"q{n}", wait=10)
    [row] = await fsup.queue_stats("osis")
    assert (row["lag"], row["pending"], row["depth"], row["oldest_age"]) == (0, 0, 0, None)


async def test_a_silent_consumers_job_is_redelivered_and_the_duplicate_shows(
    fsup: Supervisor, fast: Config, actors: Any, rds: aioredis.Redis
) -> None:
    await fsup.start((await fsup.create(osis("again", job_id="r1", retries=2)))["job_id"])
    ghost = ActorLink(fast, "osis", "g", "ghost", index=7)  # claims, then falls silent
    [claimed] = await ghost.cycle([], 1)
    assert claimed.job_id == "r1"
    actors(echo_actor(fast, instance="live"))
    result = await fsup.output("r1", wait=10)
    assert (result["status"], result["output"]) == ("finished", "again")
    runs = [(e["event"], e["actor"], e["attempt"]) for e in await events_of(rds, "r1")]
    assert runs[2:] == [
        ("started", "g:ghost", "1"),
        ("redelivered", "default:live", "2"),
        ("finished", "default:live", "2"),
    ]
    assert await rds.xlen(STREAM) == 0
    await ghost.close()


async def test_redelivery_past_the_last_attempt_goes_to_the_dead_letter_stream(
    fsup: Supervisor, fast: Config, actors: Any, rds: aioredis.Redis
) -> None:
    await fsup.start((await fsup.create(osis("x", job_id="p1", retries=1)))["job_id"])
    first = ActorLink(fast, "osis", "g", "one", index=1)
    second = ActorLink(fast, "osis", "g", "two", index=2)
    assert [c.job_id for c in await first.cycle([], 1)] == ["p1"]
    await asyncio.sleep(0.35)  # past stream_claim_idle (0.3): only then is it claimable
    second.reclaim_soon()
    assert [c.attempt for c in await second.cycle([], 1)] == [2]
    await asyncio.sleep(0.35)  # idle again, past stream_claim_idle
    first.reclaim_soon()
    assert await first.cycle([], 1) == []  # attempts used up: dead-lettered instead
    result = await fsup.output("p1")
    assert result["status"] == "dlq" and "g:two stopped answering" in result["error"]
    assert await rds.xlen(STREAM) == 0
    [(entry, fields)] = await rds.xrange(keys.dlq_stream("osis"))
    assert fields["job_id"] == "p1" and fields["attempt"] == "2"
    assert fields["reason"] == "attempts exhausted (last: error)"
    assert "stopped answering" in fields["last_error"] and int(fields["dlq_ts"]) > 0
    [listed] = await fsup.dlq_list("osis")
    assert listed["id"] == entry and listed["error"] == fields["last_error"]

    actors(echo_actor(fast))
    assert await fsup.dlq_replay("osis") == ["p1"]
    assert await rds.xlen(keys.dlq_stream("osis")) == 0
    assert (await fsup.output("p1", wait=10))["output"] == "x"
    for link in (first, second):
        await link.close()


async def test_failed_attempts_of_a_stream_job_retry_then_dead_letter(
    fsup: Supervisor, fast: Config, actors: Any, rds: aioredis.Redis
) -> None:
    actor = Actor(fast, concurrency=2)

    @actor.handler("osis")
    def fail(ctx: JobContext) -> str:
        raise JobFailed(f"failure {ctx.job.attempt}")

    actors(actor)
    result = await fsup.run(osis(job_id="f1", retries=2), wait=20)
    assert (result["status"], result["error"]) == ("dlq", "failure 3")
    [entry] = await fsup.dlq_list("osis")
    assert (entry["job_id"], entry["error"], entry["attempt"]) == ("f1", "failure 3", 3)
    assert await rds.xlen(STREAM) == 0  # every attempt's entry was acked


async def test_a_stopped_stream_job_is_dropped_when_read(
    fsup: Supervisor, fast: Config, actors: Any, rds: aioredis.Redis
) -> None:
    await fsup.start((await fsup.create(osis(job_id="gone")))["job_id"])
    await fsup.stop("gone")
    assert await rds.xlen(STREAM) == 1
    actors(echo_actor(fast))
    await fsup.start((await fsup.create(osis(job_id="next")))["job_id"])
    await fsup.output("next", wait=10)
    await eventually(lambda: _stream_empty(rds))
    assert (await fsup.status("gone"))["status"] == "stopped"
    assert "started" not in [e["event"] for e in await events_of(rds, "gone")]


async def test_a_clean_exit_leaves_no_consumer_behind(
    fast: Config, fsup: Supervisor, rds: aioredis.Redis
) -> None:
    actor = echo_actor(fast)
    task = asyncio.create_task(actor.serve())
    assert (await fsup.run(osis("bye"), wait=10))["output"] == "bye"
    assert len(await rds.xinfo_consumers(STREAM, keys.STREAM_GROUP)) == 1
    actor.stop()
    await asyncio.wait_for(task, 10)
    assert await rds.xinfo_consumers(STREAM, keys.STREAM_GROUP) == []


async def test_the_leader_forgets_consumers_of_killed_actors(
    fsup: Supervisor, fast: Config, actors: Any, rds: aioredis.Redis
) -> None:
    await fsup.start((await fsup.create(osis(job_id="c1")))["job_id"])
    dead = ActorLink(fast, "osis", "g", "dead", index=3)  # takes a job, then is gone
    assert [c.job_id for c in await dead.cycle([], 1)] == ["c1"]
    await rds.xreadgroup(keys.STREAM_GROUP, "host:1:0", {STREAM: ">"})  # read nothing, gone
    fsup.maintenance.stale_consumer_after = 0.2
    await asyncio.sleep(0.3)  # idle past stale_consumer_after: time is the rule under test
    await fsup.maintenance.tick()  # or the background loop did it already
    names = [c["name"] for c in await rds.xinfo_consumers(STREAM, keys.STREAM_GROUP)]
    assert names == [dead.consumer]  # it still holds a delivery: kept for a reclaim
    actors(echo_actor(fast))
    await fsup.output("c1", wait=10)  # reclaimed and run
    await asyncio.sleep(0.3)  # idle past stale_consumer_after again, now holding nothing
    await fsup.maintenance.tick()  # or the background loop did it already
    remaining = [c["name"] for c in await rds.xinfo_consumers(STREAM, keys.STREAM_GROUP)]
    assert dead.consumer not in remaining
    await dead.close()


@pytest.mark.timeout(180)
async def test_five_hundred_stream_jobs_survive_random_sigkills_at_least_once(
    fsup: Supervisor,
    fast: Config,
    rds: aioredis.Redis,
    processes: list[subprocess.Popen[bytes]],
) -> None:
    """Actors are killed at random and restarted. Every job ends finished; the
    jobs a killed actor was running are delivered again, and the events show it."""
    argv = ("--stream-types", "osis", "--stream-claim-idle", "1")
    events = await sigkill_storm(fsup, fast, rds, processes, *argv, seed=11)
    redelivered = {f["job_id"] for f in events if f["event"] == "redelivered"}
    assert redelivered, "no job was in flight when its actor was killed"
    for job_id in redelivered:  # each one ran on more than one actor
        runs = {f["actor"] for f in events if f["job_id"] == job_id and f["status"] == "started"}
        assert len(runs) >= 2
    assert not any(e["event"] == "retrying" for e in events)  # redelivered, not reaped
    assert await rds.xlen(STREAM) == 0


async def _status_is(sup: Supervisor, job_id: str, status: str) -> bool:
    return bool((await sup.status(job_id))["status"] == status)


async def _stream_empty(rds: aioredis.Redis) -> bool:
    return bool(await rds.xlen(STREAM) == 0)
