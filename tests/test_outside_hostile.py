"""An outside producer's job hash is data, not instructions — real
redis-server, real python actors, as a stranger with a plain client writes it.

Each case was an attack that worked: a hash naming keys for the claim to LREM,
asking for stream mode (which turned the type's work list into a stream on a
retry), carrying a death count that failed every reap, or holding bytes that
are not UTF-8 (which wedged the actor that popped them and failed listings).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import replace
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from gateway.actor import Actor, JobContext, JobFailed, python_actor
from gateway.config import Config
from gateway.errors import Forbidden, InvalidJob, JobNotFound
from gateway.model import TERMINAL
from gateway.pipeline.archive import ArchiveOptions, Archiver
from gateway.pipeline.commands.common import redis_client
from gateway.pipeline.store import read_events
from gateway.supervisor import Supervisor, keys
from gateway.supervisor.worker import ActorLink
from tests.helpers import by_hand, eventually, job, until_offering

pytestmark = pytest.mark.timeout(90)

TYPE_Q = "hero:q:work:type:python"


async def push(client: aioredis.Redis, job_id: bytes, fields: dict[str, bytes | str]) -> None:
    await client.hset(b"hero:job:" + job_id, mapping=fields)
    await client.lpush(TYPE_Q, job_id)


async def final(raw: aioredis.Redis, job_id: bytes, within: float = 20) -> dict[bytes, bytes]:
    async def ended() -> bool:
        return await raw.hget(b"hero:job:" + job_id, "status") in {b"finished", b"error", b"dlq"}

    await eventually(ended, within=within)
    got: dict[bytes, bytes] = await raw.hgetall(b"hero:job:" + job_id)
    return got


@contextlib.asynccontextmanager
async def refusal_cleared(
    actor: Actor, sup: Supervisor, rds: aioredis.Redis
) -> AsyncIterator[asyncio.Task[None]]:
    """``actor`` serving; at the end the key that made Redis refuse its
    cycles (hero:q:orphans made a list) goes, and the actor and ``sup`` stop."""
    serving = asyncio.create_task(actor.serve())
    try:
        yield serving
    finally:
        await rds.delete(keys.ORPHANS)
        actor.stop()
        await asyncio.wait_for(serving, 30)
        await sup.close()


async def tick(sup: Supervisor) -> dict[str, int]:
    """One maintenance tick by hand (see ``by_hand``)."""
    return await sup.maintenance.tick()


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[aioredis.Redis]:
    """A client that writes and reads bytes, as any producer may."""
    client = aioredis.Redis.from_url(redis_url)
    yield client
    await client.aclose()


async def test_fields_of_ours_in_an_outside_hash_steer_nothing(
    fast: Config,
    fsup: Supervisor,
    rds: aioredis.Redis,
    raw: aioredis.Redis,
    actors: Callable[..., Actor],
) -> None:
    """The retry is promoted by ``fsup``'s maintenance."""
    actors(python_actor(fast))
    await push(raw, b"base", {"script": "print('base')"})  # hero:idx:all is not empty
    assert (await final(raw, b"base"))[b"status"] == b"finished"
    await push(
        raw,
        b"hostile",
        {
            "script": "raise SystemExit(3)",
            "retries": "1",  # a retry re-dispatches by the job's mode
            "mode": "stream",
            "legacy": keys.INDEX_ALL,  # the claim would LREM it: WRONGTYPE, the actor dies
            "deaths": "x",  # every reap's HINCRBY would fail
            "entry": "1-1",
            "lease": keys.INDEX_ALL,  # a key that always exists: the job would never time out
            "sandbox": "off",  # how it was confined is ours to say
            "script_type": "other",  # index keys and metric series named by any text
        },
    )
    ended = await final(raw, b"hostile")
    assert (ended[b"status"], ended[b"attempt"]) == (b"dlq", b"2")  # retried once, then failed
    assert ended[b"script_type"] == b"python"
    assert not {b"deaths", b"legacy", b"mode", b"entry", b"sandbox"} & set(ended)
    assert ended[b"lease"] != keys.INDEX_ALL.encode()  # our actor's presence key
    assert await rds.type(TYPE_Q) in {"list", "none"}
    assert await rds.zscore(keys.INDEX_ALL, "base") is not None
    assert await rds.exists(keys.index_type("other")) == 0
    await push(raw, b"after", {"script": "print('after')"})
    assert (await final(raw, b"after"))[b"output"] == b"after\n"


