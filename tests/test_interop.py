"""Interop with Hero parts we did not write — real redis-server, real actors.

The producer and the legacy actor here are written from the Hero job protocol
alone (DESIGN.md) with a plain redis-py client: they spell the protocol's key
names themselves on purpose, as any outside client would, instead of asking
gateway/supervisor/keys.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import redis
import redis.asyncio as aioredis

from gateway.actor import Actor, JobContext
from gateway.config import Config, resolve
from gateway.model import library as functions
from gateway.pipeline.archive import ArchiveOptions, Archiver
from gateway.pipeline.store import read_events
from gateway.supervisor import Supervisor, keys
from tests.helpers import blocked_in, by_hand, eventually, job

pytestmark = pytest.mark.timeout(90)

TYPE_Q = "hero:q:work:type:python"
GROUP_Q = TYPE_Q + ":group:g"
INST_Q = GROUP_Q + ":inst:i"
#: Every queue an actor of group g, instance i pops, each at each priority.
ALL_QUEUES = [q + prio for prio in (":prio:0", "", ":prio:2") for q in (INST_Q, GROUP_Q, TYPE_Q)]


def protocol_hash(job_id: str, script: str) -> dict[str, str]:
    """A job hash with the protocol's fields, as a Hero client writes it."""
    return {
        "id": job_id,
        "caller_id": "",
        "context_id": "ctx",
        "script": script,
        "script_type": "python",
        "timeout": "60",
        "retries": "0",
        "concurrent": "false",
        "created_at": "2026-01-01T00:00:00.000Z",
        "status": "dispatched",
        "env_vars": "{}",
        "prerequisites": "[]",
        "dependents": "[]",
    }


async def push(rds: aioredis.Redis, queue: str, job_id: str, fields: dict[str, str]) -> int:
    """HSET (when there are fields) then LPUSH, nothing else; the Redis time of
    the push in whole ms, as events carry it."""
    if fields:
        await rds.hset(f"hero:job:{job_id}", mapping=fields)
    async with rds.pipeline(transaction=True) as pipe:
        pipe.lpush(queue, job_id)
        pipe.time()
        _, (sec, usec) = await pipe.execute()
    return int(sec) * 1000 + int(usec) // 1000


async def ended(rds: aioredis.Redis, job_id: str, within: float = 10.0) -> dict[str, str]:
    async def done() -> bool:
        status = await rds.hget(f"hero:job:{job_id}", "status")
        return status in {"finished", "error"}

    await eventually(done, within=within)
    fields: dict[str, str] = await rds.hgetall(f"hero:job:{job_id}")
    return fields


async def events_of(rds: aioredis.Redis, job_id: str) -> list[dict[str, str]]:
    return [f for _, f in await rds.xrange("hero:events") if f["job_id"] == job_id]


@pytest.fixture
def quick(config: Config) -> Config:
    """A short grace for ids whose hash is not there yet."""
    return replace(config, outside_grace=0.3)


@pytest.fixture
def echo(quick: Config, actors: Callable[..., Actor]) -> Callable[..., Actor]:
    """Start in-process actors (stopped at teardown) whose python jobs echo their script."""

    def start(config: Config = quick, **kwargs: Any) -> Actor:
        actor = Actor(config, **kwargs)

        @actor.handler("python")
        def run(ctx: JobContext) -> str:
            return f"ran {ctx.job.script}"

        return actors(actor)

    return start


