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

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.actor import Actor, JobContext, JobFailed
from gateway.config import Config
from gateway.errors import InvalidJob
from gateway.metrics import Metrics
from gateway.supervisor import Supervisor, keys
from tests.helpers import by_hand, eventually, job, until_offering

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

    await until_offering(rds)
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


async def test_odd_attempts_break_no_dead_letter_listing(
    sup: Supervisor, rds: aioredis.Redis, config: Config, actors: Any
) -> None:
    """An attempt a producer rewrote (1.5, 7.5) reached the dead letters as
    written: int('1.5') in the stream's listing, 7.5 in the list's, failed
    queue.dlq.list for every caller."""
    await rds.xadd(keys.dlq_stream("osis"), {"job_id": "odd", "reason": "r", "last_error": "e",
                                             "dlq_ts": "1e3", "attempt": "1.5"})  # fmt: skip
    actor = Actor(config, instance="dlq")

    @actor.handler("osis")
    async def run(ctx: JobContext) -> str:
        await rds.hset(keys.job(ctx.job.job_id), "attempt", "7.5")
        raise JobFailed("no")

    actors(actor)
    done = await sup.run(job("x", script_type="osis", job_id="L", retries=1), wait=20)
    assert done["status"] == "dlq"
    listed = {e["job_id"]: e["attempt"] for e in await sup.dlq_list("osis")}
    assert listed == {"odd": 0, "L": 7}


async def test_a_script_type_no_supervisor_accepts_counts_as_other(
    sup: Supervisor, redis_url: str
) -> None:
    """A script type a job hash named (bytes that are not UTF-8, here) was a
    label of its own: /metrics failed for good (UnicodeEncodeError)."""
    raw = aioredis.Redis.from_url(redis_url)  # writes bytes, as a producer may
    try:
        await raw.hincrby(keys.TRANSITIONS, b"started:\xff\xfe<b>", 2)
        await raw.hincrby(keys.TRANSITIONS, b"started:nobody-accepts-this", 1)
    finally:
        await raw.aclose()
    counts = await sup.transition_counts()
    assert counts[("started", "other")] == 3
    text = await Metrics(sup).render()
    assert b'script_type="other"' in text


