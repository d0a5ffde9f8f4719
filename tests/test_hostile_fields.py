"""Job-hash fields that name keys, and ``dependents`` lists, as any Redis
writer may leave them — real redis-server, a real in-process actor.

A job hash is anyone's to write (a Hero producer's, even on its own ACL
user), and hero.lua used to act on what it said: a ``queue``, ``ctl`` or
``legacy`` field naming one of our private keys had a dispatch, a stop or a
delete push onto it or LREM it (a key of ours made a list stops every
actor's cycle); a ``dependents`` list failed or started jobs that never
named the ended one as a prerequisite, another caller's included.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.actor import Actor, JobContext
from gateway.config import Config
from gateway.errors import InvalidJob
from gateway.supervisor import Supervisor, keys
from tests.helpers import eventually, job

pytestmark = pytest.mark.timeout(60)

HELD = keys.held("osis", "g", "i")  # another actor's held list


def echo_actor(config: Config, concurrency: int = 1) -> Actor:
    actor = Actor(config, instance="echo", concurrency=concurrency)

    @actor.handler("osis")
    def run(ctx: JobContext) -> str:
        return ctx.job.script

    return actor


async def test_a_dependent_naming_a_private_key_as_its_queue_ends_in_error(
    sup: Supervisor, rds: aioredis.Redis, config: Config, actors: Any
) -> None:
    """A's end dispatches X, whose hash (an outside writer's) says its queue
    is hero:q:orphans: that LPUSH made the key a list and every actor's
    cycle failed until an operator deleted it."""
    actors(echo_actor(config))
    await sup.create(job("a", script_type="osis", job_id="A"))
    await rds.hset(keys.job("X"), mapping={
        "status": "waiting", "script_type": "osis", "script": "x", "group": "g",
        "queue": keys.ORPHANS, "prerequisites": '["A"]'})  # fmt: skip
    await rds.hset(keys.job("A"), "dependents", '["X"]')
    await sup.start("A")
    assert (await sup.output("A", wait=20))["status"] == "finished"
    ended = await sup.output("X", wait=20)
    assert ended["status"] == "error"
    assert ended["error"] == f"queue {keys.ORPHANS} refused it: not a work queue"
    assert await rds.type(keys.ORPHANS) == "none"
    after = await sup.run(job("honest", script_type="osis"), wait=20)
    assert after["output"] == "honest"  # the actors' cycles go on


async def test_a_queue_field_rewritten_before_a_start_names_no_key_of_ours(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    await sup.create(job("x", script_type="osis", job_id="J"))
    await rds.hset(keys.job("J"), "queue", keys.INDEX_ALL)
    started = await sup.start("J")
    assert started["status"] == "error"
    assert (await sup.get("J"))["error"].endswith("refused it: not a work queue")
    assert await rds.type(keys.INDEX_ALL) == "zset"


async def test_stop_and_delete_touch_only_keys_of_the_fields_families(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """A stop LREMs a queued job's queue and legacy copies, LPUSHes a started
    one's control queue, and a delete LREMs its queues: each named by the
    hash, so each could have been another actor's held list or our index."""
    await rds.lpush(HELD, "Q1", "S1", "D1")
    for job_id in ("Q1", "S1", "D1"):
        await sup.create(job("x", script_type="osis", job_id=job_id))
    await rds.hset(keys.job("Q1"), mapping={"status": "dispatched", "queue": HELD,
                                             "legacy": HELD})  # fmt: skip
    await rds.hset(keys.job("S1"), mapping={"status": "started", "ctl": keys.ORPHANS})
    await rds.hset(keys.job("D1"), mapping={"queue": HELD, "legacy": f"{HELD}\n{HELD}"})
    assert (await sup.stop("Q1"))["status"] == "stopped"
    assert (await sup.stop("S1"))["status"] == "stopped"
    assert await sup.delete("D1") == {"deleted": True}
    assert await rds.lrange(HELD, 0, -1) == ["D1", "S1", "Q1"]
    assert await rds.type(keys.ORPHANS) == "none"