async def test_an_idle_actor_serves_raw_pushes_on_every_queue(
    sup: Supervisor, config: Config, rds: aioredis.Redis
) -> None:
    """The issue's case: a real actor process idle for 10 s, then jobs from a
    plain HSET + LPUSH on each queue level and priority."""
    env = dict(os.environ, HERO_REDIS_URL=config.redis_url or "", HERO_LOG_DIR=config.log_dir or "")
    argv = ["actor", "--script-type", "python", "--group", "g", "--instance", "i"]
    proc = subprocess.Popen([sys.executable, "-m", "gateway.cli", *argv], env=env)
    try:

        async def present() -> bool:
            return len(await sup.actors("python")) == 1

        await eventually(present, within=20)
        await asyncio.sleep(10)  # idle: no wake-up of ours reaches it from here on
        latencies = []
        for n, queue in enumerate(ALL_QUEUES):
            job_id = f"raw-{n}"
            pushed = await push(rds, queue, job_id, protocol_hash(job_id, f"print({n} * 2)"))
            final = await ended(rds, job_id)
            assert (final["status"], final["output"]) == ("finished", f"{n * 2}\n"), final
            started = [e for e in await events_of(rds, job_id) if e["event"] == "started"]
            latencies.append(int(started[0]["ts"]) - pushed)
            assert latencies[-1] < 500, (queue, latencies[-1])
        print("\npickup latency LPUSH -> claim (ms, 1 ms resolution):", latencies)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            await asyncio.to_thread(proc.wait, 15)
        finally:
            proc.kill()
            proc.wait()


async def test_an_outside_job_is_a_job_like_ours(
    sup: Supervisor, quick: Config, rds: aioredis.Redis, echo: Any, tmp_path: Path
) -> None:
    """A minimal hash (a script and a field we do not know) is served with
    defaults and shows in job.get, job.list, queue.stats, events and the archive."""
    echo(group="g", instance="i")
    await push(rds, GROUP_Q + ":prio:2", "mini", {"script": "hi", "vendor_field": "x"})
    final = await ended(rds, "mini")
    assert (final["status"], final["output"]) == ("finished", "ran hi")
    got = await sup.get("mini")
    assert got["id"] == "mini"
    assert "vendor_field" not in got  # not in the contract's Job: not shown
    expected = {"script_type": "python", "group": "g", "priority": 2, "timeout": 300}
    assert {k: got[k] for k in expected} == expected
    assert got["retries"] == 0 and got["caller_id"] is None and got["created_at"]
    assert got["queue"] == GROUP_Q + ":prio:2" and got["attempt"] == 1
    assert [j["id"] for j in (await sup.list_jobs(status="finished"))["jobs"]] == ["mini"]
    assert [j["id"] for j in (await sup.list_jobs(script_type="python"))["jobs"]] == ["mini"]
    assert GROUP_Q + ":prio:2" in {q["queue"] for q in await sup.queue_stats("python")}
    events = [e["event"] for e in await events_of(rds, "mini")]
    assert events == ["created", "dispatched", "started", "finished"]
    with redis.Redis.from_url(quick.redis, decode_responses=True) as client:
        options = ArchiveOptions(out=tmp_path / "archive", consumer="c1", batch=100)
        await asyncio.to_thread(Archiver(client, options).run, once=True)
    archived = read_events(tmp_path / "archive").column("job_id").to_pylist()
    assert archived.count("mini") == 4


async def test_a_burst_of_raw_pushes_is_served_once_each(rds: aioredis.Redis, echo: Any) -> None:
    """300 jobs pushed by an outside producer in one pipeline, over all nine
    queues, to three actors that pop them: none lost, each finished once."""
    for n in range(3):
        echo(group="g", instance="i" if n == 0 else f"other{n}", concurrency=4)
    await asyncio.sleep(0.3)  # idle: the actors wait for work, the path under test
    ids = [f"burst-{n}" for n in range(300)]
    async with rds.pipeline(transaction=False) as pipe:
        for n, job_id in enumerate(ids):
            pipe.hset(f"hero:job:{job_id}", mapping={"script": job_id})
            pipe.lpush(ALL_QUEUES[n % len(ALL_QUEUES)], job_id)
        await pipe.execute()

    async def all_finished() -> bool:
        finished: int = await rds.zcard(keys.index_status("finished"))
        return finished == len(ids)

    await eventually(all_finished, within=30)
    finished = [e["job_id"] for _, e in await rds.xrange("hero:events") if e["event"] == "finished"]
    assert sorted(finished) == sorted(ids)
    outputs = [await rds.hget(f"hero:job:{j}", "output") for j in ids]
    assert outputs == [f"ran {j}" for j in ids]