async def test_a_backlog_past_one_pass_hides_no_job_from_expiry(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """The expiry pass looked at the 500 oldest jobs of each status only: 600
    jobs waiting in a queue nobody serves (a backlog, or parked there on
    purpose) hid a later one that an outside actor ended in the hash, for
    good. The pass goes on from where it stopped."""
    await by_hand(sup, rds)
    await sup.submit_many([job("w", script_type="osis", group="nobody") for _ in range(600)])
    await sup.create(job("v", script_type="osis", job_id="V"))
    await sup.start("V")
    await rds.hset(keys.job("V"), "status", "finished")  # an outside actor ended it
    for _ in range(2):
        await sup.maintenance.tick()
    assert await rds.zscore(keys.index_status("finished"), "V") is not None


async def test_ticks_a_third_of_the_presence_ttl_apart_see_no_outage(
    config: Config, rds: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """With HERO_PRESENCE_TTL=3 and the default 1 s between ticks, every tick
    took the last one's stamp for an outage and gave every actor a full TTL
    again: no dead actor was ever reaped."""
    sup = await Supervisor.connect(replace(config, presence_ttl=3, maintenance_interval=1.0))
    try:
        await by_hand(sup, rds)
        await sup.maintenance.tick()
        await asyncio.sleep(1.1)
        await sup.maintenance.tick()
        assert "redis was out of reach" not in caplog.text
    finally:
        await sup.close()


async def test_a_dependents_walk_reads_each_dependent_once_and_little(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """One waiting dependent with a 1 MiB prerequisites list, named 300 times
    in an ended job's dependents, had the walk decode 300 MiB: 8 s of Redis,
    unkillable, and hours for a full list. It is looked at once, and a list
    longer than any job may have is not read."""
    await by_hand(sup, rds)  # no maintenance commands in the counts below
    await sup.create(job("p", job_id="P"))
    await sup.create(job("e", job_id="E", prerequisites=["P"]))
    assert (await sup.start("E"))["status"] == "waiting"
    long = json.dumps(["P", *(f"p{n:06d}" for n in range(120000))])
    await rds.hset(keys.job("D"), mapping={"status": "waiting", "prerequisites": long})
    await rds.hset(keys.job("P"), "dependents", json.dumps(["D"] * 300 + ["E"]))
    await rds.config_resetstat()
    assert (await sup.stop("P"))["status"] == "stopped"
    stats = await rds.info("commandstats")
    reads = sum(stats.get(f"cmdstat_{c}", {}).get("calls", 0) for c in ("hget", "hmget"))
    assert reads < 30  # 308: a read of D per mention (and its list decoded each time)
    assert (await sup.get("E"))["error"] == "prerequisite P ended stopped"
    assert await rds.hget(keys.job("D"), "status") == "waiting"  # its list is not a job's


async def test_a_queue_name_that_is_no_key_part_breaks_no_metrics(
    sup: Supervisor, redis_url: str
) -> None:
    """A queue a job hash named with bytes that are not UTF-8 reached the
    queues' record, then queue.stats rows and /metrics labels: /metrics
    failed for good (UnicodeEncodeError)."""
    raw = aioredis.Redis.from_url(redis_url)
    try:
        await raw.sadd(keys.QUEUES, keys.work_queue("osis").encode() + b"\xff\xfe")
    finally:
        await raw.aclose()
    await sup.create(job("x", script_type="osis", job_id="J"))
    await sup.start("J")
    assert [r["queue"] for r in await sup.queue_stats()] == [keys.work_queue("osis")]
    assert b"hero_queue_depth" in await Metrics(sup).render()


async def test_an_outside_jobs_sizes_are_bounded_where_we_copy_them(
    sup: Supervisor, rds: aioredis.Redis, config: Config, actors: Any
) -> None:
    """An outside job's env_vars of 100 MB was decoded inside the claim (9 s
    of Redis, unkillable); its 20 MB group, instance and caller id were
    copied into every event and key; a 5 MB id made a listing page whose
    cursor could not be sent back."""
    actors(echo_actor(config))
    big_env = json.dumps({f"k{n}": "v" for n in range(20000)})  # ~200 KB: past 64 KiB
    junk = "g" * 5000
    await rds.hset(keys.job("big-env"), mapping={"script": "a", "env_vars": big_env})
    await rds.hset(keys.job("names"), mapping={"script": "b", "group": junk, "instance": junk,
                                                "caller_id": junk})  # fmt: skip
    long_id = "x" * 5000
    for job_id in ("big-env", "names", long_id):
        await rds.lpush(keys.work_queue("osis"), job_id)

    async def ended() -> bool:
        return {await rds.hget(keys.job(j), "status") for j in ("big-env", "names")} <= {
            "error", "finished"}  # fmt: skip

    await eventually(ended)
    refused = await sup.get("big-env")
    assert refused["status"] == "error" and refused["error"] == "env_vars is larger than 64 KiB"
    assert (await sup.get("names"))["output"] == "b"
    stored = await rds.hmget(keys.job("names"), ["group", "instance"])
    assert stored == ["", ""]  # the queue's (none), not the hash's
    assert await rds.zcard(keys.index_caller(junk)) == 0
    for _, fields in await rds.xrange(keys.EVENTS):
        assert all(len(v) <= 512 for k, v in fields.items() if k != "output"), fields

    # dropped from the queue at once: not parked with the outside jobs for
    # HERO_OUTSIDE_GRACE, then given a hash
    async def drained() -> bool:
        return bool(await rds.llen(keys.work_queue("osis")) == 0)

    await eventually(drained)
    assert await rds.zcard(keys.ORPHANS) == 0  # its members are JSON records, not ids
    assert not await rds.exists(keys.job(long_id))
    assert await rds.zscore(keys.INDEX_ALL, long_id) is None