async def test_an_ended_job_touches_only_dependents_that_name_it(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """alice's X depended on P and was deleted; bob's new X (waiting on his
    own Q) inherited the link in P's dependents, and alice stopping P ended
    bob's job with her job's id in its error."""
    await sup.create(job("p", job_id="P", caller_id="alice"))
    await sup.create(job("x", job_id="X", caller_id="alice", prerequisites=["P"]))
    assert await sup.delete("X") == {"deleted": True}
    await sup.create(job("q", job_id="Q", caller_id="bob"))
    await sup.create(job("x", job_id="X", caller_id="bob", prerequisites=["Q"]))
    assert (await sup.start("X"))["status"] == "waiting"
    assert json.loads(await rds.hget(keys.job("P"), "dependents") or "[]") == ["X"]
    await sup.stop("P")
    assert (await sup.status("X"))["status"] == "waiting"


async def test_a_prerequisites_long_or_odd_dependents_refuse_nothing_half_way(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """About 8,000 dependents passed Lua's unpack limit half way through the
    submit, and a list holding a number JSON cannot write failed its encode:
    either left the new job's hash behind, without a status."""
    many = [f"d{n}" for n in range(9000)]
    await sup.create(job("p", job_id="P"))
    await rds.hset(keys.job("P"), "dependents", json.dumps(many))
    assert (await sup.create(job("x", job_id="X", prerequisites=["P"])))["status"] == "created"
    assert json.loads(await rds.hget(keys.job("P"), "dependents") or "[]") == [*many, "X"]
    await sup.create(job("o", job_id="O"))
    await rds.hset(keys.job("O"), "dependents", "[1e999]")
    with pytest.raises(InvalidJob, match="prerequisite O is unknown"):
        await sup.create(job("y", job_id="Y", prerequisites=["O"]))
    assert not await rds.exists(keys.job("Y"))
    assert await rds.hget(keys.job("O"), "dependents") == "[1e999]"


async def test_a_legacy_copy_made_a_hash_stalls_no_actor(
    sup: Supervisor, rds: aioredis.Redis, config: Config, actors: Any
) -> None:
    """A job handed to an idle actor whose hash names, as a legacy copy, a
    legacy queue someone made a hash: the take failed on LREM (WRONGTYPE),
    yet the job stayed in the actor's held list with no row sent, counted
    against its claims for ever: the actor ran nothing more until restarted."""
    actors(echo_actor(config))

    async def offering() -> bool:
        return bool(await rds.hlen(keys.idle("osis")))

    await eventually(offering)
    legacy = keys.legacy_actor_queue("h")
    await rds.hset(legacy, "a", "b")
    await sup.create(job("first", script_type="osis", job_id="J"))
    await rds.hset(keys.job("J"), "legacy", legacy)
    await sup.start("J")
    assert (await sup.output("J", wait=20))["output"] == "first"
    assert (await sup.run(job("next", script_type="osis"), wait=20))["output"] == "next"


async def test_a_delivery_redis_refuses_loses_no_other_job_of_its_cycle(
    rds: aioredis.Redis, config: Config, actors: Any
) -> None:
    """Stream mode: one delivered job whose key was made a list failed the
    whole claim, and the adopt after it dropped the other deliveries of that
    cycle, whose jobs then sat dispatched for ever."""
    streamed = replace(config, stream_types=("osis",))
    sup = await Supervisor.connect(streamed)
    try:
        for job_id in ("bad", "ok1", "ok2"):
            await sup.create(job(job_id, script_type="osis", job_id=job_id))
            await sup.start(job_id)
        await rds.delete(keys.job("bad"))
        await rds.lpush(keys.job("bad"), "junk")
        actors(echo_actor(streamed, concurrency=4))  # all three in one cycle
        for job_id in ("ok1", "ok2"):
            assert (await sup.output(job_id, wait=20))["output"] == job_id
        assert await rds.xlen(keys.work_stream("osis")) == 0
    finally:
        await sup.close()


async def test_a_junk_queue_name_breaks_no_queue_stats(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """A work queue named with a priority that is no number (a job hash may
    name one) made every queue.stats and /metrics fail."""
    await rds.sadd(keys.QUEUES, keys.work_queue("osis") + ":prio:zz")
    await sup.create(job("x", script_type="osis", job_id="J"))
    await sup.start("J")
    rows = await sup.queue_stats()
    assert [r["queue"] for r in rows] == [keys.work_queue("osis")]


async def test_odd_items_in_a_dependents_list_skip_only_themselves(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """A dependent whose prerequisites list holds a non-string aborted the
    ended job's walk over its dependents (and its job.stop answered -32603):
    the others stayed waiting for ever."""
    await sup.create(job("p", job_id="P"))
    await sup.create(job("e", job_id="E", prerequisites=["P"]))
    assert (await sup.start("E"))["status"] == "waiting"
    await rds.hset(keys.job("D"), mapping={"status": "waiting", "prerequisites": '["P", {}]'})
    await rds.hset(keys.job("P"), "dependents", '[{}, "D", "E"]')
    assert (await sup.stop("P"))["status"] == "stopped"
    assert (await sup.get("E"))["error"] == "prerequisite P ended stopped"
    assert await rds.hget(keys.job("D"), "status") == "error"


async def test_a_dependents_list_past_the_limit_is_not_read(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """A job hash's dependents of tens of MB (anyone may write one) had the
    ended job's walk decode it and read each, holding Redis for seconds. A
    list past 1 MiB is not read; submit refuses to grow one past it."""
    huge = json.dumps(["E", *(f"dependent-{n:07d}" for n in range(60000))])
    await sup.create(job("p", job_id="P"))
    await sup.create(job("e", job_id="E", prerequisites=["P"]))
    assert (await sup.start("E"))["status"] == "waiting"
    await rds.hset(keys.job("P"), "dependents", huge)
    with pytest.raises(InvalidJob, match="prerequisite P is unknown"):
        await sup.create(job("f", job_id="F", prerequisites=["P"]))
    assert (await sup.stop("P"))["status"] == "stopped"
    assert (await sup.status("E"))["status"] == "waiting"


async def test_claim_fields_that_are_not_what_they_should_be_end_no_actor(
    sup: Supervisor, rds: aioredis.Redis, config: Config, actors: Any
) -> None:
    """A timeout, attempt or env_vars a producer rewrote in its job's hash
    raised in the actor's decoding of the claim row (int(), json.loads):
    the whole cycle reply failed and the actor process ended, its held jobs
    (another caller's too) left started for ever."""
    actors(echo_actor(config))
    await sup.create(job("odd", script_type="osis", job_id="J"))
    await rds.hset(keys.job("J"), mapping={"timeout": "abc", "env_vars": "{bad",
                                            "retries": "-1"})  # fmt: skip
    await sup.start("J")
    assert (await sup.output("J", wait=20))["output"] == "odd"
    assert (await sup.run(job("next", script_type="osis"), wait=20))["output"] == "next"


async def test_an_attempt_rewritten_while_its_job_runs_holds_no_slot(
    sup: Supervisor, rds: aioredis.Redis, config: Config, actors: Any
) -> None:
    """The report names the attempt it ran only when sent again after a lost
    reply: a first report passed over because the hash's attempt (anyone's
    to write) said otherwise left the job started and in the actor's held
    list, and the actor claimed nothing more."""
    actor = Actor(config, instance="slow")
    rewritten: list[str] = []

    @actor.handler("osis")
    async def run(ctx: JobContext) -> str:
        if ctx.job.script == "rewrite me":
            await rds.hset(keys.job(ctx.job.job_id), "attempt", "999")
            rewritten.append(ctx.job.job_id)
        return ctx.job.script

    actors(actor)
    done = await sup.run(job("rewrite me", script_type="osis", job_id="R"), wait=20)
    assert rewritten == ["R"] and done["status"] == "finished"
    assert (await sup.run(job("next", script_type="osis"), wait=20))["output"] == "next"


async def test_a_legacy_field_of_thousands_of_names_costs_two_lrems(
    sup: Supervisor, rds: aioredis.Redis, config: Config, actors: Any
) -> None:
    """A claim LREMed every name a job's legacy field listed: 5,000 names of
    a long list held Redis for 9 s. Dispatch writes one per legacy kind."""
    await rds.rpush(keys.legacy_work("big"), *[f"junk-{n}" for n in range(100)])
    await sup.create(job("x", script_type="osis", job_id="J"))
    await rds.hset(keys.job("J"), "legacy", f"{keys.legacy_work('big')}\n" * 5000)
    await sup.start("J")
    before = (await rds.info("commandstats")).get("cmdstat_lrem", {}).get("calls", 0)
    actors(echo_actor(config))
    assert (await sup.output("J", wait=20))["status"] == "finished"
    after = (await rds.info("commandstats"))["cmdstat_lrem"]["calls"]
    assert after - before <= 3  # the legacy copy, and the held entry at the report