async def test_bytes_that_are_not_utf8_wedge_nothing(
    config: Config,
    sup: Supervisor,
    raw: aioredis.Redis,
    actors: Callable[..., Actor],
    redis_url: str,
    tmp_path: Path,
) -> None:
    """Such an id and such a script each end their own job; the actor goes on,
    listings and the archive still work."""
    actors()
    await push(raw, b"first", {"script": "print('first')"})  # a page may end on the next
    assert (await final(raw, b"first"))[b"status"] == b"finished"
    await push(raw, b"bad\xff", {"script": "print('odd id')"})
    odd_id = await final(raw, b"bad\xff")
    assert (odd_id[b"status"], odd_id[b"output"]) == (b"finished", b"odd id\n")
    await push(raw, b"badscript", {"script": b"print(1)\xff\xfe"})
    assert (await final(raw, b"badscript"))[b"status"] == b"error"
    await push(raw, b"after", {"script": "print('after')"})
    assert (await final(raw, b"after"))[b"output"] == b"after\n"

    listed = {j["id"] for j in (await sup.list_jobs())["jobs"]}
    assert {"bad\udcff", "badscript", "after"} <= listed
    paged, cursor = [], None  # a page may end on any of them: its cursor is plain text
    while True:
        page = await sup.list_jobs(cursor=cursor, limit=1)
        paged += [j["id"] for j in page["jobs"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert cursor.isascii()
    assert sorted(paged) == sorted(listed)
    assert {q["queue"] for q in await sup.queue_stats("python")} >= {TYPE_Q}

    client = redis_client(redis_url)
    try:
        archive = ArchiveOptions(out=tmp_path / "archive", consumer="c1", batch=100)
        await asyncio.to_thread(Archiver(client, archive).run, once=True)
    finally:
        client.close()
    table = read_events(tmp_path / "archive").to_pylist()
    events = {row["event"] for row in table if row["job_id"] == "bad\ufffd"}
    assert events >= {"created", "dispatched", "started", "finished"}  # and maybe a log


@pytest.mark.parametrize(
    ("prepare", "fields", "status"),
    [
        # its reply queue made a hash: the job ends, with no reply to push
        ({"hero:q:reply:evil": "hash"}, {"script": "print('ran')"}, "finished"),
        # its caller's index made a hash: adoption fails, for this job only
        ({"hero:idx:caller:zz": "hash"}, {"script": "print(1)", "caller_id": "zz"}, "error"),
        # the job "hash" is a list: nothing can record it; it leaves the held list
        ({"hero:job:evil": "list"}, {}, None),
    ],
    ids=["reply-key", "caller-index", "job-key"],
)
async def test_a_key_of_the_wrong_type_fails_only_its_own_job(
    raw: aioredis.Redis,
    rds: aioredis.Redis,
    actors: Callable[..., Actor],
    prepare: dict[str, str],
    fields: dict[str, bytes | str],
    status: str | None,
) -> None:
    """Before, Redis refused the whole hero_cycle (WRONGTYPE): the actor died,
    and a restarted one under the same name died again on its held list."""
    for key, kind in prepare.items():
        if kind == "hash":
            await rds.hset(key, "a", "b")
        else:
            await rds.lpush(key, "x")
    actors()
    if fields:
        await push(raw, b"evil", fields)
        assert (await final(raw, b"evil"))[b"status"] == status.encode()  # type: ignore[union-attr]
    else:
        await raw.lpush(TYPE_Q, b"evil")
    await push(raw, b"after", {"script": "print('after')"})
    assert (await final(raw, b"after"))[b"output"] == b"after\n"
    held = [k async for k in rds.scan_iter("hero:q:held:*")]
    assert [await rds.lrange(k, 0, -1) for k in held] == [[] for _ in held]


async def test_a_maintenance_step_redis_refuses_stops_no_other(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """Someone made the retry schedule a list: promoting fails on every tick,
    and the later steps (here: recording an end an outside actor wrote) still run."""
    await by_hand(sup, rds)
    await rds.lpush(keys.DELAYED, "junk")
    await sup.create({"script_type": "osis", "script": "x", "job_id": "n1"})
    await sup.start("n1")
    assert await rds.lpop("hero:q:work:type:osis") == "n1"
    await rds.hset("hero:job:n1", mapping={"status": "finished", "output": "osis"})
    done = await tick(sup)
    assert (done["promoted"], done["expired"]) == (0, 1)
    assert (await sup.status("n1"))["status"] == "finished"


async def test_a_started_job_whose_key_was_replaced_stops_no_timeout(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """Someone SET a started job's hash to a string: the timeout check meets it
    on every tick, and still ends the other overdue jobs after it."""
    await by_hand(sup, rds)
    for job_id in ("broken", "overdue"):
        await sup.create({"script_type": "osis", "script": "x", "job_id": job_id, "timeout": 1})
        await sup.start(job_id)
        assert await rds.lpop("hero:q:work:type:osis") == job_id
        await rds.hset(keys.job(job_id), mapping={"status": "started", "lease": "gone"})
        await rds.zadd(keys.index_status("started"), {job_id: 1})  # started long ago
    await rds.set(keys.job("broken"), "x")
    assert (await tick(sup))["expired"] == 1
    assert (await sup.status("overdue"))["status"] in {"retrying", "timeout", "dlq"}


async def test_a_held_job_whose_key_was_replaced_stops_no_restart(
    config: Config, rds: aioredis.Redis
) -> None:
    """An actor restarted under its name adopts what its held list names; one
    id whose key is no hash now is dropped, not a crash on every restart."""
    held = keys.held("python", "default", "i1")
    await rds.set(keys.job("bad"), "x")
    await rds.lpush(held, "bad")
    link = ActorLink(config, "python", "default", "i1")
    try:
        assert await link.adopt() == []
        assert await rds.llen(held) == 0
    finally:
        await link.close()


async def test_a_queue_made_another_type_is_passed_over(
    raw: aioredis.Redis, rds: aioredis.Redis, actors: Callable[..., Actor]
) -> None:
    """A high-priority work queue someone made a hash: the actor serves the
    other queues instead of dying on every cycle."""
    await rds.hset(TYPE_Q + ":prio:0", "a", "b")
    actors()
    await push(raw, b"after", {"script": "print('after')"})
    assert (await final(raw, b"after"))[b"output"] == b"after\n"


async def test_a_due_retry_whose_key_was_replaced_delays_no_other(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    await by_hand(sup, rds)
    await sup.create({"script_type": "osis", "script": "x", "job_id": "fine"})
    await sup.start("fine")
    assert await rds.lpop("hero:q:work:type:osis") == "fine"
    await rds.hset(keys.job("fine"), "status", "retrying")
    await rds.set(keys.job("broken"), "x")
    await rds.zadd(keys.DELAYED, {"broken": 1, "fine": 2})
    assert (await tick(sup))["promoted"] == 2
    assert (await sup.status("fine"))["status"] == "dispatched"


async def test_a_waited_job_whose_key_was_replaced_delays_no_other_wait(
    config: Config, rds: aioredis.Redis
) -> None:
    """Two callers wait on jobs of a type only outside actors serve (the waits
    sweep their hashes, both in the same sweeps: registered together, looked
    at every 0.3 s); one job's key is replaced, the other's end is written in
    its hash: that caller gets its result."""
    sup = await Supervisor.connect(replace(config, watch_interval=0.3))
    await by_hand(sup, rds)  # a timeout check would record w2's end too
    waits = [
        asyncio.create_task(sup.run({"script_type": "osis", "script": "x", "job_id": j}, wait=30))
        for j in ("w1", "w2")
    ]

    async def dispatched() -> bool:
        queued: int = await rds.llen("hero:q:work:type:osis")
        return queued == 2

    await eventually(dispatched)
    await rds.set(keys.job("w1"), "x")
    await rds.hset(keys.job("w2"), mapping={"status": "finished", "output": "hi"})
    try:
        got = await asyncio.wait_for(waits[1], 3)  # w1's wait lasts 30 s
        assert (got["status"], got["output"]) == ("finished", "hi")
    finally:
        waits[0].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waits[0]
        await sup.close()


async def test_a_dead_actors_job_whose_key_was_replaced_stops_no_reap(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """The dead actor's other job is run again; before, hero_reap failed on
    every tick and nothing it held was recovered."""
    await by_hand(sup, rds)
    lease = keys.presence("osis", "default", "ghost")
    for job_id in ("fine", "broken"):
        await sup.create({"script_type": "osis", "script": "x", "job_id": job_id})
        fields = {"status": "started", "lease": lease, "actor": "default:ghost", "attempt": 1}
        await rds.hset(keys.job(job_id), mapping=fields)
        await rds.lpush(keys.held("osis", "default", "ghost"), job_id)
    await rds.set(keys.job("broken"), "x")
    now_ms = int((await rds.time())[0]) * 1000
    await rds.set(keys.WATCH, now_ms)
    await rds.zadd(keys.ACTORS, {lease: now_ms - 1})
    assert (await tick(sup))["reaped"] == 1
    assert (await sup.status("fine"))["status"] == "retrying"


async def test_listings_and_stats_pass_over_a_key_of_another_type(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """job.list, queue.stats (and /metrics, which reads them) answer for
    everything else; before, each failed whole."""
    for job_id in ("a", "b"):
        await sup.create({"script_type": "osis", "script": "x", "job_id": job_id})
        await sup.start(job_id)
    await rds.set(keys.job("a"), "x")  # the oldest job waiting in the queue
    await rds.hset("hero:q:work:type:osis:prio:0", "a", "b")
    await rds.sadd(keys.QUEUES, "hero:q:work:type:osis:prio:0")
    assert [j["id"] for j in (await sup.list_jobs())["jobs"]] == ["b"]
    stats = {q["queue"]: q for q in await sup.queue_stats("osis")}
    assert stats["hero:q:work:type:osis"]["depth"] == 2
    assert stats["hero:q:work:type:osis:prio:0"]["depth"] == 0


async def test_a_work_queue_made_another_type_ends_its_jobs_in_error(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """A producer made a type's work queue a hash, so Redis refuses the push.
    The call used to fail whole (-32603) and leave its jobs marked dispatched,
    queued nowhere and missing from the status indexes; now each of them ends
    in error saying why, and the same call's jobs of other queues are queued.
    Another caller's answer for the same id in that call stays its own."""
    await rds.hset("hero:q:work:type:osis", "a", "b")
    for job_id, script_type in (("o1", "osis"), ("s1", "sal")):
        await sup.create(job("x", script_type=script_type, job_id=job_id))
    started = await asyncio.gather(sup.start("o1"), sup.start("s1"))  # one hero_start_jobs
    assert [s["status"] for s in started] == ["error", "dispatched"]
    ran = await sup.run(job("y", script_type="osis", job_id="r1"), wait=5)
    assert ran["status"] == "error"
    assert ran["error"].startswith("queue hero:q:work:type:osis refused it: WRONGTYPE")
    assert await rds.lrange("hero:q:work:type:sal", 0, -1) == ["s1"]
    listed = {s: {j["id"] for j in (await sup.list_jobs(status=s))["jobs"]}
              for s in ("error", "dispatched")}  # fmt: skip
    assert listed == {"error": {"o1", "r1"}, "dispatched": {"s1"}}
    answers = await asyncio.gather(  # one hero_submit_many
        sup.run(job("a", script_type="osis", job_id="same", caller_id="alice"), wait=5),
        sup.run(job("b", script_type="osis", job_id="same", caller_id="bob"), wait=5),
        return_exceptions=True,
    )
    alice, bob = answers
    assert isinstance(alice, dict) and alice["status"] == "error"
    assert isinstance(bob, Forbidden)  # not alice's result


async def test_a_refused_push_in_compat_or_stream_mode_ends_only_its_job(
    config: Config, rds: aioredis.Redis
) -> None:
    """Compat mode: a refused work queue's job leaves no copy in its legacy
    queue (an outside actor would run an ended job), and a legacy queue made
    another type is passed over. Stream mode: a refused stream ends its job
    alone; before, the whole call failed and the batch's other jobs with it."""
    sup = await Supervisor.connect(replace(config, compat_legacy=True))
    try:
        await rds.hset("hero:q:work:type:osis", "a", "b")
        assert (await sup.run(job("x", script_type="osis", job_id="c1"), wait=5))[
            "status"
        ] == "error"
        assert await rds.lrange("hero:work_queue:osis", 0, -1) == []
        await rds.hset("hero:work_queue:sal", "a", "b")
        await sup.create(job("y", script_type="sal", job_id="c2"))
        assert (await sup.start("c2"))["status"] == "dispatched"
        assert await rds.lrange("hero:q:work:type:sal", 0, -1) == ["c2"]
    finally:
        await sup.close()
    sup = await Supervisor.connect(replace(config, stream_types=("osis",)))
    try:
        await rds.lpush(keys.work_stream("osis"), "x")
        for job_id, script_type in (("t1", "osis"), ("t2", "sal")):
            await sup.create(job("z", script_type=script_type, job_id=job_id))
        started = await asyncio.gather(sup.start("t1"), sup.start("t2"))  # one hero_start_jobs
        assert [s["status"] for s in started] == ["error", "dispatched"]
        assert (await sup.get("t1"))["error"].startswith(
            f"queue {keys.work_stream('osis')} refused"
        )
    finally:
        await sup.close()


async def test_a_job_key_of_another_type_reads_as_no_such_job(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """job.get, job.status (also a user's subscribe's check of its job_ids)
    and job.output answered -32603 for a job key someone made a string."""
    await rds.set(keys.job("s1"), "x")
    reads = (sup.get, sup.status, sup.output)
    for read in reads:
        with pytest.raises(JobNotFound):
            await read("s1")


async def test_a_cycle_redis_refuses_whole_keeps_the_actor_and_its_results(
    sup: Supervisor,
    rds: aioredis.Redis,
    actors: Callable[..., Actor],
    config: Config,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Our own parked-ids set made a list fails every hero_cycle as a whole,
    after its reports are written (Redis does not roll a Function back). The
    actor used to exit; now it keeps its outcomes and its claim, says why, and
    tries again: a job ends once, and what was queued meanwhile runs once the
    key is mended."""
    actor = Actor(config, instance="refused")

    @actor.handler("osis")
    def echo(ctx: JobContext) -> str:
        return ctx.job.script

    actors(actor)
    assert (await sup.run(job("warm", script_type="osis"), wait=10))["output"] == "warm"

    def refused(times: int) -> Callable[[], Awaitable[bool]]:
        async def check() -> bool:
            return caplog.text.count("redis refused the actor's cycle") >= times

        return check

    await until_offering(rds)
    await rds.lpush(keys.ORPHANS, "junk")  # an idle actor: nothing to report, a claim to make
    await rds.hset(keys.job("queued"), mapping={"script": "queued", "status": "created"})
    await rds.lpush("hero:q:work:type:osis", "queued")  # an outside push wakes it
    await eventually(refused(1))
    await rds.delete(keys.ORPHANS)
    assert (await sup.output("queued", wait=10))["output"] == "queued"  # claimed on a retry

    await until_offering(rds)  # else "kept" is queued, and no refused cycle claims it
    await rds.lpush(keys.ORPHANS, "junk")
    kept = await sup.run(job("kept", script_type="osis", job_id="kept"), wait=10)
    assert (kept["status"], kept["output"]) == ("finished", "kept")
    await eventually(refused(3))  # the report, then its retry
    await rds.delete(keys.ORPHANS)
    assert (await sup.run(job("after", script_type="osis"), wait=15))["output"] == "after"
    ends = [f for _, f in await rds.xrange(keys.EVENTS) if f["job_id"] == "kept"]
    assert [f["event"] for f in ends if f["event"] in TERMINAL] == ["finished"]


async def test_a_refused_cycle_reports_nothing_twice_and_lets_the_actor_stop(
    fast: Config, rds: aioredis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """hero_cycle records its reports before Redis refuses the rest of it.
    Sent again, a report of attempt 1 ended attempt 2 of the same job (its
    retry, handed back to this actor); a job ended and not yet reported was
    adopted from the held list and run again; and a stopping actor kept
    sending its report and never left."""
    sup = await Supervisor.connect(fast)
    actor = Actor(fast, instance="twice", concurrency=2)
    failing = asyncio.Event()
    runs: list[int] = []

    @actor.handler("osis")
    async def flaky(ctx: JobContext) -> str:
        runs.append(ctx.job.attempt)
        if ctx.job.attempt == 1:
            failing.set()
            await asyncio.sleep(0.2)  # ends after the key is broken
            raise JobFailed("attempt 1 failed")
        await asyncio.sleep(1.0)  # attempt 2 runs across refused cycles
        return f"attempt {ctx.job.attempt}"

    async with refusal_cleared(actor, sup, rds) as serving:
        await until_offering(rds)
        await sup.create(job("x", script_type="osis", job_id="X", retries=1))
        await sup.start("X")
        await asyncio.wait_for(failing.wait(), 10)
        await rds.lpush(keys.ORPHANS, "junk")
        done = await sup.output("X", wait=20)
        assert (done["status"], done["output"]) == ("finished", "attempt 2")
        events = [f["event"] for _, f in await rds.xrange(keys.EVENTS) if f["job_id"] == "X"]
        assert [e for e in events if e in TERMINAL or e == "retrying"] == ["retrying", "finished"]
        assert "redis refused the actor's cycle" in caplog.text
        actor.stop()  # its last report was recorded: nothing holds it
        await asyncio.wait_for(asyncio.shield(serving), 5)
        assert runs == [1, 2]  # not run again by an adopt while its report was pending


async def test_a_stopping_actor_whose_cycles_are_refused_waits_for_its_running_jobs(
    config: Config, rds: aioredis.Redis
) -> None:
    """Stopping, the actor left at the first refused cycle, though a job of it
    still ran: that job's end was never reported, and it sat started. Then it
    waited, and reported that end only after its backoff between tries (by
    then 4 s); now the end of a job is tried at once."""
    sup = await Supervisor.connect(config)
    actor = Actor(config, instance="draining", concurrency=2)
    ended: dict[str, float] = {}

    @actor.handler("osis")
    async def run(ctx: JobContext) -> str:
        await asyncio.sleep(float(ctx.job.script))
        ended[ctx.job.job_id] = time.monotonic()
        return ctx.job.script

    async with refusal_cleared(actor, sup, rds) as serving:
        await until_offering(rds)
        await rds.lpush(keys.ORPHANS, "junk")
        await sup.create(job("0", script_type="osis", job_id="quick"))
        await sup.create(job("3", script_type="osis", job_id="slow"))
        await asyncio.gather(sup.start("quick"), sup.start("slow"))  # both handed to it
        assert (await sup.output("quick", wait=10))["status"] == "finished"
        await asyncio.sleep(1.7)  # refused at 0, 0.5 and 1.5 s: the backoff grew
        actor.stop()  # its cycles are refused; "slow" still runs
        assert (await sup.output("slow", wait=10))["output"] == "3"
        assert time.monotonic() - ended["slow"] < 1.0  # not after the next 4 s backoff
        await asyncio.wait_for(asyncio.shield(serving), 5)


async def test_a_job_key_of_another_type_fails_no_other_create_in_its_call(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """Creates of one loop turn (a JSON-RPC batch, several callers' calls) go
    to Redis as one Function call. A job key someone made a list failed that
    whole call: every create in it answered -32603, though the others' jobs
    were written. Now that id is taken, and only its create says so."""
    await rds.lpush(keys.job("planted"), "junk")
    results = await asyncio.gather(
        sup.create(job("a", job_id="ok1", caller_id="alice")),
        sup.create(job("b", job_id="planted", caller_id="bob")),
        sup.create(job("c", job_id="ok2")),
        return_exceptions=True,
    )
    assert results[0] == {"job_id": "ok1", "status": "created"}
    assert isinstance(results[1], Forbidden)
    assert results[2] == {"job_id": "ok2", "status": "created"}
    answers = await sup.submit_many([job("d", job_id="planted"), job("e", job_id="ok3")])
    assert [a["status"] for a in answers] == ["invalid", "dispatched"]
    assert await rds.type(keys.job("planted")) == "list"  # left as it was


@pytest.mark.parametrize("caller", ["", "alice"], ids=["admin", "caller"])
async def test_a_prerequisite_of_another_type_is_an_unknown_one(
    sup: Supervisor, rds: aioredis.Redis, caller: str
) -> None:
    """A prerequisite whose key is not a job hash failed the create (and its
    call) with -32603; it is as unknown as a missing job."""
    await rds.set(keys.job("not-a-job"), "x")
    spec = job("x", job_id="dependent", prerequisites=["not-a-job"])
    if caller:
        spec["caller_id"] = caller
    with pytest.raises(InvalidJob, match="prerequisite not-a-job is unknown"):
        await sup.create(spec)
    assert not await rds.exists(keys.job("dependent"))


async def test_an_admin_stop_or_delete_of_a_job_key_of_another_type_finds_no_job(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """An admin's (no owner check first) job.stop and job.delete answered
    -32603 for a job key someone made a string; they find no such job, and
    leave the key alone: it is not a job to delete."""
    await rds.set(keys.job("s1"), "x")
    with pytest.raises(JobNotFound):
        await sup.stop("s1")
    assert await sup.delete("s1") == {"deleted": 0}
    assert await rds.get(keys.job("s1")) == "x"


async def test_a_prerequisite_whose_dependents_are_not_a_list_fails_only_its_dependent(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """An outside job hash whose ``dependents`` is not a JSON list failed the
    create of a job depending on it half way, and with it every create of its
    call. It is no prerequisite to depend on; the call's other jobs go on."""
    await rds.hset(keys.job("odd"), mapping={"status": "created", "dependents": "oops"})
    answers = await sup.submit_many(
        [job("x", job_id="after-odd", prerequisites=["odd"]), job("y", job_id="beside")]
    )
    assert [a["status"] for a in answers] == ["invalid", "dispatched"]
    assert "prerequisite odd" in answers[0]["error"]
    assert not await rds.exists(keys.job("after-odd"))
    assert await rds.hget(keys.job("odd"), "dependents") == "oops"


async def test_a_job_redis_refuses_inside_a_producers_batch_answers_alone(
    sup: Supervisor, rds: aioredis.Redis
) -> None:
    """A command Redis refused inside one job's submit (here the dispatch's
    record of its queue, a private key someone made a string) failed the
    whole batch: ``submit_many`` raised, though the other jobs were written.
    Each such job now answers ``invalid`` with Redis's reason."""
    await rds.set(keys.QUEUES, "x")
    answers = await sup.submit_many([job("a", job_id="r1")], start=True)
    assert answers[0]["status"] == "invalid"
    assert answers[0]["error"].startswith("redis refused it: WRONGTYPE")
    created = await sup.submit_many([job("b", job_id="r2")], start=False)
    assert [a["status"] for a in created] == ["created"]