@pytest.mark.parametrize(
    ("commands", "channels"),
    [(["+@all", "-client|tracking"], ["*"]), (["+@all"], ["hero:*"])],
    ids=["no-tracking", "no-invalidate-channel"],
)
async def test_without_client_tracking_an_actor_looks_at_its_queues(
    quick: Config,
    redis_url: str,
    rds: aioredis.Redis,
    echo: Any,
    commands: list[str],
    channels: list[str],
) -> None:
    """A Redis ACL user that may not use CLIENT TRACKING or hear its channel (a
    managed Redis may say so): the actor falls back to looking at its queues
    and still serves raw pushes."""
    await rds.acl_setuser(
        "limited", enabled=True, passwords=["+pw"], keys=["*"], channels=channels,
        commands=commands, reset=True,
    )  # fmt: skip
    try:
        echo(replace(quick, redis_url=redis_url.replace("redis://", "redis://limited:pw@")))
        await asyncio.sleep(0.3)  # idle: it looks at its queues, the path under test
        await push(rds, TYPE_Q, "polled", {"script": "p"})
        final = await ended(rds, "polled", within=2)
        assert (final["status"], final["output"]) == ("finished", "ran p")
    finally:
        await rds.acl_deluser("limited")


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({}, "no job hash for the id popped from " + TYPE_Q),
        ({"script_type": "python", "status": "dispatched"}, "the job hash has no script"),
        ({"script": "x", "env_vars": "not json"}, "env_vars is not a JSON object of strings"),
    ],
    ids=["no-hash", "no-script", "bad-env"],
)
async def test_a_malformed_outside_job_ends_in_error_with_its_reason(
    sup: Supervisor, rds: aioredis.Redis, echo: Any, fields: dict[str, str], reason: str
) -> None:
    echo()
    await push(rds, TYPE_Q, "bad", fields)
    final = await ended(rds, "bad")
    assert (final["status"], final["error"]) == ("error", reason)
    assert (await sup.output("bad", wait=1))["error"] == reason
    assert [j["id"] for j in (await sup.list_jobs(status="error"))["jobs"]] == ["bad"]
    assert await rds.llen(TYPE_Q) == 0 and await rds.zcard(keys.ORPHANS) == 0


async def test_an_id_pushed_before_its_hash_is_served_after_the_grace(
    sup: Supervisor, rds: aioredis.Redis, echo: Any
) -> None:
    echo()
    await push(rds, TYPE_Q, "early", {})
    await asyncio.sleep(0.05)  # the producer's HSET comes a little later
    await rds.hset("hero:job:early", mapping={"script": "late hash", "script_type": "python"})
    final = await ended(rds, "early")
    assert (final["status"], final["output"]) == ("finished", "ran late hash")


async def legacy_actor(client: aioredis.Redis, script_type: str, served: list[str]) -> None:
    """An old Hero actor: BLPOP its legacy queue, write the hash, LPUSH the reply.
    It never compares and sets: it runs whatever it pops."""
    while True:
        popped = await client.blpop([f"hero:job:actor_queue:{script_type}"], timeout=1)
        if popped is None:
            continue
        job_id = popped[1]
        served.append(job_id)  # before its end is written, which a waiter may see at once
        script = await client.hget(f"hero:job:{job_id}", "script")
        await client.hset(f"hero:job:{job_id}", "status", "started")
        output = f"legacy ran {script}"
        await client.hset(f"hero:job:{job_id}", mapping={"output": output, "status": "finished"})
        await client.lpush(f"hero:reply:{job_id}", output)


@pytest.fixture
def compat(quick: Config) -> Config:
    return replace(quick, compat_legacy=True, legacy_queues=(("python", ("actor_queue",)),))


