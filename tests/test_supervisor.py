"""The supervisor against a real redis-server: routing, priorities, atomic
transitions, the events stream, listing, deletion and bad input."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

import pytest
import redis.asyncio as aioredis

from gateway.actor import Actor, JobContext
from gateway.config import Config
from gateway.errors import InvalidJob, InvalidParams, InvalidState, JobNotFound
from gateway.model import JobSpec, Outcome
from gateway.model import library as functions
from gateway.model.claim import CLAIMED_WIDTH
from gateway.supervisor import STATUSES, TERMINAL, Supervisor, keys, library
from gateway.supervisor.worker import ActorLink
from tests.helpers import eventually, job


async def link(
    config: Config, group: str = "g", instance: str = "i", st: str = "osis"
) -> ActorLink:
    actor = ActorLink(config, st, group, instance)
    await actor.open()
    return actor


def test_the_lua_library_ends_jobs_in_the_contracts_ended_statuses() -> None:
    line = next(ln for ln in library.source().splitlines() if ln.startswith("local TERMINAL ="))
    assert set(re.findall(r"(\w+) = true", line)) == TERMINAL
    assert set(STATUSES) > TERMINAL


@pytest.mark.parametrize(
    ("lua_name", "width"),
    [("SUBMIT_WIDTH", functions.SUBMIT_WIDTH), ("CLAIMED_WIDTH", CLAIMED_WIDTH)],
)
def test_the_lua_library_reads_the_arguments_and_rows_as_the_binding_lays_them(
    lua_name: str, width: int
) -> None:
    """hero.lua steps through a submit's arguments and lays a claim's rows out
    by widths of its own: they must be the binding's."""
    line = next(ln for ln in library.source().splitlines() if ln.startswith(f"local {lua_name} ="))
    assert int(line.split("=")[1]) == width


async def test_a_job_hash_is_a_hash_table_and_a_status_index_a_skiplist(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """hero.lua writes a new job's hash as a hash table and keeps a status
    index a skiplist when a call adds several jobs to it, each by a long value
    it overwrites or removes in the same call (``write_new``, ``zadd_status``):
    Redis's compact encodings walk the whole key on every read. Nobody may
    see the long values."""
    ids = [f"enc-{i}" for i in range(5)]
    await asyncio.gather(*(sup.create(job(job_id=j)) for j in ids))  # one call
    assert await rds.object("encoding", keys.job("enc-1")) == "hashtable"
    fields = await rds.hgetall(keys.job("enc-1"))
    assert fields["updated_at"] == fields["created_at"]
    assert max(len(v) for v in fields.values()) < 64
    created = keys.index_status("created")
    assert await rds.object("encoding", created) == "skiplist"
    assert sorted(await rds.zrange(created, 0, -1)) == ids


async def test_a_job_id_longer_than_a_claim_takes_is_refused_at_submit(
    sup: Supervisor, rds: aioredis.Redis, config: Config
) -> None:
    """The RPC refuses ids past 128 characters; a JobSpec built in-process is
    trusted, so hero.lua refuses one past 1,024 bytes itself (a claim drops
    such an id, and the status indexes' long member is longer), alone."""
    long_id, short_id = "x" * 2000, "next-to-it"
    spec = JobSpec(script="s", script_type="osis", job_id=long_id)
    call = functions.submit_many(
        False,
        [
            (spec, keys.work_queue("osis")),
            (spec._replace(job_id=short_id), keys.work_queue("osis")),
        ],
    )
    refused, created = await library.call(sup.wire, config, call)
    assert isinstance(refused, functions.Refused) and "1024 bytes" in str(refused)
    assert not isinstance(created, functions.Refused) and created.status == "created"
    assert not await rds.exists(keys.job(long_id))
    assert await rds.zscore(keys.INDEX_ALL, long_id) is None


# -- routing and priorities ---------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "queue"),
    [
        ({}, "hero:q:work:type:osis"),
        ({"group": "g"}, "hero:q:work:type:osis:group:g"),
        ({"group": "g", "instance": "i"}, "hero:q:work:type:osis:group:g:inst:i"),
        ({"priority": 0}, "hero:q:work:type:osis:prio:0"),
        ({"priority": 2, "group": "g"}, "hero:q:work:type:osis:group:g:prio:2"),
        (
            {"priority": 0, "group": "g", "instance": "i"},
            "hero:q:work:type:osis:group:g:inst:i:prio:0",
        ),
    ],
)
async def test_dispatch_routes_to_the_most_specific_queue(
    sup: Supervisor, rds: aioredis.Redis, fields: dict[str, Any], queue: str
) -> None:
    created = await sup.create(job(script_type="osis", job_id="j", **fields))
    started = await sup.start(created["job_id"])
    assert started == {"job_id": "j", "status": "dispatched", "queue": queue}
    assert await rds.lrange(queue, 0, -1) == ["j"]