async def test_compat_mode_feeds_an_actor_queue_actor(compat: Config, rds: aioredis.Redis) -> None:
    sup = await Supervisor.connect(compat)
    client = aioredis.Redis.from_url(compat.redis, decode_responses=True)
    served: list[str] = []
    old = asyncio.create_task(legacy_actor(client, "python", served))
    try:
        result = await sup.run(job("hello", job_id="c1"), wait=10)
        assert (result["status"], result["output"]) == ("finished", "legacy ran hello")
        assert served == ["c1"]
        assert await rds.llen("hero:work_queue:python") == 0  # not a kind python uses
    finally:
        old.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await old
        await client.aclose()
        await sup.close()


async def test_our_claim_takes_a_dual_pushed_job_out_of_every_legacy_queue(
    compat: Config, rds: aioredis.Redis, echo: Any
) -> None:
    both = replace(compat, legacy_queues=(("python", ("work_queue", "actor_queue")),))
    sup = await Supervisor.connect(both)
    copies = ["hero:job:actor_queue:python", "hero:work_queue:w1", TYPE_Q]
    try:
        await sup.create(job("stopped", job_id="d0", worker_id="w1"))
        await sup.start("d0")
        assert [await rds.lrange(q, 0, -1) for q in copies] == [["d0"]] * 3
        await sup.stop("d0")  # stopped while queued: no copy is left
        assert [await rds.llen(q) for q in copies] == [0, 0, 0]
        await sup.create(job("twice", job_id="d1", worker_id="w1"))
        await sup.start("d1")
        assert [await rds.lrange(q, 0, -1) for q in copies] == [["d1"]] * 3
        echo(both)
        assert (await sup.output("d1", wait=10))["output"] == "ran twice"
        assert [await rds.llen(q) for q in copies] == [0, 0, 0]
    finally:
        await sup.close()


def test_legacy_queues_setting_per_type() -> None:
    env = {
        "HERO_COMPAT_LEGACY": "1",
        "HERO_LEGACY_QUEUES": "python=actor_queue,osis=work_queue+actor_queue",
    }
    config = resolve(environ=env)
    assert config.legacy_queues == (
        ("python", ("actor_queue",)),
        ("osis", ("work_queue", "actor_queue")),
    )
    assert functions.compat_spec(config) == "1;python=actor_queue;osis=work_queue+actor_queue"
    assert functions.compat_spec(replace(config, compat_legacy=False)) == "0"
    for bad, message in [
        ("python=bogus", "unknown legacy queue 'bogus'"),
        ("python", "not type=kind"),
        ("nope=work_queue", "HERO_LEGACY_QUEUES: nope not among the script types"),
    ]:
        with pytest.raises(SystemExit, match=message):
            resolve(environ={"HERO_LEGACY_QUEUES": bad})


# -- ends written by outside actors ------------------------------------------------------


async def terminal_events(rds: aioredis.Redis, job_id: str) -> list[dict[str, str]]:
    ends = {"finished", "error", "stopped", "timeout", "dlq"}
    return [e for e in await events_of(rds, job_id) if e["event"] in ends]


async def assert_ended_once(rds: aioredis.Redis, job_id: str, output: str) -> None:
    """One terminal event, finished_at, and the retention our own ends get."""
    assert [(e["status"], e["output"]) for e in await terminal_events(rds, job_id)] == [
        ("finished", output)
    ]
    assert await rds.hget(f"hero:job:{job_id}", "finished_at")
    assert await rds.ttl(f"hero:job:{job_id}") > 0
    assert await rds.ttl(f"hero:q:reply:{job_id}") > 0
    assert await rds.zscore(keys.index_status("finished"), job_id) is not None


@pytest.mark.parametrize("outside_first", [True, False], ids=["outside-first", "ours-first"])
async def test_compat_the_first_end_of_a_job_run_twice_is_its_end(
    compat: Config, rds: aioredis.Redis, actors: Callable[..., Actor], outside_first: bool
) -> None:
    """A legacy actor pops its copy, one of ours claims the canonical copy, both
    run it (outside actors do not compare-and-set). The first end reaches the
    waiter at once, as the job's one terminal event; the later one is dropped."""
    release = asyncio.Event()
    ours = Actor(compat)

    @ours.handler("python")
    async def run(ctx: JobContext) -> str:
        await release.wait()
        return "ours"

    actors(ours)
    sup = await Supervisor.connect(compat)
    client = aioredis.Redis.from_url(
        compat.redis, decode_responses=True, client_name="legacy-actor"
    )

    async def outside() -> None:
        """Pops first, waits until ours runs (or ended) the job, then ends it."""
        _, job_id = await client.blpop(["hero:job:actor_queue:python"])
        key = f"hero:job:{job_id}"

        async def turn() -> bool:
            status: str | None = await client.hget(key, "status")
            return status == ("started" if outside_first else "finished")

        await eventually(turn)
        await client.hset(key, "status", "started")
        await client.hset(key, mapping={"status": "finished", "output": "legacy"})
        await client.lpush(f"hero:q:reply:{job_id}", "legacy")

    try:
        await eventually(lambda: _present(sup))
        legacy = asyncio.create_task(outside())
        # its BLPOP, not our actor's own (for stop requests)
        await eventually(lambda: blocked_in(rds, "blpop", name="legacy-actor"))
        waiter = asyncio.create_task(sup.run(job("twice", job_id="t1"), wait=10))
        if outside_first:
            await legacy
            result = await asyncio.wait_for(waiter, 3)  # while ours still runs it
            release.set()
        else:
            release.set()
            result = await waiter
            await legacy
        first = "legacy" if outside_first else "ours"
        assert (result["status"], result["output"]) == ("finished", first)

        async def ours_done() -> bool:
            held: int = await rds.llen(keys.held("python", "default", ours.instance))
            return held == 0

        await eventually(ours_done)
        # ours reported its late result: nothing may follow, and no later event of
        # ours is sure to come after a repeat (the hash watcher could write one): time
        await asyncio.sleep(0.2)
        await assert_ended_once(rds, "t1", first)
        assert await rds.hget("hero:job:t1", "output") == "legacy"  # the last write, no CAS
    finally:
        release.set()
        await client.aclose()
        await sup.close()


async def _present(sup: Supervisor) -> bool:
    return len(await sup.actors("python")) == 1


@pytest.mark.parametrize(
    ("legacy", "popped"),
    [((), "hero:q:work:type:osis"), ((("osis", ("work_queue",)),), "hero:work_queue:osis")],
    ids=["canonical", "legacy-copy"],
)
async def test_an_outside_actors_end_is_retained_and_its_copies_go(
    quick: Config, rds: aioredis.Redis, legacy: tuple[tuple[str, tuple[str, ...]], ...], popped: str
) -> None:
    """An outside actor ends a job of ours in the hash and its reply queue: the
    waiter's sweep records that end once, with our retention, and the copies
    the actor did not pop leave the queues (queue.stats shows nothing waiting)."""
    config = replace(quick, compat_legacy=bool(legacy), legacy_queues=legacy)
    sup = await Supervisor.connect(config)
    client = aioredis.Redis.from_url(config.redis, decode_responses=True)

    async def outside() -> None:
        _, job_id = await client.blpop([popped])
        await client.hset(f"hero:job:{job_id}", "status", "started")
        async with client.pipeline(transaction=True) as pipe:
            pipe.hset(f"hero:job:{job_id}", mapping={"status": "finished", "output": "osis"})
            pipe.lpush(f"hero:q:reply:{job_id}", "osis")
            await pipe.execute()

    try:
        actor = asyncio.create_task(outside())
        result = await sup.run(job("x", script_type="osis", job_id="o1"), wait=10)
        await actor
        assert (result["status"], result["output"]) == ("finished", "osis")
        await assert_ended_once(rds, "o1", "osis")
        assert [await rds.llen(q) for q in ("hero:q:work:type:osis", popped)] == [0, 0]
        assert [q["depth"] for q in await sup.queue_stats("osis")] == [0]
        await sup.reconcile("o1")  # a second look records nothing more
        assert len(await terminal_events(rds, "o1")) == 1
    finally:
        await client.aclose()
        await sup.close()