async def test_group_and_instance_are_stored_only_when_given(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """A job without a group or instance has no such fields in its hash (each
    field costs Redis on every read and write of the job), and reads as one
    that has them empty: ``job.get`` says None, as it did for "". The Hero
    protocol's fields are written either way."""
    await sup.create(job(script_type="osis", job_id="plain"))
    await sup.create(job(script_type="osis", job_id="routed", group="g", instance="i"))
    plain = await rds.hgetall(keys.job("plain"))
    assert "group" not in plain and "instance" not in plain
    assert {"caller_id", "context_id", "worker_id", "concurrent"} <= plain.keys()
    got = await sup.get("plain")
    assert got["group"] is None and got["instance"] is None
    routed = await rds.hmget(keys.job("routed"), "group", "instance")
    assert routed == ["g", "i"]
    assert (await sup.get("routed"))["group"] == "g"


async def test_actor_pops_priority_first_then_most_specific(
    sup: Supervisor, config: Config
) -> None:
    targets = [({"group": "g", "instance": "i"}, "inst"), ({"group": "g"}, "group"), ({}, "type")]
    for prio in (2, 1, 0):
        for fields, name in reversed(targets):
            spec = job(script_type="osis", job_id=f"{name}-p{prio}", priority=prio, **fields)
            await sup.start((await sup.create(spec))["job_id"])
    actor = await link(config)
    try:
        order = [(await actor.cycle([], 1))[0].job_id for _ in range(9)]
        assert await actor.cycle([], 1) == []
    finally:
        await actor.close()
    assert order == [f"{name}-p{p}" for p in (0, 1, 2) for _, name in targets]


async def test_priority_zero_overtakes_a_backlog(sup: Supervisor, config: Config) -> None:
    for n in range(20):
        await sup.start(
            (await sup.create(job(script_type="osis", job_id=f"low{n}", priority=2)))["job_id"]
        )
        await sup.start((await sup.create(job(script_type="osis", job_id=f"norm{n}")))["job_id"])
    await sup.start(
        (await sup.create(job(script_type="osis", job_id="urgent", priority=0)))["job_id"]
    )
    actor = await link(config, group="other")
    try:
        claimed = [c.job_id for c in await actor.cycle([], 41)]
    finally:
        await actor.close()
    assert claimed[0] == "urgent"
    assert claimed[1:21] == [f"norm{n}" for n in range(20)]
    assert claimed[21:] == [f"low{n}" for n in range(20)]


async def test_instance_job_is_only_taken_by_that_instance(sup: Supervisor, config: Config) -> None:
    await sup.start(
        (await sup.create(job(script_type="osis", job_id="pinned", group="g", instance="i1")))[
            "job_id"
        ]
    )
    other_instance = await link(config, "g", "i2")
    other_group = await link(config, "h", "i1")
    typed_only = await link(config, "default", "x")
    target = await link(config, "g", "i1")
    try:
        for actor in (other_instance, other_group, typed_only):
            assert await actor.cycle([], 10) == []
        assert [c.job_id for c in await target.cycle([], 10)] == ["pinned"]
    finally:
        for actor in (other_instance, other_group, typed_only, target):
            await actor.close()


# -- atomic transitions -------------------------------------------------------


async def test_second_start_is_an_invalid_state_and_pushes_nothing(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    job_id = (await sup.create(job(script_type="osis")))["job_id"]
    results = await asyncio.gather(*(sup.start(job_id) for _ in range(20)), return_exceptions=True)
    assert sum(isinstance(r, dict) for r in results) == 1
    assert all(isinstance(r, InvalidState) for r in results if not isinstance(r, dict))
    assert await rds.llen(keys.work_queue("osis")) == 1


async def test_start_of_unknown_job_is_not_found(sup: Supervisor) -> None:
    with pytest.raises(JobNotFound):
        await sup.start("nope")


async def test_each_job_is_claimed_by_exactly_one_actor(sup: Supervisor, config: Config) -> None:
    for n in range(300):
        await sup.start((await sup.create(job(script_type="osis", job_id=f"j{n}")))["job_id"])
    actors = [await link(config, "default", f"a{n}") for n in range(4)]
    claimed: list[str] = []

    async def drain(actor: ActorLink) -> None:
        while batch := await actor.cycle([], 7):
            claimed.extend(c.job_id for c in batch)

    try:
        await asyncio.gather(*(drain(a) for a in actors))
    finally:
        for actor in actors:
            await actor.close()
    assert sorted(claimed) == sorted(f"j{n}" for n in range(300))


async def test_create_with_existing_job_id_is_idempotent(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    first = await sup.create(job(job_id="same", script="print(1)"))
    await sup.start("same")
    again = await sup.create(job(job_id="same", script="print(2)"))
    assert first == {"job_id": "same", "status": "created"}
    assert again == {"job_id": "same", "status": "dispatched"}
    assert await rds.hget(keys.job("same"), "script") == "print(1)"


async def test_every_transition_appends_one_event(
    sup: Supervisor, config: Config, rds: aioredis.Redis
) -> None:
    await sup.start(
        (await sup.create(job(script_type="osis", job_id="e1", caller_id="c")))["job_id"]
    )
    actor = await link(config, "default", "a")
    try:
        [claimed] = await actor.cycle([], 1)
        await actor.cycle([Outcome(claimed.job_id, "finished", "out")], 0)
    finally:
        await actor.close()
    events = [fields for _, fields in await rds.xrange(keys.EVENTS)]
    assert [e["event"] for e in events] == ["created", "dispatched", "started", "finished"]
    assert all(e["job_id"] == "e1" and e["caller_id"] == "c" for e in events)
    assert all((e["script_type"], e["group"], e["instance"]) == ("osis", "", "") for e in events)
    assert [(e["actor"], e["attempt"]) for e in events] == [
        ("", "0"),
        ("", "0"),
        ("default:a", "1"),
        ("default:a", "1"),
    ]
    assert all(int(e["ts"]) > 0 for e in events)
    assert events[3]["output"] == "out"  # terminal events carry a small output
    assert not any("output" in e for e in events[:3])


async def test_a_large_output_stays_out_of_the_event_and_still_reaches_the_waiter(
    sup: Supervisor, config: Config, actors: Any, rds: aioredis.Redis
) -> None:
    actor = Actor(config)

    @actor.handler("osis")
    def echo(ctx: JobContext) -> str:
        return ctx.job.script

    actors(actor)
    small, large = "s" * 4096, "L" * 4097
    assert (await sup.run(job(small, script_type="osis", job_id="small"), wait=10))[
        "output"
    ] == small
    assert (await sup.run(job(large, script_type="osis", job_id="large"), wait=10))[
        "output"
    ] == large
    ends = {f["job_id"]: f for _, f in await rds.xrange(keys.EVENTS) if f["event"] == "finished"}
    assert ends["small"]["output"] == small and "output" not in ends["large"]


# -- direct handoff to an idle actor ------------------------------------------


async def test_an_idle_actor_is_handed_the_next_job_already_claimed(
    sup: Supervisor, config: Config, rds: aioredis.Redis
) -> None:
    idle = await link(config, "default", "idle")
    try:
        await eventually(_registers(idle, rds, want=2))  # once it listens on its channel
        await sup.start((await sup.create(job("h", script_type="osis", job_id="h1")))["job_id"])
        assert await rds.llen(keys.work_queue("osis")) == 0  # never queued
        assert [q["queue"] for q in await sup.queue_stats("osis")] == [keys.work_queue("osis")]
        assert await rds.lrange(keys.held("osis", "default", "idle"), 0, -1) == ["h1"]
        got = await sup.get("h1")
        assert (got["status"], got["actor"], got["attempt"]) == ("started", "default:idle", 1)
        await eventually(_has_handed(idle))
        [handed] = idle.handed()
        assert (handed.job_id, handed.script, handed.attempt) == ("h1", "h", 1)
        assert await _slots(rds, "default:idle") == 1  # one slot per job, the offer stands
        await sup.start((await sup.create(job(script_type="osis", job_id="h2")))["job_id"])
        assert await rds.hlen(keys.idle("osis")) == 0  # its last slot: the offer is gone
        await sup.start((await sup.create(job(script_type="osis", job_id="h3")))["job_id"])
        assert await rds.llen(keys.work_queue("osis")) == 1  # no idle actor left: queued
        await eventually(_has_handed(idle))
        assert [j.job_id for j in idle.handed()] == ["h2"]
        # the cycle reporting h1 claims h3 and offers the slot left again
        [claimed] = await idle.cycle([Outcome("h1", "finished", "out")], 2, accept_handoff=True)
        assert claimed.job_id == "h3" and await _slots(rds, "default:idle") == 1
        assert (await sup.output("h1"))["output"] == "out"
        kinds = [f["event"] for _, f in await rds.xrange(keys.EVENTS) if f["job_id"] == "h1"]
        assert kinds == ["created", "dispatched", "started", "finished"]
    finally:
        await idle.close()
    assert await rds.hlen(keys.idle("osis")) == 0


async def test_jobs_handed_over_and_not_yet_received_count_against_a_claim(
    sup: Supervisor, config: Config, rds: aioredis.Redis
) -> None:
    """Handoff messages travel on another connection than the cycle: a cycle
    made before they arrive must not claim the slots they took."""
    actor = await link(config, "default", "busy")
    try:
        await eventually(_registers(actor, rds, want=2))
        for n in range(3):  # two handed over, the third queued
            await sup.start((await sup.create(job(script_type="osis", job_id=f"r{n}")))["job_id"])
        assert await rds.lrange(keys.work_queue("osis"), 0, -1) == ["r2"]
        assert await actor.cycle([], 2, accept_handoff=True) == []  # r0, r1 still on their way
        assert await rds.lrange(keys.work_queue("osis"), 0, -1) == ["r2"]
        assert await rds.hlen(keys.idle("osis")) == 0  # and no slot to offer
        got: list[str] = []

        async def both_arrived() -> bool:
            got.extend(j.job_id for j in actor.handed())
            return len(got) == 2

        await eventually(both_arrived)
        [claimed] = await actor.cycle([Outcome("r0", "finished")], 1, accept_handoff=True)
        assert claimed.job_id == "r2"
    finally:
        await actor.close()


async def test_a_run_handed_to_an_idle_actor_costs_one_cycle_the_one_reporting_it(
    sup: Supervisor, config: Config, actors: Any, rds: aioredis.Redis
) -> None:
    """A handoff takes one of the slots offered and leaves the rest standing,
    and the cycle that reports the job offers them all again: no empty cycle
    comes between, so a run is one submit and one hero_cycle."""
    actor = Actor(config, concurrency=4)

    @actor.handler("osis")
    def echo(ctx: JobContext) -> str:
        return ctx.job.script

    actors(actor)

    async def offered() -> bool:
        return [await _slots(rds, name) for name in await rds.hkeys(keys.idle("osis"))] == [4]

    await eventually(offered)
    cycles: list[str] = []
    async with rds.monitor() as monitor:
        for n in range(10):
            result = await sup.run(job(f"r{n}", script_type="osis", job_id=f"r{n}"), wait=10)
            assert result["output"] == f"r{n}"
        await rds.echo("barrier")  # MONITOR shows commands in the order they ran
        while (command := (await monitor.next_command())["command"]) != "ECHO barrier":
            if command.startswith("FCALL hero_cycle"):
                cycles.append(command)
    assert len(cycles) == 10
    assert await rds.llen(keys.work_queue("osis")) == 0  # every run was handed over
    assert await offered()


async def test_no_handoff_to_a_gone_actor_another_group_or_a_link_that_did_not_ask(
    sup: Supervisor, config: Config, rds: aioredis.Redis
) -> None:
    gone = await link(config, "default", "gone")
    plain = await link(config, "default", "plain")
    try:
        assert await plain.cycle([], 1) == []  # not asking: never registered
        await eventually(_registers(gone, rds))
        await rds.delete(keys.presence("osis", "default", "gone"))  # its presence expired
        await sup.start((await sup.create(job(script_type="osis", job_id="q1")))["job_id"])
        assert await rds.lrange(keys.work_queue("osis"), 0, -1) == ["q1"]
        assert await rds.hlen(keys.idle("osis")) == 0  # the gone actor's offer was dropped

        assert await gone.cycle([], 1, accept_handoff=True) != []  # takes q1
        await rds.hset(keys.idle("osis"), "junk", "[1]")
        await sup.start(
            (await sup.create(job(script_type="osis", group="g", job_id="g1")))["job_id"]
        )
        assert await rds.lrange(keys.work_queue("osis", "g"), 0, -1) == ["g1"]
        assert await rds.hkeys(keys.idle("osis")) == ["junk"]  # not for a group job
    finally:
        await gone.close()
        await plain.close()


async def test_a_link_offers_itself_only_once_its_channel_is_subscribed(
    config: Config, rds: aioredis.Redis
) -> None:
    """A handoff published before Redis has the link's SUBSCRIBE would reach
    nobody, and the job would sit in the held list as started."""
    fresh = await link(config, "default", "fresh")  # its waker has not run yet
    try:
        assert await fresh.cycle([], 1, accept_handoff=True) == []
        assert await rds.hlen(keys.idle("osis")) == 0
        await eventually(_registers(fresh, rds))
    finally:
        await fresh.close()


def _registers(
    actor: ActorLink, rds: aioredis.Redis, want: int = 4
) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        assert await actor.cycle([], want, accept_handoff=True) == []
        return bool(await _slots(rds, actor.name) == want)

    return check


async def _slots(rds: aioredis.Redis, actor: str) -> int:
    """The free slots ``actor`` offers for handoffs (0: none)."""
    offer = await rds.hget(keys.idle("osis"), actor)
    return int(json.loads(offer)[0]) if offer else 0


def _has_handed(actor: ActorLink) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return actor.has_handed()

    return check


async def test_events_stream_is_trimmed_to_about_maxlen(
    config: Config, rds: aioredis.Redis
) -> None:
    small = await Supervisor.connect(Config(redis_url=config.redis_url, events_maxlen=100))
    try:
        for n in range(300):
            await small.create(job(script_type="osis", job_id=f"t{n}"))
    finally:
        await small.close()
    assert 100 <= await rds.xlen(keys.EVENTS) < 300


async def test_one_call_trims_as_far_as_each_of_its_events_could(
    config: Config, rds: aioredis.Redis
) -> None:
    """A call trims the stream once, as far as its XADDs could have each
    (Redis takes at most 10,000 entries per approximate trim): three events
    take 30,000 stale entries off, where one trim's limit would leave 20,000."""
    pipe = rds.pipeline(transaction=False)
    for n in range(30_000):
        pipe.xadd(keys.EVENTS, {"job_id": f"old{n}"})
    await pipe.execute()
    small = await Supervisor.connect(Config(redis_url=config.redis_url, events_maxlen=100))
    try:  # three creates in one turn: one hero_submit_many call, three events
        await asyncio.gather(*(small.create(job(script_type="osis")) for _ in range(3)))
    finally:
        await small.close()
    assert await rds.xlen(keys.EVENTS) < 1_000


# -- reading ------------------------------------------------------------------


async def test_any_text_a_job_is_given_is_stored_as_it_was(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """The submit's arguments reach Lua as orjson's JSON (raw UTF-8), its
    env_vars field as the standard encoder's: both decode to the same text."""
    script = "print('é ü 中 \u2028 \\ \" \x01')\n"
    await sup.create(job(script, job_id="u1", env_vars={"GREETING": "grüß 中"}))
    got = await sup.get("u1")
    assert got["script"] == script and got["env_vars"] == {"GREETING": "grüß 中"}
    assert await rds.hget(keys.job("u1"), "env_vars") == '{"GREETING":"gr\\u00fc\\u00df \\u4e2d"}'


async def test_get_and_status_decode_the_hash(sup: Supervisor) -> None:
    spec = job(job_id="g1", env_vars={"A": "1"}, caller_id="me", timeout=5, retries=2)
    await sup.create(spec)
    got = await sup.get("g1")
    assert got["id"] == "g1" and got["status"] == "created"
    assert got["env_vars"] == {"A": "1"} and got["prerequisites"] == [] and got["dependents"] == []
    assert got["timeout"] == 5 and got["retries"] == 2 and got["priority"] == 1
    assert got["created_at"].endswith("Z") and "ctl" not in got
    assert await sup.status("g1") == {"job_id": "g1", "status": "created"}
    with pytest.raises(JobNotFound):
        await sup.get("missing")


async def test_list_pages_newest_first_without_gaps_or_repeats(sup: Supervisor) -> None:
    for n in range(25):
        await sup.create(job(job_id=f"l{n:02d}", caller_id="even" if n % 2 == 0 else "odd"))
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        page = await sup.list_jobs(cursor=cursor, limit=10)
        seen += [j["id"] for j in page["jobs"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 3
    assert seen == [f"l{n:02d}" for n in reversed(range(25))]
    evens = await sup.list_jobs(caller_id="even", limit=100)
    assert {j["id"] for j in evens["jobs"]} == {f"l{n:02d}" for n in range(0, 25, 2)}
    await sup.start("l03")
    dispatched = await sup.list_jobs(status="dispatched")
    assert [j["id"] for j in dispatched["jobs"]] == ["l03"]
    assert (await sup.list_jobs(script_type="osis"))["jobs"] == []


async def test_list_rejects_bad_arguments(sup: Supervisor) -> None:
    # forged cursors: a score Redis refuses as a bound, ids that are no identifier
    for cursor in ("garbage", "nan:x", "inf:x", "5e12:a b*", "5e12:bob-job-1\n", "5e12:"):
        with pytest.raises(InvalidParams):
            await sup.list_jobs(cursor=cursor)
    with pytest.raises(InvalidParams):
        await sup.list_jobs(status="bogus")
    with pytest.raises(InvalidParams):
        await sup.list_jobs(limit=0)


async def test_delete_removes_job_and_index_entries(sup: Supervisor, rds: aioredis.Redis) -> None:
    await sup.create(job(job_id="d1", caller_id="c"))
    await sup.start("d1")
    assert await sup.delete("d1") == {"deleted": True}
    assert await sup.delete("d1") == {"deleted": False}
    assert not await rds.exists(keys.job("d1"))
    assert await rds.zscore(keys.INDEX_ALL, "d1") is None
    assert await rds.zscore(keys.index_caller("c"), "d1") is None
    assert await rds.llen(keys.work_queue("python")) == 0
    assert (await sup.list_jobs())["jobs"] == []


async def test_stop_of_a_queued_job_removes_it_from_its_queue(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    await sup.create(job(job_id="s1", script_type="osis", group="g"))
    await sup.start("s1")
    assert await sup.stop("s1") == {"job_id": "s1", "status": "stopped"}
    assert await rds.llen(keys.work_queue("osis", "g")) == 0
    with pytest.raises(InvalidState):
        await sup.stop("s1")


# -- prerequisites ------------------------------------------------------------


async def test_unknown_or_self_prerequisite_is_refused_at_create(sup: Supervisor) -> None:
    with pytest.raises(InvalidJob) as err:
        await sup.create(job(prerequisites=["ghost"]))
    assert err.value.data[0]["field"] == "prerequisites"
    with pytest.raises(InvalidJob):
        await sup.create(job(job_id="me", prerequisites=["me"]))


async def test_dependent_waits_then_runs_after_its_prerequisite(
    sup: Supervisor, actors: Any
) -> None:
    await sup.create(job("print('first')", job_id="p1"))
    await sup.create(job("print('second')", job_id="d1", prerequisites=["p1"]))
    assert (await sup.start("d1"))["status"] == "waiting"
    assert (await sup.get("p1"))["dependents"] == ["d1"]
    actors()
    await sup.start("p1")
    assert (await sup.output("d1", wait=20))["output"] == "second\n"


async def test_dependent_fails_when_its_prerequisite_fails(sup: Supervisor, actors: Any) -> None:
    await sup.create(job("raise SystemExit(3)", job_id="bad"))
    await sup.create(job(job_id="after", prerequisites=["bad"]))
    await sup.start("after")
    actors()
    await sup.start("bad")
    result = await sup.output("after", wait=20)
    assert result["status"] == "error"
    assert "prerequisite bad ended error" in result["error"]


async def test_a_job_created_and_started_at_once_goes_by_its_prerequisites_ends(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """Created and started in one call, a job reads each prerequisite once (its
    caller, dependents and status together): one that finished lets it be
    dispatched, one that failed ends it at once, one still running leaves it
    waiting, and one whose hash lacks a status counts as gone."""
    for pid, status in (("ok", "finished"), ("failed", "error"), ("running", "started")):
        await sup.create(job(job_id=pid))
        await rds.hset(keys.job(pid), "status", status)
    await sup.create(job(job_id="bare"))
    await rds.hdel(keys.job("bare"), "status")
    after = [
        job(job_id=f"after-{pid}", prerequisites=[pid])
        for pid in ("ok", "failed", "running", "bare")
    ]
    answers = await sup.submit_many(after, start=True)
    assert [a["status"] for a in answers] == ["dispatched", "error", "waiting", "error"]
    assert (await sup.get("after-failed"))["error"] == "prerequisite failed ended error"
    assert (await sup.get("after-bare"))["error"] == "prerequisite bare ended missing"
    assert (await sup.get("running"))["dependents"] == ["after-running"]


async def test_a_jobs_iso_time_and_its_events_ms_are_the_calls_time(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """hero.lua spells a call's time twice, as ISO 8601 in the hash and as
    ms in the event, from TIME's digits (and the date part once a second):
    both must say the same instant, and the one Redis gave the event's entry
    id (its own clock, read a moment later), the ms with their leading zeros
    too. Jobs created one call at a time over about two seconds: some in a
    new second, about one in ten at a ms under 100."""
    ids = []
    for n in range(150):
        ids.append((await sup.create(job(job_id=f"clock-{n}")))["job_id"])
        await asyncio.sleep(0.01)
    created = {
        fields["job_id"]: (int(fields["ts"]), int(entry_id.split("-")[0]))
        for entry_id, fields in await rds.xrange(keys.EVENTS)
        if fields["event"] == "created"
    }
    for job_id in ids:
        at = await rds.hget(keys.job(job_id), "created_at")
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", at), at
        iso_ms = round(datetime.fromisoformat(at.replace("Z", "+00:00")).timestamp() * 1000)
        ts, entry_ms = created[job_id]
        assert iso_ms == ts, (job_id, at, ts)
        assert 0 <= entry_ms - ts < 50, (job_id, at, entry_ms)


# -- bad input ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"script_type": "python"}, ""),
        ({"script": "x", "script_type": "cobol"}, "script_type"),
        ({"script": "x", "script_type": "python", "priority": 5}, "priority"),
        ({"script": "x", "script_type": "python", "timeout": "soon"}, "timeout"),
        ({"script": "x", "script_type": "python", "instance": "i"}, ""),
        ({"script": "x", "script_type": "python", "group": "a:b"}, "group"),
        ({"script": "x", "script_type": "python", "job_id": "*"}, "job_id"),
        ({"script": "x", "script_type": "python", "env_vars": {"1BAD": "v"}}, "env_vars"),
        ({"script": "x", "script_type": "python", "prerequisites": "p"}, "prerequisites"),
        ({"script": "x", "script_type": "python", "surprise": 1}, ""),
        ("not an object", ""),
    ],
)
async def test_bad_job_specs_are_refused_per_field(sup: Supervisor, spec: Any, field: str) -> None:
    with pytest.raises(InvalidJob) as err:
        await sup.create(spec)
    assert field in [p["field"] for p in err.value.data]
    assert all(p["message"] for p in err.value.data)


async def test_errors_never_echo_values(sup: Supervisor) -> None:
    secret = "hunter2-very-secret"
    with pytest.raises(InvalidJob) as err:
        await sup.create(job(env_vars={"TOKEN": {"nested": secret}}))
    assert secret not in err.value.message
    assert secret not in json.dumps(err.value.data)


async def test_submit_many_creates_and_starts_a_batch(sup: Supervisor, rds: aioredis.Redis) -> None:
    specs = [job(script_type="osis", job_id=f"b{n:03d}") for n in range(250)]
    specs.append(job(script_type="osis", job_id="orphan", prerequisites=["ghost"]))
    answers = await sup.submit_many(specs)
    assert [a["job_id"] for a in answers] == [s["job_id"] for s in specs]
    assert {a["status"] for a in answers[:-1]} == {"dispatched"}
    assert answers[-1]["status"] == "invalid" and "ghost" in answers[-1]["error"]
    assert await rds.llen(keys.work_queue("osis")) == 250
    again = await sup.submit_many(specs[:2], start=False)  # idempotent by job id
    assert [a["status"] for a in again] == ["dispatched", "dispatched"]
    with pytest.raises(InvalidJob):
        await sup.submit_many([job(script_type="osis"), {"script": "x"}])


async def test_a_producer_without_watch_refuses_to_wait(config: Config) -> None:
    producer = await Supervisor.connect(config, watch=False)
    try:
        await producer.create(job(job_id="p1"))
        with pytest.raises(RuntimeError, match="watch=True"):
            await producer.output("p1", wait=1)
    finally:
        await producer.close()