async def test_an_outside_end_nobody_waits_for_is_recorded_by_maintenance(
    quick: Config, rds: aioredis.Redis
) -> None:
    """An outside actor pops the only copy of a job of ours and ends it in the
    hash; no waiter sweeps it and no actor of ours meets it: the maintenance
    tick records that end, once, with our retention."""
    sup = await Supervisor.connect(quick)
    try:
        await by_hand(sup, rds)
        await sup.create(job("x", script_type="osis", job_id="n1"))
        await sup.start("n1")
        assert await rds.lpop("hero:q:work:type:osis") == "n1"
        await rds.hset("hero:job:n1", mapping={"status": "finished", "output": "osis"})
        await rds.lpush("hero:q:reply:n1", "osis")
        assert (await sup.maintenance.tick())["expired"] == 1
        await assert_ended_once(rds, "n1", "osis")
        assert (await sup.maintenance.tick())["expired"] == 0  # recorded once
        assert len(await terminal_events(rds, "n1")) == 1
    finally:
        await sup.close()


async def test_a_claim_that_meets_an_outside_end_records_it(
    compat: Config, rds: aioredis.Redis, echo: Any
) -> None:
    """Nobody waits: a legacy actor ends a job from its copy, and our actor that
    later pops the canonical copy records that end instead of running it."""
    sup = await Supervisor.connect(compat)
    try:
        await sup.create(job("late", job_id="m1"))
        await sup.start("m1")
        assert await rds.lpop("hero:job:actor_queue:python") == "m1"
        await rds.hset("hero:job:m1", mapping={"status": "finished", "output": "legacy"})
        await rds.lpush("hero:q:reply:m1", "legacy")
        echo(compat)
        await eventually(lambda: _no_copy_left(rds))
        await assert_ended_once(rds, "m1", "legacy")
    finally:
        await sup.close()


async def _no_copy_left(rds: aioredis.Redis) -> bool:
    queued: int = await rds.llen(TYPE_Q)
    if queued:
        return False
    dispatched: int = await rds.zcard(keys.index_status("dispatched"))
    return dispatched == 0


async def test_an_outside_write_after_the_end_is_no_transition(
    compat: Config, rds: aioredis.Redis
) -> None:
    """A legacy actor ignores the stop of a job it popped and writes its end
    (or a producer re-HSETs an ended job): the job stays ended as recorded."""
    sup = await Supervisor.connect(compat)
    try:
        await sup.create(job("stop me", job_id="s1"))
        await sup.start("s1")
        assert await rds.lpop("hero:job:actor_queue:python") == "s1"
        await sup.stop("s1")
        for late in ("finished", "dispatched"):
            await rds.hset("hero:job:s1", "status", late)
            await sup.reconcile("s1")
        assert [e["event"] for e in await events_of(rds, "s1")][-1] == "stopped"
        assert [e["status"] for e in await terminal_events(rds, "s1")] == ["stopped"]
        for status in ("finished", "dispatched"):
            assert await rds.zscore(keys.index_status(status), "s1") is None
    finally:
        await sup.close()


async def test_a_reply_pushed_after_the_recorded_end_goes_with_its_job(
    quick: Config, rds: aioredis.Redis
) -> None:
    """An outside actor writes its end, the sweep records it, and only then does
    the actor push its reply (two commands, no transaction): the reply has no
    TTL of its own, so it is deleted when its job's retention ends."""
    sup = await Supervisor.connect(replace(quick, job_ttl=1))
    try:
        await sup.create(job("x", script_type="osis", job_id="r1"))
        await sup.start("r1")
        await rds.hset("hero:job:r1", mapping={"status": "finished", "output": "osis"})
        await sup.reconcile("r1")
        await rds.lpush("hero:q:reply:r1", "osis")
        assert await rds.ttl("hero:q:reply:r1") == -1

        async def gone() -> bool:
            return not await rds.exists("hero:job:r1", "hero:q:reply:r1")

        await eventually(gone, within=10)
    finally:
        await sup.close()
